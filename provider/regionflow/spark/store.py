"""The partition store and the sink committer: where a run's data lives and how attempts publish it.

This module owns the on-disk layout of a run, the first-commit-wins protocol between attempts of a
unit (one Spark application's worth of regions), and the once-only publication of sink files into a
user's output path. It never imports PySpark: the runner that schedules and commits does not need
Spark. Local paths and ``file://`` URIs go through `LocalFileSystem`; any other Hadoop URI
(``hdfs://``, ``s3a://``, ...) through `HadoopFileSystem`, which borrows the JVM of a Spark session
handed in by the caller.

Layout of one run::

    {data_dir}/{run_id}/
      _attempts/{unit_key}/{attempt_id}/     an attempt's private output, invisible to readers
        e{edge}/_rf_unit={u}/part-*.parquet  a blocking edge: one Parquet dataset per unit, a directory
                                             per consumer unit, at most one file per core in each
        _sink/{vertex}/_rf_subtask={s}/part-*.parquet   staged sink output: one file per core, numbered by
                                             the unit's subtasks (at most one file per subtask)
      units/{unit_key}/                      the committed attempt: same tree, plus
        _manifest.json, _SUCCESS             written before the rename that publishes the unit

Atomicity: an attempt writes everything, then the manifest, then ``_SUCCESS``, then renames its whole
directory to ``units/{unit_key}`` in one step. Readers only resolve paths under ``units/``, so they see
no unit or a complete one. The rename must not replace an existing target: locally it uses
``renameat2(RENAME_NOREPLACE)`` (falling back to ``rename(2)``, which refuses to replace the winner's
non-empty directory); through Hadoop, ``FileSystem.rename`` moves a source *into* an existing target
directory on some file systems (HDFS, and the local file system's copy fallback), so every commit
reads the committed manifest back and, if another attempt's id is there, removes its own stray copy
and reports the loss. Object stores (``s3a://``) have no atomic directory rename at all: there the
protocol still picks one winner per manifest but a reader may see a half-copied unit; keep the data
dir on a local, NFS or HDFS path.
"""
from __future__ import annotations

import ctypes
import errno
import hashlib
import json
import os
import re
import shutil
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import unquote, urlparse

from ..core.errors import RegionflowError

MANIFEST = "_manifest.json"
SUCCESS = "_SUCCESS"
SINK_MARKER = "_regionflow_sink.json"
ATTEMPTS = "_attempts"
RELEASED_SUFFIX = ".released"  # beside a released partition dataset of a committed unit
UNITS = "units"
SINK_STAGING = "_sink"
# Columns of the Parquet datasets regionflow writes; partition columns are Hive-style directories.
UNIT_COLUMN = "_rf_unit"  # partition column of a blocking edge's dataset: the consumer unit a row goes to
BUCKET_COLUMN = "_rf_bucket"  # data column: the consumer subtask a row goes to
SUBTASK_COLUMN = "_rf_subtask"  # partition column of a staged sink: the file's subtask number

# Keys become single path components on local disks, HDFS and object stores alike: no separators,
# no glob characters (Hadoop expands [] {} * ?), no ':' (HDFS rejects it), no leading '.' (hidden).
_KEY = re.compile(r"[A-Za-z0-9_+=-][A-Za-z0-9_.+=-]{0,199}")
# Run ids come from Airflow (``scheduled__2026-11-22T00:00:00+00:00``): ':' and '~' are allowed locally.
_RUN_ID = re.compile(r"[A-Za-z0-9_+=~:-][A-Za-z0-9_.+=~:-]{0,249}")
_UNSAFE = re.compile(r"[^A-Za-z0-9_.+=-]+")


class StoreError(RegionflowError):
    """The partition store or a sink path cannot be used as asked."""


class SinkConflictError(StoreError):
    """A sink path already holds output that this job and run must not mix with."""


# ---- names -----------------------------------------------------------------------------------------


