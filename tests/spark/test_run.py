"""`regionflow run` end to end with real Spark submissions (local[k]).

Expensive: every unit is one spark-submit (10-20 s here), so the matrix is chosen to cover each
mode once, the 1-slot runs that the spec asks for, concurrency (pointwise mode on 3 slots: two
submissions at once, two regions at a time inside one), a kill mid-write and a failing vertex.
"""
import os
import threading
import time

import pytest

from regionflow.core.graph import load_job
from regionflow.core.plan import Plan
from regionflow.scheduling.hosts import Cluster
from regionflow.spark.data.sinks import SinkCommitter
from regionflow.units.runner import LocalRunner, RunFailed, RunOptions

ORDERS = "regionflow.examples.orders:job"
pytestmark = pytest.mark.timeout(900)


def options(data_dir, slots, **extra):
    extra.setdefault("backend", "submit")  # the session backend runs in test_connect.py
    return RunOptions(data_dir=str(data_dir), cluster=Cluster.local_default(slots), progress=None, **extra)


def run_job(job, mode, data_dir, slots, **extra):
    plan = Plan(load_job(job), mode)
    runner = LocalRunner(job, plan, options(data_dir, slots, **extra))
    return runner, runner.run()


@pytest.fixture(scope="module")
def reference(orders_reference):
    return orders_reference


# long (tests/conftest.py): 1.5-2 min each here (a spark-submit per region); `make test` keeps all-pipelined on 4
# slots on this backend and runs every mode on the session backend (tests/airflow/test_e2e_session.py; TPC-H in
# all-blocking and all-pipelined: tests/spark/test_tpch.py)
@pytest.mark.parametrize("mode, slots", [
    pytest.param("all-blocking", 1, marks=pytest.mark.long),
    pytest.param("forward-pipelined-only", 1, marks=pytest.mark.long),
    pytest.param("pointwise-pipelined-only", 3, marks=pytest.mark.long),
    ("all-pipelined", 4),
])
def test_every_mode_gives_the_reference_checksum(mode, slots, reference, tmp_path):
    runner, summary = run_job(ORDERS, mode, tmp_path, slots)
    totals = summary.sinks["totals"]
    assert (totals["rows"], totals["checksum"]) == (reference["rows"], reference["checksum"])
    assert len(summary.units) == len(runner.plan.region_set.logical)
    assert all(unit.attempts == 1 for unit in summary.units)
    sink_files = sorted(os.listdir(totals["path"]))
    # at most one file per granted core and per subtask of totals (3), named by totals' subtasks
    assert sink_files[0] == "_regionflow_sink.json" and 1 <= len(sink_files) - 1 <= min(3, slots)
    assert set(sink_files[1:]) <= {"part-00000.parquet", "part-00001.parquet", "part-00002.parquet"}
    if mode == "pointwise-pipelined-only":  # totals' 3 single-slot regions ran at once in one submission
        assert next(u for u in summary.units if u.name.startswith("totals")).slots == 3


# long: ~1.8 min here (a spark-submit per unit, one of them twice). Its cheaper sibling in `make test`:
# test_connect.py's killed session attempt, retried, the sink still exact (the same commit protocol, the
# partition store's, on the session backend); a killed spark-submit's processes: test_submit.py.
@pytest.mark.long
def test_killed_mid_write_is_retried_and_no_partial_output_is_ever_visible(reference, tmp_path):
    job = "rf_test_jobs:slow_job"
    plan = Plan(load_job(job), "pointwise-pipelined-only")
    runner = LocalRunner(job, plan, options(tmp_path, 3))
    seen_incomplete: list[str] = []
    stop = threading.Event()
    killed = threading.Event()
    target = next(name for name in (u.name for u in runner.runs) if name.startswith("orders+clean+enrich"))

    def watch() -> None:
        units_dir = os.path.join(str(tmp_path), runner.run_id, "units")
        attempts_dir = os.path.join(str(tmp_path), runner.run_id, "_attempts")
        while not stop.is_set():
            for unit in os.listdir(units_dir) if os.path.isdir(units_dir) else []:
                names = os.listdir(os.path.join(units_dir, unit))
                if "_SUCCESS" not in names or "_manifest.json" not in names:
                    seen_incomplete.append(unit)
            if not killed.is_set() and _writing(attempts_dir) and runner.kill_unit(target):
                killed.set()
            time.sleep(0.05)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        summary = runner.run()
    finally:
        stop.set()
        watcher.join()
    assert killed.is_set(), "the watcher never saw the unit writing"
    assert seen_incomplete == []
    unit = next(u for u in summary.units if u.name == target)
    assert unit.attempts == 2
    totals = summary.sinks["totals"]
    assert (totals["rows"], totals["checksum"]) == (reference["rows"], reference["checksum"])
    leftovers = os.path.join(str(tmp_path), runner.run_id, "_attempts")
    assert not any(files for _, _, files in os.walk(leftovers)), "the killed attempt left files behind"


