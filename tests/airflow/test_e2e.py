"""The RegionExecutor end to end on a real Airflow (api-server, scheduler, dag-processor on SQLite)
with real Spark local[k] submissions, on a 4-slot cluster. One stack for the module."""
import os
import shutil
from datetime import datetime

import pytest

from regionflow.operators.region import dag_run_outputs
from regionflow.testing import EmbeddedAirflow

DAGS = os.path.join(os.path.dirname(__file__), "dags_e2e")
MODES = ("all-blocking", "forward-pipelined-only", "pointwise-pipelined-only", "all-pipelined")
pytestmark = pytest.mark.timeout(1800)


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    home = tmp_path_factory.mktemp("airflow")
    dags = home / "dags"
    shutil.copytree(DAGS, dags)
    options = {"hosts": "localhost:slots=4", "max_shards": "1", "data_dir": str(home / "data"),
               "backend": "submit"}  # the session backend has test_e2e_session.py
    airflow = EmbeddedAirflow(str(home), str(dags), regionflow_options=options)
    airflow.start()
    try:
        yield airflow
    finally:
        airflow.stop()


def run(stack, dag_id, timeout=900):
    stack.wait_for_dag(dag_id)
    stack.unpause(dag_id)
    return stack.trigger(dag_id)


def times(stack, dag_id, run_id):
    return {(ti["task_id"], ti["map_index"]): (_at(ti["start_date"]), _at(ti["end_date"]), ti["state"])
            for ti in stack.task_instances(dag_id, run_id)}


def _at(value):
    return datetime.fromisoformat(value.replace("Z", "+00:00")) if value else None


def test_region_bigger_than_cluster_fails_at_once_with_the_pools_message(stack):
    run_id = run(stack, "too_big")
    assert stack.wait_for_run("too_big", run_id, timeout=300) == "failed"
    (ti,) = stack.task_instances("too_big", run_id)
    assert ti["state"] == "failed" and ti["start_date"] is None or ti["end_date"] is not None
    log = stack.task_log("too_big", run_id, ti["task_id"], max(ti["try_number"], 1), ti["map_index"])
    assert "needs 5 slots" in log and "4 slots" in log, log[-2000:]


def test_a_run_whose_later_region_is_bigger_than_the_cluster_fails_at_its_start(stack):
    """FLIP-138 per run: the first region task declares the run; its 5-slot second region can never
    run on 4 slots, so the first task fails when it is queued, before any Spark work."""
    from regionflow.store import RegionflowStore

    run_id = run(stack, "too_big_later")
    assert stack.wait_for_run("too_big_later", run_id, timeout=300) == "failed"
    states = {ti["task_id"]: ti for ti in stack.task_instances("too_big_later", run_id)}
    assert {task: ti["state"] for task, ti in states.items()} == {"source": "failed",
                                                                  "spread__count": "upstream_failed"}
    log = stack.task_log("too_big_later", run_id, "source", max(states["source"]["try_number"], 1))
    assert "this DAG run can never finish on this cluster" in log, log[-2000:]
    assert "region 'too_big_later.spread__count[0]" in log and "needs 5 slots" in log and "4 slots" in log
    store = RegionflowStore.from_config(f"sqlite:///{stack.home}/regionflow.db")
    assert store.attempts("too_big_later", run_id) == []  # no Spark work was done


def test_two_runs_each_needing_the_whole_cluster_both_complete_oldest_first(stack):
    first = run(stack, "whole_cluster")
    second = stack.trigger("whole_cluster")
    assert stack.wait_for_run("whole_cluster", first, timeout=900) == "success"
    assert stack.wait_for_run("whole_cluster", second, timeout=900) == "success"
    (start_1, end_1, _), = times(stack, "whole_cluster", first).values()
    (start_2, end_2, _), = times(stack, "whole_cluster", second).values()
    assert end_1 <= start_2, "the second run's region started while the first held the whole cluster"


def test_big_region_starts_before_a_stream_of_one_slot_tasks_ends(stack):
    stream_run = run(stack, "stream")
    stack.wait_for_dag("big_after_stream")
    stack.unpause("big_after_stream")
    _wait_until_running(stack, "stream", stream_run)
    big_run = stack.trigger("big_after_stream")
    assert stack.wait_for_run("big_after_stream", big_run, timeout=900) == "success"
    assert stack.wait_for_run("stream", stream_run, timeout=900) == "success"
    (big_start, _, _), = times(stack, "big_after_stream", big_run).values()
    stream_starts = [start for start, _, _ in times(stack, "stream", stream_run).values()]
    assert big_start < max(stream_starts), "the 4-slot region waited for the whole stream"


def _wait_until_running(stack, dag_id, run_id, timeout=120):
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(ti["state"] == "running" for ti in stack.task_instances(dag_id, run_id)):
            return
        time.sleep(0.5)
    raise AssertionError(f"no task of {dag_id} started within {timeout} s")


def test_example_job_gives_the_reference_checksum_in_every_mode(stack, orders_reference):
    runs = {}
    for mode in MODES:
        dag_id = "orders_" + mode.replace("-", "_")
        runs[dag_id] = run(stack, dag_id)
    for dag_id, run_id in runs.items():  # 13 Spark submissions share 4 slots and 2 cores
        assert stack.wait_for_run(dag_id, run_id, timeout=1500) == "success", dag_id
    data_dir = stack.regionflow_options["data_dir"]
    for dag_id, run_id in runs.items():
        layout, partitions = dag_run_outputs(os.path.join(stack.dags_folder, "rf_modes.py"), dag_id, run_id,
                                             data_dir, 1)
        figures = layout.sink_figures(partitions, data_dir)["totals"]
        assert (figures["rows"], figures["checksum"]) == (orders_reference["rows"],
                                                          orders_reference["checksum"]), dag_id
        region_tasks = {task_id for task_id, _ in times(stack, dag_id, run_id)}
        assert len(region_tasks) == len(layout.plan.region_set.logical)