def validate_key(value: str, what: str = "unit key") -> str:
    """Return `value` if it is one safe path component, else raise StoreError naming it."""
    if not isinstance(value, str) or not _KEY.fullmatch(value):
        raise StoreError(
            f"bad {what} {value!r}: use 1-200 characters from A-Z a-z 0-9 _ . + = - , not starting with '.' "
            f"(safe_component() maps any name to one)"
        )
    return value


def validate_run_id(value: str) -> str:
    if not isinstance(value, str) or not _RUN_ID.fullmatch(value):
        raise StoreError(
            f"bad run id {value!r}: use 1-250 characters from A-Z a-z 0-9 _ . + = ~ : - , not starting with '.'"
        )
    return value


def safe_component(name: str) -> str:
    """Map any name (a region name such as ``orders+clean[2]``, an Airflow run id) to a valid key."""
    return _UNSAFE.sub("-", name).strip("-.")[:200] or "unit"


def run_key_for(dag_id: str, run_id: str) -> str:
    """The partition store's run directory of one DAG run."""
    return safe_component(f"{dag_id}--{run_id}")


def vertex_component(vertex: str) -> str:
    """A vertex name as one path component: as is when safe, else made safe plus a hash of the name
    (vertex names are free-form; two names must not share a staging directory)."""
    if _KEY.fullmatch(vertex):
        return vertex
    return f"{safe_component(vertex)[:180]}-{hashlib.sha1(vertex.encode('utf-8')).hexdigest()[:10]}"


def partition_relpath(edge: int) -> str:
    """Inside an attempt or unit dir: the Parquet dataset of job edge `edge` (one per unit)."""
    return f"e{int(edge)}"


def join(base: str, *parts: str) -> str:
    """Join with '/', for local paths and URIs alike."""
    return "/".join([base.rstrip("/") or "", *parts]) if parts else base


# ---- file systems ----------------------------------------------------------------------------------


class FileSystem(Protocol):
    """The few operations the store needs; paths are strings (local paths or URIs)."""

    def exists(self, path: str) -> bool: ...

    def is_dir(self, path: str) -> bool: ...

    def mkdirs(self, path: str) -> None: ...

    def delete(self, path: str) -> bool:
        """Recursive; False if nothing was there."""

    def rename(self, src: str, dst: str) -> bool:
        """Atomic move that never replaces: False if `dst` exists."""

    def replace(self, src: str, dst: str) -> None:
        """Move a file over an existing one (atomic where the file system allows)."""

    def list_dir(self, path: str) -> list[str]:
        """Entry names; [] if the directory is absent."""

    def read_bytes(self, path: str) -> bytes: ...

    def write_bytes(self, path: str, data: bytes) -> None: ...

    def read_text(self, path: str) -> str: ...

    def write_text(self, path: str, text: str) -> None: ...

    def publish_file(self, src: str, dst: str) -> bool:
        """Make a whole copy of file `src` appear at `dst` at once, only if `dst` is absent."""

    def size(self, path: str) -> int:
        """Bytes under `path` (0 if absent)."""