def _writing(attempts_dir: str) -> bool:
    """True once some attempt has begun writing a blocking partition (Spark's _temporary dir)."""
    for root, dirs, _ in os.walk(attempts_dir):
        if "_temporary" in dirs and "/e" in root:
            return True
    return False


def test_failing_vertex_names_vertex_subtask_and_error_and_commits_nothing(tmp_path):
    job = "rf_test_jobs:raising_job"
    with pytest.raises(RunFailed) as failure:
        run_job(job, "all-pipelined", tmp_path, 4, retries=1)
    message = str(failure.value)
    assert "'clean'" in message and "clean#0-3" in message and "ValueError" in message
    assert "negative amount in order 1042" in message and "failed 2 time(s)" in message
    run_dir = next(d for d in os.listdir(tmp_path) if d.startswith("run-"))
    assert not os.path.exists(os.path.join(tmp_path, run_dir, "units"))
    sink = os.path.join(tmp_path, "sinks", "raising", "totals")
    assert [f for f in os.listdir(sink) if not f.startswith("_")] == []


class _NoSpark:
    def __init__(self, *args, **kwargs):
        raise AssertionError("a Spark submission started although the input was bad")


@pytest.fixture
def no_spark(monkeypatch):
    monkeypatch.setattr("regionflow.spark.launch.backends.unit_submission", _NoSpark)
    monkeypatch.setattr("regionflow.spark.launch.backends.SessionSubmission", _NoSpark)
    monkeypatch.setattr("regionflow.units.reference.unit_submission", _NoSpark)


def test_sink_holding_another_jobs_data_fails_before_spark(tmp_path, no_spark):
    sink = tmp_path / "sinks" / "orders" / "totals"
    other = SinkCommitter(str(sink), "someone_else", "run-1")
    other.claim()
    (sink / "part-00000.parquet").write_bytes(b"theirs")
    with pytest.raises(Exception) as failure:
        run_job(ORDERS, "all-blocking", tmp_path, 1)
    assert "someone_else" in str(failure.value) and str(sink) in str(failure.value)
    assert (sink / "part-00000.parquet").read_bytes() == b"theirs"


def test_unwritable_data_dir_fails_before_spark(tmp_path, no_spark):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(Exception) as failure:
        run_job(ORDERS, "all-blocking", blocker / "data", 1)
    assert str(blocker) in str(failure.value)


def test_missing_input_path_fails_before_spark(tmp_path, no_spark):
    from regionflow.core.graph import JobGraph
    from regionflow.examples import orders

    graph = JobGraph("reads")
    graph.add_vertex("load", 1, fn=orders.generate_products, reads=[str(tmp_path / "missing.csv")], sink="x")
    runner = LocalRunner(ORDERS, Plan(graph), options(tmp_path, 1))
    with pytest.raises(RunFailed, match="'load' reads .*missing.csv.*does not exist"):
        runner.run()


def test_adaptive_parallelism_is_2_on_2_slots_and_8_on_8_with_identical_results(tmp_path, shared_servers):
    """`regionflow run` decides [2, 8] from the cluster; the region program plans with the same value
    (its sink files are named by the subtasks that wrote them). On the session's shared Connect server (a
    spark-submit per run cost ~35 s each here): the cluster of 2 or 8 slots sizes the grant and the Spark job,
    whatever cores the server has."""
    from regionflow.core.adaptive import decide

    servers, _ = shared_servers
    job = "rf_test_jobs:adaptive_job"
    figures = {}
    for slots in (2, 8):
        graph, decisions = decide(load_job(job), slots, "all-pipelined")
        assert decisions == {"orders": slots, "per_customer": slots}
        runner = LocalRunner(job, Plan(graph, "all-pipelined"),
                             options(tmp_path / f"s{slots}", slots, backend="session", servers=servers))
        summary = runner.run()
        sink = summary.sinks["per_customer"]
        (unit,) = summary.units
        parts = sorted(name for name in os.listdir(sink["path"]) if name.startswith("part-"))
        figures[slots] = (sink["rows"], sink["checksum"], unit.slots, parts)
    assert figures[2][:2] == figures[8][:2] and figures[2][0] == 500
    assert (figures[2][2], figures[8][2]) == (2, 8)
    assert set(figures[2][3]) <= {"part-00000.parquet", "part-00001.parquet"}


def test_a_unit_task_without_its_adaptive_decisions_is_refused_not_run_with_another_plan(tmp_path):
    from regionflow.core.adaptive import decide
    from regionflow.core.errors import SpecError
    from regionflow.spark.data.task import UnitTask

    graph, decisions = decide(load_job("rf_test_jobs:adaptive_job"), 2, "all-pipelined")
    task = UnitTask(job="rf_test_jobs:adaptive_job", mode="all-pipelined", run_id="r", data_dir=str(tmp_path),
                    unit_key="u", unit_name="u", regions=[0], attempt_id="a1", parallelism=decisions,
                    subtasks=Plan(graph, "all-pipelined").topology.subtask_count)
    assert task.plan().topology.subtask_count == 4
    task.parallelism = {}
    with pytest.raises(SpecError, match="plans 16 subtasks here, but the run was planned with 4"):
        task.plan()
