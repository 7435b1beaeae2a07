"""Partition store (attempts, first-commit-wins, release) and sink committer (claim, publish once).

Everything runs on the local file system except the last two tests, which share one Spark session
to drive the same protocol through Hadoop's FileSystem API against a file:// path.
"""
from __future__ import annotations

import json
import os
import threading

import pytest
from file_helpers import read, write

from regionflow.core.errors import RegionflowError
from regionflow.spark.data.filesystems import LocalFileSystem, PartitionStoreError, filesystem_for
from regionflow.spark.data.sinks import SinkCommitter, SinkConflictError
from regionflow.spark.data.store import (
    MANIFEST,
    SINK_MARKER,
    SUCCESS,
    PartitionStore,
    safe_component,
    vertex_component,
)


@pytest.fixture
def store(tmp_path):
    return PartitionStore(str(tmp_path / "data"), "run-1")


def fill_attempt(store, unit, attempt, producers=(0, 1)):
    """What a region program leaves in its attempt dir: a dataset per blocking edge (here: edges
    named after the producers)."""
    folder = store.attempt_dir(unit, attempt)
    for producer in producers:
        write(os.path.join(folder, f"e{producer}/part-0.parquet"), attempt)
    return folder


# ---- attempts and commits ---------------------------------------------------------------------------


def test_layout_and_attempt_invisible_until_commit(store, tmp_path):
    folder = fill_attempt(store, "src-0", "a1")
    root = str(tmp_path / "data" / "run-1")
    assert folder == f"{root}/_attempts/src-0/a1"
    assert store.partition_path("src-0", 1) == f"{root}/units/src-0/e1"
    assert store.committed("src-0") is None and not store.is_committed("src-0")
    assert not os.path.exists(store.partition_path("src-0", 1))

    result = store.commit("src-0", "a1", {"host": "h1", "rows": {"e0": 10}})

    assert result.won and result.winner == "a1"
    unit = store.committed("src-0")
    assert unit.path == f"{root}/units/src-0" and unit.attempt_id == "a1"
    assert unit.manifest["host"] == "h1" and unit.manifest["rows"] == {"e0": 10}
    assert read(os.path.join(store.partition_path("src-0", 1), "part-0.parquet")) == "a1"
    assert os.path.exists(os.path.join(unit.path, SUCCESS))
    assert not os.path.exists(folder)


def test_reader_sees_no_unit_or_a_whole_one(store):
    producers = range(20)
    for iteration in range(30):
        unit = f"u{iteration}"
        fill_attempt(store, unit, "a", producers)
        seen, stop = [], threading.Event()

        def reader(unit=unit, stop=stop, seen=seen):
            while not stop.is_set():
                committed = store.committed(unit)
                if committed is not None:
                    files = [os.path.exists(os.path.join(store.partition_path(unit, p), "part-0.parquet"))
                             for p in producers]
                    seen.append((committed.manifest["attempt_id"], all(files)))

        thread = threading.Thread(target=reader)
        thread.start()
        store.commit(unit, "a", {})
        stop.set()
        thread.join()
        assert all(attempt == "a" and complete for attempt, complete in seen)


@pytest.mark.parametrize("attempts", [2, 4])
def test_commit_race_has_exactly_one_winner(store, attempts):
    for iteration in range(60):
        unit = f"race-{iteration}"
        ids = [f"a{i}" for i in range(attempts)]
        for attempt in ids:
            fill_attempt(store, unit, attempt)
        barrier = threading.Barrier(attempts)
        results = {}

        def commit(attempt, unit=unit, barrier=barrier, results=results):
            barrier.wait()
            results[attempt] = store.commit(unit, attempt, {"by": attempt})

        threads = [threading.Thread(target=commit, args=(a,)) for a in ids]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

        winners = [a for a, r in results.items() if r.won]
        assert len(winners) == 1, results
        winner = winners[0]
        assert {r.winner for r in results.values()} == {winner}
        committed = store.committed(unit)
        assert committed.attempt_id == winner and committed.manifest["by"] == winner
        assert sorted(os.listdir(committed.path)) == sorted([MANIFEST, SUCCESS, "e0", "e1"])
        for producer in (0, 1):
            assert read(os.path.join(store.partition_path(unit, producer), "part-0.parquet")) == winner
        assert os.listdir(os.path.join(store.attempts_dir, unit)) == []  # losers' files are gone