class LocalFileSystem:
    """Local paths and ``file://`` URIs through os and shutil."""

    def exists(self, path: str) -> bool:
        return os.path.lexists(local_path(path))

    def is_dir(self, path: str) -> bool:
        return os.path.isdir(local_path(path))

    def mkdirs(self, path: str) -> None:
        os.makedirs(local_path(path), exist_ok=True)

    def delete(self, path: str) -> bool:
        target = local_path(path)
        if os.path.isdir(target) and not os.path.islink(target):
            _remove_tree(target)
            return True
        try:
            os.unlink(target)
            return True
        except FileNotFoundError:
            return False

    def rename(self, src: str, dst: str) -> bool:
        source, target = local_path(src), local_path(dst)
        done = _rename_noreplace(source, target)
        if done is not None:
            return done
        if os.path.lexists(target):
            return False
        try:
            if os.path.isdir(source):
                os.rename(source, target)  # refuses to replace a non-empty directory
            else:
                os.link(source, target)  # refuses to replace anything
                os.unlink(source)
            return True
        except OSError as error:
            if error.errno in (errno.EEXIST, errno.ENOTEMPTY):
                return False
            raise

    def replace(self, src: str, dst: str) -> None:
        os.replace(local_path(src), local_path(dst))

    def list_dir(self, path: str) -> list[str]:
        try:
            return sorted(os.listdir(local_path(path)))
        except (FileNotFoundError, NotADirectoryError):
            return []

    def read_bytes(self, path: str) -> bytes:
        with open(local_path(path), "rb") as handle:
            return handle.read()

    def write_bytes(self, path: str, data: bytes) -> None:
        with open(local_path(path), "wb") as handle:
            handle.write(data)

    def read_text(self, path: str) -> str:
        return self.read_bytes(path).decode("utf-8")

    def write_text(self, path: str, text: str) -> None:
        self.write_bytes(path, text.encode("utf-8"))

    def publish_file(self, src: str, dst: str) -> bool:
        source, target = local_path(src), local_path(dst)
        try:
            os.link(source, target)  # a hard link: the whole file at once, never over an existing one
            return True
        except FileExistsError:
            return False
        except OSError as error:
            if error.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP):
                raise
        return self._publish_copy(source, target)

    def _publish_copy(self, source: str, target: str) -> bool:
        """Across file systems: copy next to the target under a hidden name, then link it in."""
        temp = os.path.join(os.path.dirname(target), f".{os.path.basename(target)}.{uuid.uuid4().hex}.tmp")
        shutil.copyfile(source, temp)
        try:
            os.link(temp, target)
            return True
        except FileExistsError:
            return False
        finally:
            os.unlink(temp)

    def size(self, path: str) -> int:
        target = local_path(path)
        if not os.path.isdir(target):
            return os.path.getsize(target) if os.path.isfile(target) else 0
        total = 0
        for folder, _, files in os.walk(target):
            for name in files:
                try:
                    total += os.lstat(os.path.join(folder, name)).st_size
                except FileNotFoundError:
                    pass
        return total

    def __repr__(self) -> str:
        return "LocalFileSystem()"


def local_path(path: str) -> str:
    """``file:///a/b`` and ``file:/a/b`` -> ``/a/b``; plain paths unchanged."""
    if not path.startswith("file:"):
        return path
    parsed = urlparse(path)
    if parsed.netloc not in ("", "localhost"):
        raise StoreError(f"{path}: a file:// URI with a host ({parsed.netloc}) is not a local path; "
                         "use file:///absolute/path")
    return unquote(parsed.path) or "/"


def _remove_tree(target: str) -> None:
    # a concurrent delete of the same tree (two cleanups racing) makes rmtree trip over vanished entries
    for _ in range(3):
        try:
            shutil.rmtree(target)
            return
        except FileNotFoundError:
            if not os.path.lexists(target):
                return
    shutil.rmtree(target)


_RENAME_NOREPLACE = 1
_AT_FDCWD = -100
_renameat2: Any = None  # libc's renameat2 (a ctypes function), False where libc lacks it; None until looked up


def _rename_noreplace(source: str, target: str) -> bool | None:
    """renameat2(RENAME_NOREPLACE): True, False if the target exists, None if unsupported here."""
    global _renameat2
    if _renameat2 is None:
        libc = ctypes.CDLL(None, use_errno=True)
        _renameat2 = getattr(libc, "renameat2", False)
    if not _renameat2:
        return None
    if _renameat2(_AT_FDCWD, os.fsencode(source), _AT_FDCWD, os.fsencode(target), _RENAME_NOREPLACE) == 0:
        return True
    code = ctypes.get_errno()
    if code == errno.EEXIST:
        return False
    if code in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP):
        return None  # the file system does not support the flag
    raise OSError(code, os.strerror(code), source)


