"""The sink committer: a sink vertex's committed output published into a user's path, whole files, once.

A unit's attempts stage each sink's files inside their attempt directory (`PartitionStore`); once one
attempt has committed the unit, `SinkCommitter.publish` moves its staged files into the sink path, each
file at most once, so a speculative copy or a retry never writes a sink twice. Never imports PySpark.
"""
from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable
from typing import Any

from .filesystems import FileSystem, PartitionStoreError, filesystem_for, join, read_json, write_atomically
from .sink_swap import publishing, replace_files, same_file
from .store import SINK_MARKER, SINK_STAGING, SUBTASK_COLUMN, vertex_component


class SinkConflictError(PartitionStoreError):
    """A sink path already holds output that this job and run must not mix with."""


class SinkCommitter:
    """Publishes a sink vertex's committed output into a user path, whole files only, each once.

    The path belongs to one job and run, recorded in its ``_regionflow_sink.json`` marker (with the run's
    logical date, and whether the path is rendered per run). Which run may write it:

    - the same run again (a retry, a cleared task, a speculative copy): yes; it republishes the run's
      committed files, and where a file differs from what the path holds (the unit was computed again),
      the path's files are replaced all at once (`sink_swap`: readers see the old files or the new);
    - another run, when the path is rendered per run (a templated sink such as ``totals/ds={{ ds }}``): no,
      refused naming both runs, before any Spark work: two runs of a job never write one per-run path;
    - another run, when the sink is fixed (not templated): the path holds the newest logical date's output.
      A run of the same or a later logical date (or either without one) replaces the previous run's files
      when it claims the path, like Spark's overwrite mode; a run of an older logical date (a backfill after
      a newer run) is refused naming both runs, as it would put older data over newer. Two such runs at
      once never interleave files: the earlier one's publication is refused once the later one claimed.

    Another job's path, or a non-empty path regionflow did not write, is refused before any Spark work.
    Spark readers skip names starting with '_' or '.', so the marker and the hidden temp files never show
    up as data. A refusal suggests deleting the path only when it lies inside regionflow's `data_dir` (a
    relative sink path); for any other path it suggests choosing another sink path, never deleting a
    directory regionflow does not own.
    """

    def __init__(self, path: str, job_id: str, run_id: str, fs: FileSystem | None = None, *,
                 vertex: str | None = None, spark: Any = None, data_dir: str | None = None,
                 per_run: bool = False, logical_date: str | None = None) -> None:
        if not path:
            raise PartitionStoreError(f"job {job_id!r} has a sink with an empty output path; give the sink a path")
        self.path = path.rstrip("/") or path
        self.job_id = job_id
        self.run_id = run_id
        self.vertex = vertex
        self.data_dir = data_dir
        self.per_run = per_run  # the path is rendered per run (a templated sink)
        self.logical_date = logical_date  # the run's logical date (ISO), None without one
        self.fs: FileSystem = fs if fs is not None else filesystem_for(path, spark)
        self.marker_path = join(self.path, SINK_MARKER)

    # ---- before any Spark work -------------------------------------------------------------------------

    def check_target(self) -> None:
        """Raise SinkConflictError unless the path is absent, empty, or already this job's."""
        if self.fs.exists(self.path) and not self.fs.is_dir(self.path):
            raise SinkConflictError(f"sink path {self.path} of job {self.job_id!r} is a file, not a directory; "
                                    f"{self._remedy()}")
        if not self.fs.list_dir(self.path):
            return
        marker = self._marker()
        if marker is None:
            raise SinkConflictError(
                f"sink path {self.path} is not empty and has no {SINK_MARKER}: its files were not written by "
                f"regionflow job {self.job_id!r}; {self._remedy()}"
            )
        if marker.get("job") != self.job_id:
            raise SinkConflictError(
                f"sink path {self.path} holds the output of job {marker.get('job')!r} (run {marker.get('run')}), "
                f"not of job {self.job_id!r}; {self._remedy()}"
            )
        if self.vertex and marker.get("vertex") and marker["vertex"] != self.vertex:
            raise SinkConflictError(
                f"sink path {self.path} is written by vertex {marker['vertex']!r} of job {self.job_id!r}; vertex "
                f"{self.vertex!r} cannot share it (part file names would collide): give each sink its own path"
            )

    def claim(self) -> list[str]:
        """Make the path this run's (see the class docstring for which run may): remove an older run's files
        of a fixed sink, then write the marker. Idempotent within a run. Returns the names removed."""
        self.check_target()
        self.fs.mkdirs(self.path)
        marker = self._marker()
        removed: list[str] = []
        if marker is not None and marker.get("run") == self.run_id:
            return removed
        if marker is not None:
            self._check_replaces(marker)
            # the old files go before the marker flips, so a crash in between never leaves them
            # behind a marker that says they belong to this run
            keep = {SINK_MARKER, f".{SINK_MARKER}.crc"}  # the marker and Hadoop's checksum of it
            removed = [name for name in self.fs.list_dir(self.path) if name not in keep]
            for name in removed:
                self.fs.delete(join(self.path, name))
        record = {"job": self.job_id, "run": self.run_id, "vertex": self.vertex, "claimed_at": time.time(),
                  "logical_date": self.logical_date, "per_run": self.per_run}
        write_atomically(self.fs, self.marker_path, json.dumps(record, sort_keys=True).encode("utf-8"), replace=True)
        return removed

    def _check_replaces(self, marker: dict[str, Any]) -> None:
        """Raise SinkConflictError when this run may not take the path over from the marker's run."""
        theirs = f"run {marker.get('run')!r}" + (f" (logical date {marker['logical_date']})"
                                                   if marker.get("logical_date") else "")
        ours = f"run {self.run_id!r}" + (f" (logical date {self.logical_date})" if self.logical_date else "")
        if self.per_run or marker.get("per_run"):
            raise SinkConflictError(
                f"sink path {self.path} of vertex {self.vertex!r} holds the output of {theirs} of job {self.job_id!r}, "
                f"and {ours} renders the same path: two runs never share a per-run sink path (their files would "
                f"mix); render a distinct path per run (e.g. {{{{ ds }}}} or {{{{ run_id }}}} in the template), or "
                f"{self._remedy()} to run it again")
        older = self.logical_date and marker.get("logical_date") and \
            _instant(self.logical_date) < _instant(str(marker["logical_date"]))
        if older:
            raise SinkConflictError(
                f"sink path {self.path} of vertex {self.vertex!r} is a fixed sink holding the output of {theirs}; "
                f"{ours} is older and would replace newer output with older: template the sink by the logical "
                f"date (e.g. 'path/ds={{{{ ds }}}}') to keep one partition per date, or {self._remedy()}")

    def _marker(self) -> dict[str, Any] | None:
        try:
            return read_json(self.fs, self.marker_path)
        except ValueError as error:
            raise SinkConflictError(f"sink marker {self.marker_path} is not valid JSON ({error}); "
                                    f"{self._remedy()}") from error

    def _remedy(self) -> str:
        """The fix of a conflict: another sink path; or deleting this one too, when it is inside the data
        dir (regionflow's own), never a path elsewhere (/etc, a user's data)."""
        if self.data_dir and _inside(self.path, self.data_dir):
            return f"choose another sink path or delete {self.path} (inside regionflow's data dir)"
        return f"choose another sink path for vertex {self.vertex!r}" if self.vertex else "choose another sink path"

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
        is there already. A file there that differs (this run's unit computed again) is replaced, all such
        files of this call at once (`sink_swap.replace_files`). Returns the paths this call published;
        publishing the same files again publishes nothing."""
        self._check_owner()
        published: list[str] = []
        replacements: dict[str, str] = {}
        with publishing(self.fs, self.path):
            for subtask in subtasks:
                source = self._staged_file(self.staging_dir(committed_unit_dir, vertex, subtask), vertex, subtask)
                target = join(self.path, self.part_name(subtask))
                if self.fs.publish_file(source, target):
                    published.append(target)
                elif not same_file(self.fs, source, target):
                    replacements[self.part_name(subtask)] = source
            if replacements:
                self._check_owner()
                replace_files(self.fs, self.path, replacements)
                published += [join(self.path, name) for name in sorted(replacements)]
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
            raise PartitionStoreError(
                f"sink vertex {vertex!r} subtask {subtask}: expected exactly one part-*.parquet in {staging}, "
                f"found {len(parts)}; the region program must write one file per subtask"
            )
        return join(staging, parts[0])

    def __repr__(self) -> str:
        return f"SinkCommitter({self.path!r}, job={self.job_id!r}, run={self.run_id!r})"


def _instant(text: str) -> float:
    """An ISO datetime as a POSIX time, so dates in different zones compare (naive: UTC)."""
    from datetime import UTC, datetime

    value = datetime.fromisoformat(text)
    return (value if value.tzinfo else value.replace(tzinfo=UTC)).timestamp()


def _inside(path: str, directory: str) -> bool:
    """Whether `path` lies strictly inside `directory` (both local paths, or URIs of one scheme)."""
    if "://" not in path and "://" not in directory:
        path, directory = os.path.abspath(path), os.path.abspath(directory)
    root = directory.rstrip("/")
    return bool(root) and path.rstrip("/") != root and path.startswith(root + "/")


__all__ = ["SinkCommitter", "SinkConflictError"]