def test_commit_is_idempotent_for_the_winner_and_final_for_a_loser(store):
    fill_attempt(store, "u", "a1")
    fill_attempt(store, "u", "a2")
    assert store.commit("u", "a1", {}).won
    assert store.commit("u", "a1", {}).won  # again: still the winner, nothing changes
    lost = store.commit("u", "a2", {})
    assert not lost.won and lost.winner == "a1"
    assert not os.path.exists(store.attempt_path("u", "a2"))
    again = store.commit("u", "a2", {})
    assert not again.won and again.winner == "a1"
    assert store.committed("u").attempt_id == "a1"


def test_commit_without_an_attempt_dir_names_unit_and_attempt(store):
    with pytest.raises(PartitionStoreError, match=r"unit u: attempt a9 has no directory .*_attempts/u/a9"):
        store.commit("u", "a9", {})


def test_loser_moved_into_the_winner_is_taken_out(store):
    """HDFS renames a source *into* an existing target directory; the commit must undo that."""
    fill_attempt(store, "u", "a1")
    loser = fill_attempt(store, "u", "a2")
    store.commit("u", "a1", {})
    with open(os.path.join(loser, MANIFEST), "w") as handle:
        json.dump({"attempt_id": "a2"}, handle)
    unit_dir = store.committed("u").path
    os.rename(loser, os.path.join(unit_dir, "a2"))  # what a Hadoop rename onto a directory does

    result = store.commit("u", "a2", {})

    assert not result.won and result.winner == "a1"
    assert sorted(os.listdir(unit_dir)) == sorted([MANIFEST, SUCCESS, "e0", "e1"])
    assert read(os.path.join(store.partition_path("u", 0), "part-0.parquet")) == "a1"


def test_discarded_attempt_leaves_nothing(store):
    folder = fill_attempt(store, "u", "killed")
    store.discard("u", "killed")
    assert not os.path.exists(folder)
    assert store.committed("u") is None
    store.discard("u", "killed")  # absent: no error
    store.discard("u", "never-started")


def test_discard_never_touches_the_committed_unit(store):
    fill_attempt(store, "u", "a1")
    store.commit("u", "a1", {})
    store.discard("u", "a1")
    assert store.committed("u").attempt_id == "a1"


def test_cleanup_stale_attempts_after_the_winner_is_known(store):
    fill_attempt(store, "u", "a1")
    fill_attempt(store, "u", "a2")
    with pytest.raises(PartitionStoreError, match="unit u has no committed attempt yet"):
        store.cleanup_stale_attempts("u")
    store.commit("u", "a1", {})
    assert store.cleanup_stale_attempts("u") == ["a2"]
    assert not os.path.exists(os.path.join(store.attempts_dir, "u"))
    assert store.committed("u").attempt_id == "a1"


def test_release_deletes_committed_partitions_and_counts_bytes(store):
    folder = store.attempt_dir("u", "a")
    write(os.path.join(folder, "e7/part-0.parquet"), "0123456789")
    write(os.path.join(folder, "e8/part-0.parquet"), "01234")
    store.commit("u", "a", {})

    assert store.release([store.partition_path("u", 7)]) == 10
    assert not os.path.exists(store.partition_path("u", 7))
    assert os.path.exists(store.partition_path("u", 8))
    assert store.release([store.partition_path("u", 8), store.partition_path("u", 9)]) == 5
    assert store.committed("u") is not None  # the manifest stays


def test_release_refuses_paths_outside_the_committed_units(store, tmp_path):
    with pytest.raises(PartitionStoreError, match="refusing to release"):
        store.release([str(tmp_path)])
    with pytest.raises(PartitionStoreError, match="refusing to release"):
        store.release([store.units_dir + "/../_attempts"])


def test_check_writable_passes_and_leaves_no_probe(store):
    store.check_writable()
    assert os.listdir(store.root) == []