class HadoopFileSystem:
    """Any Hadoop URI through the Hadoop FileSystem API of a classic Spark session's JVM (py4j)."""

    def __init__(self, spark: Any) -> None:
        jvm = getattr(spark, "_jvm", None)
        jsc = getattr(spark, "_jsc", None)
        if jvm is None or jsc is None:
            raise StoreError("HadoopFileSystem needs a classic Spark session with a JVM (spark._jvm, spark._jsc); "
                             "a Spark Connect session does not expose Hadoop's FileSystem: use a local data dir")
        self._jvm = jvm
        self._conf = jsc.hadoopConfiguration()

    def _resolve(self, path: str):
        jpath = self._jvm.org.apache.hadoop.fs.Path(path)
        return jpath.getFileSystem(self._conf), jpath

    def _call(self, action: str, path: str, function):
        try:
            return function()
        except Exception as error:  # py4j's Py4JJavaError: keep py4j an optional, lazy dependency
            raise _as_os_error(error, action, path) from error

    def exists(self, path: str) -> bool:
        fs, jpath = self._resolve(path)
        return bool(self._call("exists", path, lambda: fs.exists(jpath)))

    def is_dir(self, path: str) -> bool:
        fs, jpath = self._resolve(path)
        return self.exists(path) and bool(self._call("stat", path, lambda: fs.getFileStatus(jpath).isDirectory()))

    def mkdirs(self, path: str) -> None:
        fs, jpath = self._resolve(path)
        if not self._call("mkdirs", path, lambda: fs.mkdirs(jpath)):
            raise OSError(errno.EIO, "Hadoop FileSystem.mkdirs returned false", path)

    def delete(self, path: str) -> bool:
        fs, jpath = self._resolve(path)
        return bool(self._call("delete", path, lambda: fs.delete(jpath, True)))

    def rename(self, src: str, dst: str) -> bool:
        fs, source = self._resolve(src)
        _, target = self._resolve(dst)
        # the pre-check keeps the common case clean; a racing loser may still land *inside* an existing
        # target directory (HDFS semantics), which PartitionStore.commit detects and removes
        if self._call("exists", dst, lambda: fs.exists(target)):
            return False
        return bool(self._call("rename", src, lambda: fs.rename(source, target)))

    def replace(self, src: str, dst: str) -> None:
        # FileSystem has no atomic overwrite: for a moment `dst` is absent, never partial
        fs, source = self._resolve(src)
        _, target = self._resolve(dst)
        self._call("delete", dst, lambda: fs.delete(target, False))
        if not self._call("rename", src, lambda: fs.rename(source, target)):
            raise OSError(errno.EIO, f"Hadoop rename of {src} over {dst} returned false", dst)

    def list_dir(self, path: str) -> list[str]:
        fs, jpath = self._resolve(path)
        if not self._call("exists", path, lambda: fs.exists(jpath)):
            return []
        statuses = self._call("listStatus", path, lambda: fs.listStatus(jpath))
        return sorted(status.getPath().getName() for status in statuses)

    def read_bytes(self, path: str) -> bytes:
        fs, jpath = self._resolve(path)

        def read() -> bytes:
            stream = fs.open(jpath)
            try:
                return bytes(self._jvm.org.apache.hadoop.io.IOUtils.readFullyToByteArray(stream))
            finally:
                stream.close()

        return self._call("read", path, read)

    def write_bytes(self, path: str, data: bytes) -> None:
        fs, jpath = self._resolve(path)

        def write() -> None:
            stream = fs.create(jpath, True)
            try:
                stream.write(bytearray(data))
            finally:
                stream.close()

        self._call("write", path, write)

    def read_text(self, path: str) -> str:
        return self.read_bytes(path).decode("utf-8")

    def write_text(self, path: str, text: str) -> None:
        self.write_bytes(path, text.encode("utf-8"))

    def publish_file(self, src: str, dst: str) -> bool:
        if self.exists(dst):
            return False
        parent, _, name = dst.rstrip("/").rpartition("/")
        temp = f"{parent}/.{name}.{uuid.uuid4().hex}.tmp"
        fs, source = self._resolve(src)
        _, staged = self._resolve(temp)
        self._call("copy", src, lambda: self._jvm.org.apache.hadoop.fs.FileUtil.copy(
            fs, source, fs, staged, False, self._conf))
        published = self.rename(temp, dst)
        if not published:
            self.delete(temp)
        return published

    def size(self, path: str) -> int:
        fs, jpath = self._resolve(path)
        if not self._call("exists", path, lambda: fs.exists(jpath)):
            return 0
        return int(self._call("getContentSummary", path, lambda: fs.getContentSummary(jpath).getLength()))

    def __repr__(self) -> str:
        return "HadoopFileSystem()"


