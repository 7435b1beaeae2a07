"""Sinks per run (issue 45) on the local file system, no Spark: a per-run (templated) path belongs to one run;
a rerun of that run replaces exactly its files, all at once; a fixed sink keeps the newest logical date."""
from __future__ import annotations

import json
import os

import pytest
from file_helpers import read, write

from regionflow.spark.data import sink_swap
from regionflow.spark.data.sinks import SinkCommitter, SinkConflictError
from regionflow.spark.data.store import SINK_MARKER, PartitionStore

DAY1, DAY2, DAY3 = "2026-01-01T00:00:00+00:00", "2026-01-02T00:00:00+00:00", "2026-01-03T00:00:00+00:00"


def committed(data, run, unit, subtasks, text="rows", attempt="a1"):
    """A committed unit of `run` whose attempt staged one file per sink subtask."""
    store = PartitionStore(str(data), run)
    folder = store.attempt_dir(unit, attempt)
    for subtask in subtasks:
        write(os.path.join(SinkCommitter.staging_dir(folder, "out", subtask), "part-00000-x.snappy.parquet"),
              f"{text} {subtask}")
    assert store.commit(unit, attempt, {}).won
    return store.committed(unit).path


def contents(path):
    """The data files of a sink path and what they hold (the marker and hidden files left out)."""
    return {name: read(os.path.join(path, name)) for name in sorted(os.listdir(path))
            if not name.startswith(("_", "."))}


def stats(path):
    return {name: os.stat(os.path.join(path, name)).st_mtime_ns for name in os.listdir(path)}


def test_per_run_paths_of_two_runs_live_side_by_side(tmp_path):
    data = tmp_path / "data"
    for day, run in ((DAY1, "r1"), (DAY2, "r2")):
        path = str(tmp_path / "sinks" / f"ds={day[:10]}")
        committer = SinkCommitter(path, "job", run, vertex="out", per_run=True, logical_date=day)
        committer.claim()
        committer.publish(committed(data, run, "u", [0, 1], text=day[:10]), "out", [0, 1])
    assert contents(str(tmp_path / "sinks/ds=2026-01-01")) == {"part-00000.parquet": "2026-01-01 0",
                                                               "part-00001.parquet": "2026-01-01 1"}
    assert contents(str(tmp_path / "sinks/ds=2026-01-02"))["part-00001.parquet"] == "2026-01-02 1"


def test_two_runs_rendering_the_same_per_run_path_are_refused_naming_both(tmp_path):
    path = str(tmp_path / "sinks/ds=2026-01-02")
    first = SinkCommitter(path, "job", "job--scheduled__2026-01-02", vertex="out", per_run=True, logical_date=DAY2)
    first.claim()
    first.publish(committed(tmp_path / "data", "job--scheduled__2026-01-02", "u", [0]), "out", [0])
    before = stats(path)
    second = SinkCommitter(path, "job", "job--manual__2026-01-02", vertex="out", per_run=True, logical_date=DAY2,
                           data_dir=str(tmp_path))
    with pytest.raises(SinkConflictError) as info:
        second.claim()
    message = str(info.value)
    assert "'job--scheduled__2026-01-02' (logical date 2026-01-02" in message
    assert "'job--manual__2026-01-02'" in message and "renders the same path" in message and "{{ ds }}" in message
    assert stats(path) == before
    assert json.loads(read(os.path.join(path, SINK_MARKER)))["run"] == "job--scheduled__2026-01-02"


def test_a_rerun_of_the_same_run_republishing_the_same_commit_changes_nothing(tmp_path):
    path = str(tmp_path / "out")
    unit_dir = committed(tmp_path / "data", "r1", "u", [0, 1, 2])
    SinkCommitter(path, "job", "r1", vertex="out", per_run=True).claim()
    SinkCommitter(path, "job", "r1", vertex="out", per_run=True).publish(unit_dir, "out", [0, 1, 2])
    before = stats(path)
    rerun = SinkCommitter(path, "job", "r1", vertex="out", per_run=True)
    assert rerun.claim() == [] and rerun.publish(unit_dir, "out", [0, 1, 2]) == []
    assert stats(path) == before


