"""The partition store: where a run's data lives and how attempts of a unit commit it.

This module owns the on-disk layout of a run and the first-commit-wins protocol between attempts of a
unit (one Spark application's worth of regions); `regionflow.spark.data.sinks` publishes sink files into a
user's output path once. It never imports PySpark: the runner that schedules and commits does not need
Spark. Files go through `regionflow.spark.data.filesystems` (local paths, ``file://``, any Hadoop URI).

Layout of one run::

    {data_dir}/{run_id}/
      _attempts/{unit_key}/{attempt_id}/     an attempt's private output, invisible to readers
        e{edge}/_rf_unit={u}/part-*.parquet  a blocking edge: one Parquet dataset per unit, a directory
                                             per consumer unit (its shard index in its logical region;
                                             on a key-grouped edge, `core.keygroups`, one directory,
                                             its rows sorted by key group unless the region was
                                             last decided as one shard), at most one file per core
                                             in each
        _sink/{vertex}/_rf_subtask={s}/part-*.parquet   staged sink output: one file per core, numbered by
                                             the unit's subtasks (at most one file per subtask)
      units/{unit_key}/                      the committed attempt: same tree, plus
        _manifest.json, _SUCCESS             written before the rename that publishes the unit (the
                                             manifest records every file's size: `integrity`)
      _decisions/{region}.json               the run's decision for an adaptive region cut into shards
                                             (`core.run_decision`): first one wins, every task reads it
    {data_dir}/_history/{job}/{region}.json  the shard count of that region's last decision, across runs
                                             (`spark.data.history`)

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

import errno
import hashlib
import json
import re
import shutil
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .filesystems import (
    FileSystem,
    PartitionStoreError,
    filesystem_for,
    is_local_uri,
    join,
    local_path,
    read_json,
    write_atomically,
)
from .integrity import FILES_KEY, MANIFEST, RELEASED_SUFFIX, file_sizes

SUCCESS = "_SUCCESS"
SINK_MARKER = "_regionflow_sink.json"
ATTEMPTS = "_attempts"
UNITS = "units"
DECISIONS = "_decisions"
SINK_STAGING = "_sink"
# Columns of the Parquet datasets regionflow writes; partition columns are Hive-style directories.
UNIT_COLUMN = "_rf_unit"  # partition column of a blocking edge's dataset: the consumer unit (or key group) of a row
BUCKET_COLUMN = "_rf_bucket"  # data column: the consumer subtask (or key group) a row goes to
SUBTASK_COLUMN = "_rf_subtask"  # partition column of a staged sink: the file's subtask number

# Keys become single path components on local disks, HDFS and object stores alike: no separators,
# no glob characters (Hadoop expands [] {} * ?), no ':' (HDFS rejects it), no leading '.' (hidden).
_KEY = re.compile(r"[A-Za-z0-9_+=-][A-Za-z0-9_.+=-]{0,199}")
# Run ids come from Airflow (``scheduled__2026-11-22T00:00:00+00:00``): ':' and '~' are allowed locally.
_RUN_ID = re.compile(r"[A-Za-z0-9_+=~:-][A-Za-z0-9_.+=~:-]{0,249}")
_UNSAFE = re.compile(r"[^A-Za-z0-9_.+=-]+")


# ---- names -----------------------------------------------------------------------------------------


def validate_key(value: str, what: str = "unit key") -> str:
    """Return `value` if it is one safe path component, else raise PartitionStoreError naming it."""
    if not isinstance(value, str) or not _KEY.fullmatch(value):
        raise PartitionStoreError(
            f"bad {what} {value!r}: use 1-200 characters from A-Z a-z 0-9 _ . + = - , not starting with '.' "
            f"(safe_component() maps any name to one)"
        )
    return value


def validate_run_id(value: str) -> str:
    if not isinstance(value, str) or not _RUN_ID.fullmatch(value):
        raise PartitionStoreError(
            f"bad run id {value!r}: use 1-250 characters from A-Z a-z 0-9 _ . + = ~ : - , not starting with '.'"
        )
    return value


def safe_component(name: str) -> str:
    """Map any name (a region name such as ``orders+clean[2]``, an Airflow run id) to a valid key."""
    return _UNSAFE.sub("-", name).strip("-.")[:200] or "unit"


def decided_values(decisions: dict[str, dict[str, Any]]) -> dict[str, int]:
    """Every adaptive vertex value set by `decisions` (`PartitionStore.decisions`)."""
    return {vertex: int(value) for decision in decisions.values() for vertex, value in decision["values"].items()}


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
            raise PartitionStoreError("the data dir is empty: give a local path or a Hadoop URI")
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
            raise PartitionStoreError(
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
            raise PartitionStoreError(f"cannot commit unit {unit_key}: attempt {attempt_id} has no directory {source} "
                                      f"(discarded, or never created with attempt_dir()); run the attempt again")
        try:
            self._write_commit_files(source, unit_key, attempt_id, manifest)
            self.fs.mkdirs(self.units_dir)
            self.fs.rename(source, target)
        except OSError as error:
            raise PartitionStoreError(f"commit of unit {unit_key} by attempt {attempt_id} failed moving {source} to "
                                      f"{target}: {error}; check the data dir's space and permissions") from error
        winner = self.committed(unit_key)
        if winner is None:
            raise PartitionStoreError(f"commit of unit {unit_key} by attempt {attempt_id} failed: {target} holds no "
                                      f"{MANIFEST} after renaming {source}; check the data dir's file system")
        return self._settle(unit_key, attempt_id, winner)

    def _write_commit_files(self, source: str, unit_key: str, attempt_id: str, manifest: dict[str, Any]) -> None:
        record = {**manifest, "unit_key": unit_key, "attempt_id": attempt_id,
                  FILES_KEY: file_sizes(self.fs, source)}  # checked before the files are read (`integrity`)
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
        manifest = read_json(self.fs, join(stray, MANIFEST))
        if manifest is not None and manifest.get("attempt_id") == attempt_id:
            self.fs.delete(stray)

    def committed(self, unit_key: str) -> CommittedUnit | None:
        path = self.unit_path(unit_key)
        try:
            manifest = read_json(self.fs, join(path, MANIFEST))
        except ValueError as error:
            raise PartitionStoreError(f"unit {unit_key}: committed manifest {join(path, MANIFEST)} is not valid JSON "
                                      f"({error}); delete {path} to recompute the unit") from error
        return None if manifest is None else CommittedUnit(unit_key, path, manifest)

    def is_committed(self, unit_key: str) -> bool:
        return self.committed(unit_key) is not None

    def discard(self, unit_key: str, attempt_id: str) -> None:
        """Remove a killed, failed or losing attempt's files; a no-op if they are gone already."""
        self.fs.delete(self.attempt_path(unit_key, attempt_id))

    def full_disk(self, error: BaseException, attempt_id: str) -> PartitionStoreError | None:
        """The error to raise instead of `error` when it says the partition store's file system is full:
        it names the run's directory and the space left there (None for any other error)."""
        enospc = isinstance(error, OSError) and error.errno == errno.ENOSPC
        if not enospc and "No space left on device" not in str(error):
            return None
        space = ""
        if is_local_uri(self.root):
            try:
                usage = shutil.disk_usage(local_path(self.data_dir))
                space = f" ({usage.free:,} of {usage.total:,} bytes free there now)"
            except OSError:
                pass
        return PartitionStoreError(f"the partition store is full: attempt {attempt_id} could not write under "
                                   f"{self.root}{space}; nothing of the attempt was committed and its files were "
                                   f"removed. Free space in the data dir (regionflow gc removes finished runs' "
                                   f"partitions) and run the unit again")

    def set_aside(self, unit_key: str, why: str) -> str:
        """Move a damaged committed unit out of ``units/`` (readers no longer see it) into its attempts'
        folder, so that it is computed again; returns where it went."""
        target = join(self.attempts_dir, validate_key(unit_key), f"damaged-{uuid.uuid4().hex[:8]}")
        self.fs.mkdirs(join(self.attempts_dir, unit_key))
        if not self.fs.rename(self.unit_path(unit_key), target):
            raise PartitionStoreError(f"unit {unit_key} is damaged ({why}) and could not be moved to {target}; "
                                      f"delete {self.unit_path(unit_key)} to compute the unit again")
        return target

    def cleanup_stale_attempts(self, unit_key: str) -> list[str]:
        """Delete every attempt of a committed unit that is still lying around; returns their ids."""
        if not self.is_committed(unit_key):
            raise PartitionStoreError(f"unit {unit_key} has no committed attempt yet: its attempts may still be "
                                      f"running; discard(unit_key, attempt_id) removes one failed attempt")
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
                raise PartitionStoreError(f"refusing to release {path}: it is not a committed partition under "
                                          f"{self.units_dir}")
            if self.fs.exists(path):  # a group with no rows in a unit has no directory
                freed += self.fs.size(path)
                self.fs.delete(path)
            self.fs.write_bytes(path + RELEASED_SUFFIX, b"")
        return freed

    def released(self, path: str) -> bool:
        """Whether the committed partition dataset `path` was released (`release`)."""
        return self.fs.exists(path + RELEASED_SUFFIX)

    # ---- the run's decisions ------------------------------------------------------------------------

    def record_decision(self, region: str, decision: dict[str, Any]) -> dict[str, Any]:
        """Record the run's decision for adaptive region `region` (a region task id) unless one is recorded
        already, and return the recorded one: the first decision wins, so a cleared decision task cannot
        change the units of a run that may have committed some of them."""
        path = join(self.root, DECISIONS, f"{safe_component(region)}.json")
        self.fs.mkdirs(join(self.root, DECISIONS))
        if write_atomically(self.fs, path, json.dumps(decision, sort_keys=True).encode(), replace=False):
            return decision
        recorded = read_json(self.fs, path)  # another decision task of the run was first
        if recorded is None:
            raise PartitionStoreError(f"the decision for region {region} was written to {path} but cannot be read "
                                      f"back; check the data dir's file system")
        return recorded

    def decisions(self) -> dict[str, dict[str, Any]]:
        """``{region: decision}`` recorded so far in this run."""
        folder = join(self.root, DECISIONS)
        found: dict[str, dict[str, Any]] = {}
        for name in self.fs.list_dir(folder):  # names only; a hidden one is a write in flight
            if name.endswith(".json") and not name.startswith("."):
                recorded = read_json(self.fs, join(folder, name))
                if recorded is not None:
                    found[name[:-len(".json")]] = recorded
        return found

    def decided_values(self) -> dict[str, int]:
        """Every adaptive vertex value the run's decisions set (`core.adaptive.apply` takes them)."""
        return decided_values(self.decisions())

    def __repr__(self) -> str:
        return f"PartitionStore({self.root!r}, fs={self.fs!r})"


__all__ = ["CommitResult", "CommittedUnit", "PartitionStore", "decided_values", "partition_relpath", "run_key_for",
           "safe_component", "validate_key", "validate_run_id", "vertex_component"]