def _as_os_error(error: Exception, action: str, path: str) -> OSError:
    java = getattr(error, "java_exception", None)
    detail = str(java.toString()) if java is not None else str(error).strip().splitlines()[0]
    kind = FileNotFoundError if "FileNotFoundException" in detail else OSError
    return kind(errno.ENOENT if kind is FileNotFoundError else errno.EIO, f"Hadoop {action} failed: {detail}", path)


def is_local_uri(uri: str) -> bool:
    scheme = urlparse(uri).scheme
    return scheme in ("", "file") or len(scheme) == 1  # one letter: a Windows drive


def filesystem_for(uri: str, spark: Any = None) -> FileSystem:
    """LocalFileSystem for local paths and file:// URIs, HadoopFileSystem(spark) for anything else."""
    if is_local_uri(uri):
        return LocalFileSystem()
    if spark is None:
        raise StoreError(
            f"{uri} is a {urlparse(uri).scheme}:// path: regionflow reaches it through Hadoop's FileSystem, "
            "so pass a Spark session (filesystem_for(uri, spark) or fs=HadoopFileSystem(spark)), or use a local path"
        )
    return HadoopFileSystem(spark)


def write_atomically(fs: FileSystem, path: str, data: bytes, replace: bool) -> bool:
    """Write a hidden temp file beside `path`, then move it in whole. Without `replace`, an existing
    file wins and False is returned."""
    parent, _, name = path.rstrip("/").rpartition("/")
    temp = f"{parent}/.{name}.{uuid.uuid4().hex}.tmp"
    fs.write_bytes(temp, data)
    try:
        if replace:
            fs.replace(temp, path)
            return True
        return fs.rename(temp, path)
    finally:
        if fs.exists(temp):
            fs.delete(temp)


# ---- the partition store ---------------------------------------------------------------------------


@dataclass(frozen=True)
class CommitResult:
    won: bool
    winner: str  # the committed attempt's id
    unit_dir: str


@dataclass(frozen=True)
class CommittedUnit:
    unit_key: str
    path: str
    manifest: dict[str, Any]

    @property
    def attempt_id(self) -> str:
        return self.manifest["attempt_id"]


