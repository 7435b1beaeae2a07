"""The file systems the partition store and the sink committer write through, and atomic writes.

Local paths and ``file://`` URIs go through `LocalFileSystem`; any other Hadoop URI (``hdfs://``,
``s3a://``, ...) through `HadoopFileSystem`, which borrows the JVM of a Spark session handed in by the
caller (`filesystem_for` picks one). Both offer the same small `FileSystem` protocol: the moves the
commit protocol needs (rename that never replaces, replace, publish a file once) and plain reads and
writes. Never imports PySpark.
"""
from __future__ import annotations

import ctypes
import errno
import json
import os
import shutil
import uuid
from typing import Any, Protocol
from urllib.parse import unquote, urlparse

from ...core.errors import RegionflowError


class PartitionStoreError(RegionflowError):
    """The partition store or a sink path cannot be used as asked."""


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
        raise PartitionStoreError(f"{path}: a file:// URI with a host ({parsed.netloc}) is not a local path; "
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
            raise PartitionStoreError("HadoopFileSystem needs a classic Spark session with a JVM (spark._jvm, "
                                      "spark._jsc); a Spark Connect session does not expose Hadoop's FileSystem: "
                                      "use a local data dir")
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
        raise PartitionStoreError(
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


def read_json(fs: FileSystem, path: str) -> dict[str, Any] | None:
    """The JSON object at `path`, or None if there is no such file."""
    try:
        text = fs.read_text(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    return json.loads(text)


__all__ = ["FileSystem", "HadoopFileSystem", "LocalFileSystem", "PartitionStoreError", "filesystem_for", "is_local_uri",
           "join", "local_path", "read_json", "write_atomically"]