def test_a_rerun_computed_again_replaces_exactly_its_files_at_once(tmp_path, monkeypatch):
    """Unit u0 (subtask 0) and unit u1 (subtasks 1, 2) published; u1 is computed again with other rows (its
    commit was set aside): its files are replaced by one directory swap; u0's file, the marker and any other
    path are untouched, and a reader never sees a mix (before the swap: all old; after: all new)."""
    data, path, other = tmp_path / "data", str(tmp_path / "sinks/ds=1"), str(tmp_path / "sinks/ds=2")
    for sink in (path, other):
        SinkCommitter(sink, "job", "r1", vertex="out", per_run=True).claim()
        SinkCommitter(sink, "job", "r1", vertex="out").publish(committed(data, "r1", "u0", [0]), "out", [0])
    SinkCommitter(path, "job", "r1", vertex="out").publish(committed(data, "r1", "u1", [1, 2], "old"), "out", [1, 2])
    kept, marker, elsewhere = stats(path)["part-00000.parquet"], read(os.path.join(path, SINK_MARKER)), stats(other)
    recomputed = committed(tmp_path / "again", "r1", "u1", [1, 2], "new")
    seen = []
    real_exchange = sink_swap.exchange

    def watched_exchange(a, b):
        seen.append(contents(b))
        swapped = real_exchange(a, b)
        seen.append(contents(b))
        return swapped

    monkeypatch.setattr(sink_swap, "exchange", watched_exchange)
    published = SinkCommitter(path, "job", "r1", vertex="out").publish(recomputed, "out", [1, 2])
    assert published == [f"{path}/part-00001.parquet", f"{path}/part-00002.parquet"]
    old = {"part-00000.parquet": "rows 0", "part-00001.parquet": "old 1", "part-00002.parquet": "old 2"}
    new = {"part-00000.parquet": "rows 0", "part-00001.parquet": "new 1", "part-00002.parquet": "new 2"}
    assert seen == [old, new] and contents(path) == new
    assert stats(path)["part-00000.parquet"] == kept and read(os.path.join(path, SINK_MARKER)) == marker
    assert stats(other) == elsewhere
    assert not [name for name in os.listdir(tmp_path / "sinks") if "rf-swap" in name]  # the old state is gone


def test_without_a_directory_swap_each_file_is_replaced_whole(tmp_path, monkeypatch):
    path = str(tmp_path / "out")
    SinkCommitter(path, "job", "r1", vertex="out", per_run=True).claim()
    SinkCommitter(path, "job", "r1", vertex="out").publish(committed(tmp_path / "a", "r1", "u", [0, 1], "old"),
                                                          "out", [0, 1])
    monkeypatch.setattr(sink_swap, "exchange", lambda a, b: False)
    SinkCommitter(path, "job", "r1", vertex="out").publish(committed(tmp_path / "b", "r1", "u", [0, 1], "new"),
                                                          "out", [0, 1])
    assert contents(path) == {"part-00000.parquet": "new 0", "part-00001.parquet": "new 1"}
    assert [name for name in os.listdir(path) if name.endswith(".tmp")] == []


def test_a_fixed_sink_keeps_the_newest_logical_date(tmp_path):
    """Backfill onto a fixed (non-templated) path: a later (or equal) logical date replaces the previous run's
    files; an older one is refused naming both runs; a run without a logical date replaces as before."""
    data, path = tmp_path / "data", str(tmp_path / "fixed")
    for run, day in (("r1", DAY1), ("r2", DAY2)):
        committer = SinkCommitter(path, "job", run, vertex="out", logical_date=day)
        committer.claim()
        committer.publish(committed(data, run, "u", [0], text=run), "out", [0])
    assert contents(path) == {"part-00000.parquet": "r2 0"}
    with pytest.raises(SinkConflictError) as info:
        SinkCommitter(path, "job", "r0", vertex="out", logical_date="2025-12-31T00:00:00+00:00").claim()
    assert "run 'r2' (logical date 2026-01-02" in str(info.value) and "run 'r0'" in str(info.value)
    assert "older" in str(info.value) and "ds={{ ds }}" in str(info.value)
    assert contents(path) == {"part-00000.parquet": "r2 0"}
    later = SinkCommitter(path, "job", "r3", vertex="out", logical_date="2026-01-03T01:00:00+01:00")
    assert later.claim() == ["part-00000.parquet"]
    later.publish(committed(data, "r3", "u", [0], text="r3"), "out", [0])
    plain = SinkCommitter(path, "job", "r4", vertex="out")  # no logical date: replaces as before
    assert plain.claim() == ["part-00000.parquet"] and json.loads(read(os.path.join(path, SINK_MARKER)))["run"] == "r4"


def test_a_fixed_sink_under_two_concurrent_runs_never_interleaves(tmp_path):
    data, path = tmp_path / "data", str(tmp_path / "fixed")
    first = SinkCommitter(path, "job", "r1", vertex="out", logical_date=DAY1)
    first.claim()
    second = SinkCommitter(path, "job", "r2", vertex="out", logical_date=DAY2)
    second.claim()
    second.publish(committed(data, "r2", "u", [0], text="r2"), "out", [0])
    with pytest.raises(SinkConflictError, match="claimed by job 'job' run 'r2'"):
        first.publish(committed(data, "r1", "u", [1], text="r1"), "out", [1])
    assert contents(path) == {"part-00000.parquet": "r2 0"}


def test_a_templated_sink_claimed_by_a_fixed_one_of_the_job_is_refused_too(tmp_path):
    path = str(tmp_path / "out")
    SinkCommitter(path, "job", "r1", vertex="out", per_run=True, logical_date=DAY3).claim()
    with pytest.raises(SinkConflictError, match="renders the same path"):
        SinkCommitter(path, "job", "r2", vertex="out", logical_date=DAY3).claim()