class PartitionStore:
    """Everything one run writes, under ``{data_dir}/{run_id}/``; see the module docstring."""

    def __init__(self, data_dir: str, run_id: str, fs: FileSystem | None = None, spark: Any = None) -> None:
        if not data_dir:
            raise StoreError("the data dir is empty: give a local path or a Hadoop URI")
        self.data_dir = data_dir
        self.run_id = validate_run_id(run_id)
        self.fs: FileSystem = fs if fs is not None else filesystem_for(data_dir, spark)
        self.root = join(data_dir, run_id)
        self.units_dir = join(self.root, UNITS)
        self.attempts_dir = join(self.root, ATTEMPTS)

    # ---- paths ----------------------------------------------------------------------------------

    def attempt_path(self, unit_key: str, attempt_id: str) -> str:
        return join(self.attempts_dir, validate_key(unit_key), validate_key(attempt_id, "attempt id"))

    def unit_path(self, unit_key: str) -> str:
        return join(self.units_dir, validate_key(unit_key))

    def partition_path(self, unit_key: str, edge: int) -> str:
        """A committed unit's dataset of one blocking edge; the only kind of path a reader is ever
        given (it reads the directory of its own consumer unit in it: partition pruning)."""
        return join(self.unit_path(unit_key), partition_relpath(edge))

    # ---- checks -----------------------------------------------------------------------------------

    def check_writable(self) -> None:
        """Create, read back and remove a probe file under the run root, before any Spark work."""
        probe = join(self.root, f".probe-{uuid.uuid4().hex}")
        try:
            self.fs.mkdirs(self.root)
            self.fs.write_bytes(probe, b"regionflow")
            if self.fs.read_bytes(probe) != b"regionflow":
                raise OSError(errno.EIO, "probe file read back differently", probe)
            self.fs.delete(probe)
        except OSError as error:
            raise StoreError(
                f"data dir {self.data_dir} is not usable: cannot write {self.root} ({error}); "
                f"give a data dir that this user can create, write and read, e.g. a directory under /tmp"
            ) from error

    # ---- attempts and commits -----------------------------------------------------------------------

    def attempt_dir(self, unit_key: str, attempt_id: str) -> str:
        """Create and return the private directory an attempt writes all its outputs into."""
        path = self.attempt_path(unit_key, attempt_id)
        self.fs.mkdirs(path)
        return path

    def commit(self, unit_key: str, attempt_id: str, manifest: dict[str, Any]) -> CommitResult:
        """Publish the attempt's directory as the unit, unless another attempt did first."""
        target = self.unit_path(unit_key)
        source = self.attempt_path(unit_key, attempt_id)
        winner = self.committed(unit_key)
        if winner is not None:
            return self._settle(unit_key, attempt_id, winner)
        if not self.fs.exists(source):
            raise StoreError(f"cannot commit unit {unit_key}: attempt {attempt_id} has no directory {source} "
                             f"(discarded, or never created with attempt_dir()); run the attempt again")
        try:
            self._write_commit_files(source, unit_key, attempt_id, manifest)
            self.fs.mkdirs(self.units_dir)
            self.fs.rename(source, target)
        except OSError as error:
            raise StoreError(f"commit of unit {unit_key} by attempt {attempt_id} failed moving {source} to "
                             f"{target}: {error}; check the data dir's space and permissions") from error
        winner = self.committed(unit_key)
        if winner is None:
            raise StoreError(f"commit of unit {unit_key} by attempt {attempt_id} failed: {target} holds no "
                             f"{MANIFEST} after renaming {source}; check the data dir's file system")
        return self._settle(unit_key, attempt_id, winner)

    def _write_commit_files(self, source: str, unit_key: str, attempt_id: str, manifest: dict[str, Any]) -> None:
        record = {**manifest, "unit_key": unit_key, "attempt_id": attempt_id}
        record.setdefault("committed_at", time.time())
        self.fs.write_text(join(source, MANIFEST), json.dumps(record, sort_keys=True, default=str))
        self.fs.write_bytes(join(source, SUCCESS), b"")

    def _settle(self, unit_key: str, attempt_id: str, winner: CommittedUnit) -> CommitResult:
        if winner.attempt_id == attempt_id:
            return CommitResult(True, attempt_id, winner.path)
        self._remove_stray_copy(winner, attempt_id)
        self.discard(unit_key, attempt_id)
        return CommitResult(False, winner.attempt_id, winner.path)

    def _remove_stray_copy(self, winner: CommittedUnit, attempt_id: str) -> None:
        """A Hadoop rename onto an existing directory moves the source inside it: take it out again,
        but only if it really is this attempt's tree (its manifest says so)."""
        stray = join(winner.path, attempt_id)
        manifest = _read_json(self.fs, join(stray, MANIFEST))
        if manifest is not None and manifest.get("attempt_id") == attempt_id:
            self.fs.delete(stray)

    def committed(self, unit_key: str) -> CommittedUnit | None:
        path = self.unit_path(unit_key)
        try:
            manifest = _read_json(self.fs, join(path, MANIFEST))
        except ValueError as error:
            raise StoreError(f"unit {unit_key}: committed manifest {join(path, MANIFEST)} is not valid JSON "
                             f"({error}); delete {path} to recompute the unit") from error
        return None if manifest is None else CommittedUnit(unit_key, path, manifest)

    def is_committed(self, unit_key: str) -> bool:
        return self.committed(unit_key) is not None

    def discard(self, unit_key: str, attempt_id: str) -> None:
        """Remove a killed, failed or losing attempt's files; a no-op if they are gone already."""
        self.fs.delete(self.attempt_path(unit_key, attempt_id))

    def cleanup_stale_attempts(self, unit_key: str) -> list[str]:
        """Delete every attempt of a committed unit that is still lying around; returns their ids."""
        if not self.is_committed(unit_key):
            raise StoreError(f"unit {unit_key} has no committed attempt yet: its attempts may still be running; "
                             f"discard(unit_key, attempt_id) removes one failed attempt")
        folder = join(self.attempts_dir, unit_key)
        stale = self.fs.list_dir(folder)
        for attempt_id in stale:
            self.fs.delete(join(folder, attempt_id))
        self.fs.delete(folder)
        return stale

    # ---- release ------------------------------------------------------------------------------------

    def release(self, paths: Iterable[str]) -> int:
        """Delete committed partitions no consumer will read again; returns the bytes freed. Each leaves
        a ``<dataset>.released`` mark, so a consumer run again later is told why its input is gone."""
        freed = 0
        prefix = self.units_dir.rstrip("/") + "/"
        for path in paths:
            if not path.startswith(prefix) or "/../" in path or path.endswith("/.."):
                raise StoreError(f"refusing to release {path}: it is not a committed partition under {self.units_dir}")
            if self.fs.exists(path):  # a group with no rows in a unit has no directory
                freed += self.fs.size(path)
                self.fs.delete(path)
            self.fs.write_bytes(path + RELEASED_SUFFIX, b"")
        return freed

    def released(self, path: str) -> bool:
        """Whether the committed partition dataset `path` was released (`release`)."""
        return self.fs.exists(path + RELEASED_SUFFIX)

    def __repr__(self) -> str:
        return f"PartitionStore({self.root!r}, fs={self.fs!r})"


