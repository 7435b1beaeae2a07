"""Subtasks as the partitions of one Spark computation per vertex (issue 13), on a real Spark Connect
server shared by the session (`event_servers`): Spark jobs per vertex do not grow with parallelism,
a blocking edge writes O(P) files, shards read exactly their buckets, and bad vertex output fails
before any Spark job with the vertex, the edge and the column named. First, that the session's server got the
suite's JVM options (tests/conftest.py)."""
from __future__ import annotations

import glob
import os

import pyarrow.parquet
import pytest

from regionflow.core.graph import Distribution, load_job
from regionflow.core.plan import Plan
from regionflow.spark.driver.computer import BROADCAST_UNIT
from regionflow.spark.driver.exchange import BUCKET_COLUMN
from regionflow.units.runner import LocalRunner, RunFailed, RunOptions
from rfbench.spark_counts import blocking_files, jobs_started

pytestmark = pytest.mark.timeout(600)
SCALED = "regionflow.examples.orders:scaled_job"


def run(job, mode, tmp_path, servers, **extra):
    options = RunOptions(data_dir=str(tmp_path), cluster=servers.cluster, progress=None, backend="session",
                         servers=servers, **extra)
    runner = LocalRunner(job, Plan(load_job(job), mode), options)
    return runner, runner.run()


def edge_files(tmp_path, runner) -> dict[int, int]:
    return blocking_files(os.path.join(str(tmp_path), runner.run_id, "units"), runner.plan)


def test_the_sessions_server_jvm_runs_with_the_suites_java_options(event_servers):
    """tests/conftest.py gives every JVM of the suite ``SUITE_JAVA_OPTIONS`` (tests/suite_jvm_options.py) through
    ``JAVA_TOOL_OPTIONS``; the JVM itself says so on its stderr, which is the server's log."""
    servers, _ = event_servers
    options = os.environ.get("JAVA_TOOL_OPTIONS", "")
    assert options, "tests/conftest.py sets JAVA_TOOL_OPTIONS unless the caller did"
    [host] = servers.servers
    with open(servers.server(host).log_path, encoding="utf-8", errors="replace") as log:
        assert f"Picked up JAVA_TOOL_OPTIONS: {options}\n" in log.read()


def test_the_sessions_server_jvm_maps_the_suites_class_archive(event_servers):
    """tests/conftest.py gives spark-submit's JVMs the class archive `make jvm-archive` writes
    (tests/suite_jvm_archive.py) through ``SPARK_SUBMIT_OPTS``; the server's JVM has the archive's file mapped, so
    it did not fall back to loading its classes from the jars."""
    import suite_jvm_archive

    from regionflow.processes import process_group_members

    archive = suite_jvm_archive.archive_path()
    assert os.environ.get("SPARK_SUBMIT_OPTS") == suite_jvm_archive.submit_options(archive), \
        "no class archive: `make jvm-archive` writes it (make test does)"
    servers, _ = event_servers
    mapped = {}
    for status in servers.status():
        for pid in process_group_members(status.pid):
            try:
                with open(f"/proc/{pid}/maps", encoding="utf-8") as maps:
                    mapped[pid] = archive in maps.read()
            except OSError:
                continue
    assert any(mapped.values()), mapped


@pytest.mark.parametrize("mode", ["all-blocking", "all-pipelined"])
def test_jobs_per_vertex_do_not_grow_with_parallelism_and_files_stay_linear(
        mode, shared_servers, orders_reference, tmp_path, monkeypatch):
    servers, events = shared_servers
    jobs, sinks, files = {}, {}, {}
    for parallelism in (2, 4) if mode == "all-pipelined" else (4, 32):
        monkeypatch.setenv("REGIONFLOW_ORDERS_PARALLELISM", str(parallelism))
        before = jobs_started(events)
        runner, summary = run(SCALED, mode, tmp_path / str(parallelism), servers, keep_partitions=True)
        jobs[parallelism] = jobs_started(events) - before
        sinks[parallelism] = summary.sinks["totals"]
        files[parallelism] = edge_files(tmp_path / str(parallelism), runner)
        assert all(0 < count <= 2 * parallelism for count in files[parallelism].values()), files
        parts = [name for name in os.listdir(summary.sinks["totals"]["path"]) if name.startswith("part-")]
        assert 1 <= len(parts) <= 4  # at most one sink file per core of the grant, whatever P is
        if mode == "all-blocking":
            assert_one_directory_per_consumer_unit(tmp_path / str(parallelism), runner)
    small, large = sorted(jobs)
    assert files[large] == files[small], files  # one file per core and consumer unit, not per subtask
    sinks_written = sum(1 for vertex in runner.plan.graph.vertices.values() if vertex.sink)
    assert jobs[small] >= max(1, sinks_written), jobs  # the event log is read: a job per sink write at least
    assert jobs[large] == jobs[small], jobs
    assert sinks[small]["rows"] == sinks[large]["rows"] == orders_reference["rows"]
    assert sinks[small]["checksum"] == sinks[large]["checksum"] == orders_reference["checksum"]