def test_unwritable_data_dir_names_the_path(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("a regular file, not a directory")
    store = PartitionStore(str(blocker / "sub"), "run-1")
    with pytest.raises(PartitionStoreError) as raised:
        store.check_writable()
    message = str(raised.value)
    assert str(blocker / "sub") in message and "not usable" in message
    assert isinstance(raised.value, RegionflowError)


@pytest.mark.parametrize("key", ["", "a/b", "..", ".hidden", "a[0]", "x:y", "a b", "k" * 201, None])
def test_bad_unit_keys_are_rejected_by_name(store, key):
    with pytest.raises(PartitionStoreError, match=r"bad unit key"):
        store.attempt_dir(key, "a1")
    with pytest.raises(PartitionStoreError, match=r"bad unit key"):
        store.partition_path(key, 0)


def test_bad_attempt_and_run_ids(store, tmp_path):
    with pytest.raises(PartitionStoreError, match=r"bad attempt id '\.\./x'"):
        store.attempt_dir("u", "../x")
    with pytest.raises(PartitionStoreError, match=r"bad run id 'a/b'"):
        PartitionStore(str(tmp_path), "a/b")
    PartitionStore(str(tmp_path), "scheduled__2026-11-22T00:00:00+00:00")  # an Airflow run id is fine


def test_safe_names():
    assert safe_component("orders+clean[2]") == "orders+clean-2"
    assert vertex_component("sink") == "sink"
    assert vertex_component("my sink") != vertex_component("my-sink")
    assert vertex_component("my sink").startswith("my-sink-")


def test_file_uri_data_dir(tmp_path):
    store = PartitionStore(f"file://{tmp_path}/data", "r")
    store.check_writable()
    fill_attempt_uri = store.attempt_dir("u", "a")
    assert fill_attempt_uri == f"file://{tmp_path}/data/r/_attempts/u/a"
    write(f"{tmp_path}/data/r/_attempts/u/a/e0/part-0.parquet", "a")
    assert store.commit("u", "a", {}).won
    assert store.partition_path("u", 0) == f"file://{tmp_path}/data/r/units/u/e0"
    assert os.path.exists(f"{tmp_path}/data/r/units/u/e0/part-0.parquet")


def test_filesystem_for():
    assert isinstance(filesystem_for("/tmp/x"), LocalFileSystem)
    assert isinstance(filesystem_for("file:///tmp/x"), LocalFileSystem)
    with pytest.raises(PartitionStoreError, match=r"hdfs://nn/data is a hdfs:// path: .*pass a Spark session"):
        filesystem_for("hdfs://nn/data")
    with pytest.raises(PartitionStoreError, match="pass a Spark session"):
        PartitionStore("s3a://bucket/data", "r")


def test_local_rename_never_replaces(tmp_path):
    fs = LocalFileSystem()
    write(str(tmp_path / "a/f"), "a")
    write(str(tmp_path / "b/f"), "b")
    write(str(tmp_path / "file1"), "1")
    write(str(tmp_path / "file2"), "2")
    os.makedirs(tmp_path / "empty")
    assert not fs.rename(str(tmp_path / "a"), str(tmp_path / "b"))
    assert not fs.rename(str(tmp_path / "a"), str(tmp_path / "empty"))
    assert not fs.rename(str(tmp_path / "file1"), str(tmp_path / "file2"))
    assert read(str(tmp_path / "b/f")) == "b" and read(str(tmp_path / "file2")) == "2"
    assert fs.rename(str(tmp_path / "a"), str(tmp_path / "c"))
    assert read(str(tmp_path / "c/f")) == "a"


# ---- the sink committer ------------------------------------------------------------------------------


def committed_unit_with_sink(store, unit, vertex, subtasks, attempt="a1"):
    """A committed unit whose attempt staged one parquet file per sink subtask, as Spark writes them."""
    folder = store.attempt_dir(unit, attempt)
    for subtask in subtasks:
        staging = SinkCommitter.staging_dir(folder, vertex, subtask)
        write(os.path.join(staging, f"part-00000-{subtask:04d}abcd-c000.snappy.parquet"), f"rows of {subtask}")
        write(os.path.join(staging, f".part-00000-{subtask:04d}abcd-c000.snappy.parquet.crc"), "crc")
        write(os.path.join(staging, "_SUCCESS"), "")
    assert store.commit(unit, attempt, {}).won
    return store.committed(unit).path


def sink_listing(path):
    return sorted(os.listdir(path))


def data_files(path):
    return [name for name in sink_listing(path) if not name.startswith(("_", "."))]


def test_staging_dir_is_inside_the_attempt(store):
    folder = store.attempt_dir("u", "a")
    assert SinkCommitter.staging_dir(folder, "out", 3) == f"{folder}/_sink/out/_rf_subtask=3"


def test_sink_of_another_job_is_refused_before_anything_is_written(tmp_path):
    sink = tmp_path / "out"
    sink.mkdir()
    (sink / SINK_MARKER).write_text(json.dumps({"job": "other_job", "run": "r0"}))
    (sink / "part-00000.parquet").write_text("theirs")
    committer = SinkCommitter(str(sink), "my_job", "r1")
    with pytest.raises(SinkConflictError) as raised:
        committer.check_target()
    message = str(raised.value)
    assert str(sink) in message and "'other_job'" in message and "choose another sink path" in message
    with pytest.raises(SinkConflictError):
        committer.claim()
    assert sink_listing(sink) == ["_regionflow_sink.json", "part-00000.parquet"]
    assert json.loads((sink / SINK_MARKER).read_text())["job"] == "other_job"


def test_non_empty_unmarked_path_conflicts(tmp_path):
    sink = tmp_path / "data" / "sinks" / "out"
    sink.mkdir(parents=True)
    (sink / "data.csv").write_text("a,b")
    with pytest.raises(SinkConflictError, match=r"not empty and has no _regionflow_sink.json.*delete"):
        SinkCommitter(str(sink), "job", "r1", data_dir=str(tmp_path / "data")).check_target()


@pytest.mark.parametrize("outside", [True, False])
def test_a_conflict_outside_the_data_dir_never_suggests_deleting_the_path(tmp_path, outside):
    """Issue 43 item 6e (v): a sink on /etc or a user's data must not be answered with 'delete /etc'."""
    data_dir = tmp_path / "data"
    sink = (tmp_path / "etc") if outside else (data_dir / "sinks" / "out")
    sink.mkdir(parents=True)
    (sink / "passwd").write_text("root:x:0:0")
    other = tmp_path / "marked"
    SinkCommitter(str(other), "someone_else", "r0").claim()
    (other / "part-00000.parquet").write_bytes(b"theirs")
    for path in (sink, other):
        with pytest.raises(SinkConflictError) as info:
            SinkCommitter(str(path), "job", "r1", vertex="totals", data_dir=str(data_dir)).check_target()
        message = str(info.value)
        if path == sink and not outside:
            assert message.endswith(f"choose another sink path or delete {sink} (inside regionflow's data dir)")
        else:
            assert "delete" not in message and message.endswith("choose another sink path for vertex 'totals'")
    assert (sink / "passwd").exists()


def test_a_file_as_sink_path_conflicts(tmp_path):
    target = tmp_path / "out.parquet"
    target.write_text("x")
    with pytest.raises(SinkConflictError, match="is a file, not a directory"):
        SinkCommitter(str(target), "job", "r1").check_target()


def test_absent_or_empty_sink_path_is_fine(tmp_path):
    SinkCommitter(str(tmp_path / "absent"), "job", "r1").check_target()
    (tmp_path / "empty").mkdir()
    committer = SinkCommitter(str(tmp_path / "empty"), "job", "r1")
    committer.check_target()
    assert committer.claim() == []
    assert json.loads((tmp_path / "empty" / SINK_MARKER).read_text())["run"] == "r1"


def test_two_sink_vertices_cannot_share_a_path(tmp_path):
    SinkCommitter(str(tmp_path / "out"), "job", "r1", vertex="a").claim()
    with pytest.raises(SinkConflictError, match="vertex 'b' cannot share it"):
        SinkCommitter(str(tmp_path / "out"), "job", "r1", vertex="b").check_target()


def test_same_job_same_run_resumes_and_other_run_replaces(store, tmp_path):
    sink = str(tmp_path / "out")
    unit_dir = committed_unit_with_sink(store, "u", "out", [0, 1, 2])
    first = SinkCommitter(sink, "job", "run-1")
    first.claim()
    first.publish(unit_dir, "out", [0, 1, 2])

    resumed = SinkCommitter(sink, "job", "run-1")
    resumed.check_target()
    assert resumed.claim() == []
    assert data_files(sink) == ["part-00000.parquet", "part-00001.parquet", "part-00002.parquet"]

    other_store = PartitionStore(str(tmp_path / "data"), "run-2")
    other_dir = committed_unit_with_sink(other_store, "u", "out", [0])
    second = SinkCommitter(sink, "job", "run-2")
    second.check_target()
    assert data_files(sink) == ["part-00000.parquet", "part-00001.parquet", "part-00002.parquet"]
    assert set(second.claim()) == {"part-00000.parquet", "part-00001.parquet", "part-00002.parquet"}
    assert data_files(sink) == []
    second.publish(other_dir, "out", [0])
    assert data_files(sink) == ["part-00000.parquet"]
    assert json.loads(read(os.path.join(sink, SINK_MARKER)))["run"] == "run-2"
    with pytest.raises(SinkConflictError, match="claimed by job 'job' run 'run-2'"):
        first.publish(unit_dir, "out", [1])  # a late attempt of the old run must not mix in


def test_publish_is_create_if_absent_and_idempotent(store, tmp_path):
    sink = str(tmp_path / "out")
    unit_dir = committed_unit_with_sink(store, "u", "out", [0, 1])
    committer = SinkCommitter(sink, "job", "run-1")
    committer.claim()
    assert committer.publish(unit_dir, "out", [0, 1]) == [f"{sink}/part-00000.parquet", f"{sink}/part-00001.parquet"]
    assert committer.publish(unit_dir, "out", [0, 1]) == []
    assert read(f"{sink}/part-00001.parquet") == "rows of 1"


def test_crash_between_commit_and_publish_ends_with_each_subtask_once(store, tmp_path):
    sink = str(tmp_path / "out")
    subtasks = list(range(10))
    unit_dir = committed_unit_with_sink(store, "u", "out", subtasks)
    committer = SinkCommitter(sink, "job", "run-1")
    committer.claim()
    committer.publish(unit_dir, "out", subtasks[:5])  # the process dies here

    retry = SinkCommitter(sink, "job", "run-1")
    retry.check_target()
    retry.claim()
    assert len(retry.publish(store.committed("u").path, "out", subtasks)) == 5

    assert data_files(sink) == [f"part-{s:05d}.parquet" for s in subtasks]
    assert [read(f"{sink}/part-{s:05d}.parquet") for s in subtasks] == [f"rows of {s}" for s in subtasks]


def test_concurrent_publishers_only_ever_show_whole_files(store, tmp_path):
    sink = str(tmp_path / "out")
    subtasks = list(range(40))
    unit_dir = committed_unit_with_sink(store, "u", "out", subtasks)
    SinkCommitter(sink, "job", "run-1").claim()
    published, listings, stop = [], [], threading.Event()

    def publisher():
        published.extend(SinkCommitter(sink, "job", "run-1").publish(unit_dir, "out", subtasks))

    def watcher():
        while not stop.is_set():
            listings.append(sink_listing(sink))

    watching = threading.Thread(target=watcher)
    watching.start()
    threads = [threading.Thread(target=publisher) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    stop.set()
    watching.join()

    assert sorted(published) == [f"{sink}/part-{s:05d}.parquet" for s in subtasks]  # each once, overall
    allowed = {f"part-{s:05d}.parquet" for s in subtasks}
    for listing in listings:
        assert all(name in allowed or name.startswith(("_", ".")) for name in listing)


def test_publish_needs_exactly_one_staged_file(store, tmp_path):
    folder = store.attempt_dir("u", "a")
    staging = SinkCommitter.staging_dir(folder, "out", 0)
    write(os.path.join(staging, "part-00000-a.parquet"))
    write(os.path.join(staging, "part-00001-b.parquet"))
    os.makedirs(SinkCommitter.staging_dir(folder, "out", 1))
    store.commit("u", "a", {})
    committer = SinkCommitter(str(tmp_path / "out"), "job", "run-1")
    committer.claim()
    with pytest.raises(PartitionStoreError,
                       match=r"subtask 0: expected exactly one part-\*.parquet .* found 2.*one file per subtask"):
        committer.publish(store.committed("u").path, "out", [0])
    with pytest.raises(PartitionStoreError, match="subtask 1: expected exactly one .* found 0"):
        committer.publish(store.committed("u").path, "out", [1])


def test_publish_before_claim_is_refused(store, tmp_path):
    unit_dir = committed_unit_with_sink(store, "u", "out", [0])
    with pytest.raises(SinkConflictError, match="claimed by nobody"):
        SinkCommitter(str(tmp_path / "out"), "job", "run-1").publish(unit_dir, "out", [0])


# ---- through Hadoop's FileSystem (one Spark session for the module) ----------------------------------


@pytest.fixture(scope="module")
def spark():
    pytest.importorskip("pyspark")
    from pyspark.sql import SparkSession

    session = (SparkSession.builder.master("local[1]").appName("regionflow-test-store")
               .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "1")
               .config("spark.driver.host", "127.0.0.1").getOrCreate())
    yield session
    session.stop()


def test_hadoop_commit_race_and_stray_copy(spark, tmp_path):
    from regionflow.spark.data.filesystems import HadoopFileSystem

    fs = HadoopFileSystem(spark)
    store = PartitionStore(f"file://{tmp_path}/data", "run-1", fs=fs)
    store.check_writable()

    for iteration in range(6):
        unit, results = f"u{iteration}", {}
        for attempt in ("a1", "a2"):
            fs.write_text(f"{store.attempt_dir(unit, attempt)}/e0/part-0.txt", attempt)
        barrier = threading.Barrier(2)

        def commit(attempt, unit=unit, barrier=barrier, results=results):
            barrier.wait()
            results[attempt] = store.commit(unit, attempt, {"by": attempt})

        threads = [threading.Thread(target=commit, args=(a,)) for a in ("a1", "a2")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        winners = [a for a, r in results.items() if r.won]
        assert len(winners) == 1 and {r.winner for r in results.values()} == set(winners)
        assert fs.read_text(f"{store.partition_path(unit, 0)}/part-0.txt") == winners[0]
        assert fs.list_dir(f"{store.attempts_dir}/{unit}") == []
        assert [n for n in fs.list_dir(store.committed(unit).path) if not n.startswith(".")] == \
            sorted([MANIFEST, SUCCESS, "e0"])

    # a real parquet partition, read back through the committed path only
    frame = spark.range(5).withColumnRenamed("id", "v")
    frame.write.parquet(f"{store.attempt_dir('late', 'a1')}/e0")
    assert store.commit("late", "a1", {}).won
    assert sorted(r.v for r in spark.read.parquet(store.partition_path("late", 0)).collect()) == list(range(5))

    # Hadoop's rename of a directory onto an existing one moves (or copies) it inside: commit undoes it
    loser = store.attempt_dir("late", "a2")
    fs.write_text(f"{loser}/{MANIFEST}", json.dumps({"attempt_id": "a2"}))
    jvm = spark._jvm
    source, target = jvm.org.apache.hadoop.fs.Path(loser), jvm.org.apache.hadoop.fs.Path(store.unit_path("late"))
    assert source.getFileSystem(spark._jsc.hadoopConfiguration()).rename(source, target)  # lands in units/late/a2
    assert "a2" in fs.list_dir(store.unit_path("late"))
    result = store.commit("late", "a2", {})
    assert not result.won and result.winner == "a1"
    assert "a2" not in fs.list_dir(store.unit_path("late"))
    assert store.release([store.partition_path("late", 0)]) > 0
    assert not fs.exists(store.partition_path("late", 0)) and store.is_committed("late")


def test_hadoop_sink_publish_and_blob_descriptor(spark, tmp_path):
    from regionflow.spark.data.descriptors import DescriptorCache, PartitionLocation, load_descriptor
    from regionflow.spark.data.filesystems import HadoopFileSystem

    fs = HadoopFileSystem(spark)
    store = PartitionStore(f"file://{tmp_path}/data", "run-1", fs=fs)
    folder = store.attempt_dir("u", "a1")
    for subtask in range(3):
        spark.range(subtask * 10, subtask * 10 + 10).coalesce(1).write.parquet(
            SinkCommitter.staging_dir(folder, "out", subtask))
    assert store.commit("u", "a1", {}).won

    sink = f"file://{tmp_path}/out"
    committer = SinkCommitter(sink, "job", "run-1", fs=fs)
    committer.check_target()
    committer.claim()
    assert len(committer.publish(store.committed("u").path, "out", range(3))) == 3
    assert committer.publish(store.committed("u").path, "out", range(3)) == []
    assert [n for n in fs.list_dir(sink) if not n.startswith(("_", "."))] == \
        ["part-00000.parquet", "part-00001.parquet", "part-00002.parquet"]
    assert sorted(r.id for r in spark.read.parquet(sink).collect()) == list(range(30))

    cache = DescriptorCache(f"file://{tmp_path}/blobs", offload_min_size=0, fs=fs)
    locations = [PartitionLocation(p, "h0", store.partition_path("u", p)) for p in range(50)]
    ref = cache.ref_for(4, lambda: locations)
    assert "blob" in ref and load_descriptor(ref, fs=fs) == locations