def _read_json(fs: FileSystem, path: str) -> dict[str, Any] | None:
    """The JSON object at `path`, or None if there is no such file."""
    try:
        text = fs.read_text(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    return json.loads(text)


# ---- the sink committer ------------------------------------------------------------------------------


class SinkCommitter:
    """Publishes a sink vertex's committed output into a user path, whole files only, each once.

    The path belongs to one job, recorded in its ``_regionflow_sink.json`` marker. A new run of the same
    job (the daily DAG writing to a fixed path) replaces the previous run's files when it claims the
    path, like Spark's overwrite mode; another job's path, or a non-empty path regionflow did not
    write, is refused before any Spark work. Spark readers skip names starting with '_' or '.', so the
    marker and the hidden temp files never show up as data.
    """

    def __init__(self, path: str, job_id: str, run_id: str, fs: FileSystem | None = None, *,
                 vertex: str | None = None, spark: Any = None) -> None:
        if not path:
            raise StoreError(f"job {job_id!r} has a sink with an empty output path; give the sink a path")
        self.path = path.rstrip("/") or path
        self.job_id = job_id
        self.run_id = run_id
        self.vertex = vertex
        self.fs: FileSystem = fs if fs is not None else filesystem_for(path, spark)
        self.marker_path = join(self.path, SINK_MARKER)

    # ---- before any Spark work -------------------------------------------------------------------------

    def check_target(self) -> None:
        """Raise SinkConflictError unless the path is absent, empty, or already this job's."""
        if self.fs.exists(self.path) and not self.fs.is_dir(self.path):
            raise SinkConflictError(f"sink path {self.path} of job {self.job_id!r} is a file, not a directory; "
                                    f"choose another output path or delete {self.path}")
        if not self.fs.list_dir(self.path):
            return
        marker = self._marker()
        if marker is None:
            raise SinkConflictError(
                f"sink path {self.path} is not empty and has no {SINK_MARKER}: its files were not written by "
                f"regionflow job {self.job_id!r}; choose another output path or delete {self.path}"
            )
        if marker.get("job") != self.job_id:
            raise SinkConflictError(
                f"sink path {self.path} holds the output of job {marker.get('job')!r} (run {marker.get('run')}), "
                f"not of job {self.job_id!r}; choose another output path or delete {self.path}"
            )
        if self.vertex and marker.get("vertex") and marker["vertex"] != self.vertex:
            raise SinkConflictError(
                f"sink path {self.path} is written by vertex {marker['vertex']!r} of job {self.job_id!r}; vertex "
                f"{self.vertex!r} cannot share it (part file names would collide): give each sink its own path"
            )

    def claim(self) -> list[str]:
        """Make the path this run's: remove an older run's files of the same job, then write the marker.
        Idempotent within a run. Returns the names removed."""
        self.check_target()
        self.fs.mkdirs(self.path)
        marker = self._marker()
        removed: list[str] = []
        if marker is not None and marker.get("run") == self.run_id:
            return removed
        if marker is not None:
            # the old files go before the marker flips, so a crash in between never leaves them
            # behind a marker that says they belong to this run
            keep = {SINK_MARKER, f".{SINK_MARKER}.crc"}  # the marker and Hadoop's checksum of it
            removed = [name for name in self.fs.list_dir(self.path) if name not in keep]
            for name in removed:
                self.fs.delete(join(self.path, name))
        record = {"job": self.job_id, "run": self.run_id, "vertex": self.vertex, "claimed_at": time.time()}
        write_atomically(self.fs, self.marker_path, json.dumps(record, sort_keys=True).encode("utf-8"), replace=True)
        return removed

    def _marker(self) -> dict[str, Any] | None:
        try:
            return _read_json(self.fs, self.marker_path)
        except ValueError as error:
            raise SinkConflictError(f"sink marker {self.marker_path} is not valid JSON ({error}); "
                                    f"delete {self.path} or choose another output path") from error

    # ---- staging and publication ------------------------------------------------------------------------

    @staticmethod
    def staging_root(attempt_dir: str, vertex: str) -> str:
        """The Parquet dataset a sink vertex's output is staged as inside the attempt dir (one
        directory per subtask); it becomes part of the unit's atomic commit."""
        return join(attempt_dir, SINK_STAGING, vertex_component(vertex))

    @staticmethod
    def staging_dir(attempt_dir: str, vertex: str, subtask: int) -> str:
        """Where a sink subtask's one Parquet file is staged."""
        return join(SinkCommitter.staging_root(attempt_dir, vertex), f"{SUBTASK_COLUMN}={int(subtask)}")

    @staticmethod
    def part_name(subtask: int) -> str:
        return f"part-{int(subtask):05d}.parquet"

    def publish(self, committed_unit_dir: str, vertex: str, subtasks: Iterable[int]) -> list[str]:
        """Link each subtask's staged file into the sink path as ``part-{subtask:05d}.parquet`` unless it
        is there already. Returns the paths this call published; publishing again publishes nothing."""
        self._check_owner()
        published = []
        for subtask in subtasks:
            source = self._staged_file(self.staging_dir(committed_unit_dir, vertex, subtask), vertex, subtask)
            target = join(self.path, self.part_name(subtask))
            if self.fs.publish_file(source, target):
                published.append(target)
        return published

    def _check_owner(self) -> None:
        marker = self._marker()
        if marker is None or marker.get("job") != self.job_id or marker.get("run") != self.run_id:
            owner = "nobody" if marker is None else f"job {marker.get('job')!r} run {marker.get('run')!r}"
            raise SinkConflictError(
                f"cannot publish into sink path {self.path}: it is claimed by {owner}, not by job {self.job_id!r} "
                f"run {self.run_id!r}; call claim() before the run starts (and do not run two runs of one job "
                f"into one path at once)"
            )

    def _staged_file(self, staging: str, vertex: str, subtask: int) -> str:
        parts = [name for name in self.fs.list_dir(staging) if name.startswith("part-") and name.endswith(".parquet")]
        if len(parts) != 1:
            raise StoreError(
                f"sink vertex {vertex!r} subtask {subtask}: expected exactly one part-*.parquet in {staging}, "
                f"found {len(parts)}; the region program must write one file per subtask"
            )
        return join(staging, parts[0])

    def __repr__(self) -> str:
        return f"SinkCommitter({self.path!r}, job={self.job_id!r}, run={self.run_id!r})"


__all__ = [
    "CommitResult", "CommittedUnit", "FileSystem", "HadoopFileSystem", "LocalFileSystem", "PartitionStore",
    "SinkCommitter", "SinkConflictError", "StoreError", "filesystem_for", "local_path", "partition_relpath",
    "safe_component", "validate_key", "write_atomically",
]