def assert_one_directory_per_consumer_unit(data_dir, runner) -> None:
    """Every kept blocking dataset holds ``_rf_unit=<u>`` directories only of units that consume its
    edge, named by their shard index (`BROADCAST_UNIT` for a BROADCAST edge), and at least one: the
    layout readers prune by, whether Spark's partitionBy wrote it or the one directory was written
    directly. Its rows carry their bucket exactly when the consumer vertex spans several units (which
    read by bucket)."""
    plan, layout = runner.plan, runner.layout
    units = os.path.join(str(data_dir), runner.run_id, "units")
    for exec_edge in (e for e in plan.topology.edges if e.blocking):
        region_of, first = plan.region_set.region_of, plan.topology.offsets[exec_edge.dst]
        consumers = {layout.shards[layout.unit_of_region[region_of[first + local]]].index  # shard index in its region
                     for local in range(plan.topology.parallelism[exec_edge.dst])}
        broadcast = exec_edge.edge.distribution is Distribution.BROADCAST
        expected = {BROADCAST_UNIT} if broadcast else consumers
        for dataset in glob.glob(os.path.join(units, "*", f"e{exec_edge.index}")):
            found = {int(name.split("=", 1)[1]) for name in os.listdir(dataset) if name.startswith("_rf_unit=")}
            assert found and found <= expected, (dataset, found, expected)
            files = glob.glob(os.path.join(dataset, "_rf_unit=*", "*.parquet"))
            columns = pyarrow.parquet.read_schema(files[0]).names
            assert (BUCKET_COLUMN in columns) == (len(consumers) > 1 and not broadcast), (dataset, columns)


def test_sharded_units_read_exactly_their_buckets(shared_servers, orders_reference, tmp_path, monkeypatch):
    """Three shards per vertex: sources take their share, readers prune to their buckets."""
    servers, _ = shared_servers
    monkeypatch.setenv("REGIONFLOW_ORDERS_PARALLELISM", "8")
    runner, summary = run(SCALED, "all-blocking", tmp_path, servers, max_shards=3, keep_partitions=True)
    assert len(summary.units) == 1 + 4 * 3  # products has one subtask
    assert_one_directory_per_consumer_unit(tmp_path, runner)
    totals = summary.sinks["totals"]
    assert (totals["rows"], totals["checksum"]) == (orders_reference["rows"], orders_reference["checksum"])


@pytest.mark.parametrize("mode", ["all-pipelined", "all-blocking"])
def test_a_dropped_hash_key_fails_before_any_spark_job_naming_vertex_edge_and_column(shared_servers, tmp_path, mode):
    """all-blocking: the written edge's keys are checked up front; all-pipelined: the edge stays in
    the unit, Spark's analysis of the consumer fails first, and the failure names the dropped key."""
    servers, events = shared_servers
    before = jobs_started(events)
    with pytest.raises(RunFailed) as failure:
        run("rf_test_jobs:missing_key_job", mode, tmp_path, servers, retries=0)
    message = str(failure.value)
    assert "vertex 'enrich'" in message and "enrich -> totals" in message and "'customer_id'" in message
    if mode == "all-pipelined":  # one unit: no Spark job at all, nothing written
        assert jobs_started(events) == before
        assert not glob.glob(os.path.join(str(tmp_path), "run-*", "units", "*"))
    else:  # the upstream units ran and committed; enrich's attempt wrote nothing
        assert glob.glob(os.path.join(str(tmp_path), "run-*", "units", "clean*", "_SUCCESS"))
        assert not glob.glob(os.path.join(str(tmp_path), "run-*", "units", "enrich*", "*"))


def test_a_function_returning_no_dataframe_fails_before_any_spark_job(shared_servers, tmp_path):
    servers, events = shared_servers
    before = jobs_started(events)
    with pytest.raises(RunFailed, match=r"vertex 'enrich'.*returned dict; it must return a DataFrame"):
        run("rf_test_jobs:not_a_frame_job", "all-pipelined", tmp_path, servers, retries=0)
    assert jobs_started(events) == before


def test_a_failed_attempt_leaves_nothing_visible_and_the_retry_reads_the_committed_inputs(
        shared_servers, orders_reference, tmp_path):
    servers, _ = shared_servers
    runner, summary = run("rf_test_jobs:flaky_enrich_job", "all-blocking", tmp_path, servers, keep_partitions=True)
    enrich = next(unit for unit in summary.units if unit.name.startswith("enrich"))
    assert enrich.attempts == 2 and all(u.attempts == 1 for u in summary.units if u is not enrich)
    totals = summary.sinks["totals"]
    assert (totals["rows"], totals["checksum"]) == (orders_reference["rows"], orders_reference["checksum"])
    root = os.path.join(str(tmp_path), runner.run_id)
    leftovers = [p for p in glob.glob(os.path.join(root, "_attempts", "*", "a1-*"))]
    assert leftovers == []
    committed = {name: open(os.path.join(root, "units", name, "_manifest.json")).read()
                 for name in os.listdir(os.path.join(root, "units"))}
    assert all('"attempt_id": "a1-' not in text for name, text in committed.items() if name.startswith("enrich"))
