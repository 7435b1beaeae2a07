"""The session backend through Airflow: region tasks run as client sessions on the host's long-lived
Spark Connect server (started by the embedded stack, as `regionflow session start` would), give the
reference checksum in every mode, and a server that does not answer fails the task at once as a lost
host. One stack for the module."""
import glob
import os
import shutil

import pytest
from test_e2e import DAGS, MODES, run

from regionflow.operators.region import dag_run_outputs
from regionflow.store import RegionflowStore
from regionflow.testing import EmbeddedAirflow

pytestmark = pytest.mark.timeout(1200)


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    home = tmp_path_factory.mktemp("airflow-session")
    dags = home / "dags"
    os.makedirs(dags)
    shutil.copy(os.path.join(DAGS, "rf_modes.py"), dags / "rf_modes.py")
    options = {"hosts": "localhost:slots=4", "max_shards": "1", "data_dir": str(home / "data"), "backend": "session"}
    with EmbeddedAirflow(str(home), str(dags), regionflow_options=options) as airflow:
        yield airflow
    assert [status.state for status in airflow.session_servers.status()] == ["down"]


def task_log_file(stack, dag_id, run_id, task_id, try_number):
    """The try's log file as written (the exception's text is in its structured error detail)."""
    path = os.path.join(stack.logs_dir, f"dag_id={dag_id}", f"run_id={run_id}", f"task_id={task_id}",
                        f"attempt={try_number}.log")
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def test_every_mode_gives_the_reference_checksum_on_the_session_backend(stack, orders_reference):
    assert [status.state for status in stack.session_servers.status()] == ["up"]
    runs = {"orders_" + mode.replace("-", "_"): None for mode in MODES}
    for dag_id in runs:
        runs[dag_id] = run(stack, dag_id)
    for dag_id, run_id in runs.items():
        assert stack.wait_for_run(dag_id, run_id, timeout=600) == "success", dag_id
    data_dir = stack.regionflow_options["data_dir"]
    store = RegionflowStore.from_config(f"sqlite:///{stack.home}/regionflow.db")
    for dag_id, run_id in runs.items():
        layout, partitions = dag_run_outputs(os.path.join(stack.dags_folder, "rf_modes.py"), dag_id, run_id,
                                             data_dir, 1)
        figures = layout.sink_figures(partitions, data_dir)["totals"]
        assert (figures["rows"], figures["checksum"]) == (orders_reference["rows"], orders_reference["checksum"])
        attempts = store.attempts(dag_id, run_id)
        assert attempts and all(a.state.value == "succeeded" for a in attempts)
        # every blocking partition was released once its consumers committed (partition_retention = 0)
        left = [path for path in glob.glob(os.path.join(partitions.units_dir, "*", "e*")) if os.path.isdir(path)]
        assert left == [], (dag_id, left)
    # consumers of blocking edges recorded the bytes they read (the speculation sensor weights by them)
    blocking = store.attempts("orders_all_blocking", runs["orders_all_blocking"])
    assert any(a.input_bytes for a in blocking) and any(a.input_bytes is None for a in blocking)
    some_task = stack.task_instances("orders_all_blocking", runs["orders_all_blocking"])[0]
    log = stack.task_log("orders_all_blocking", runs["orders_all_blocking"], some_task["task_id"], 1)
    assert "on sc://127.0.0.1:" in log  # the attempt's own lines reach the task log


def test_a_server_that_does_not_answer_fails_the_task_at_once_as_a_lost_host(stack):
    stack.session_servers.stop()
    try:
        run_id = run(stack, "orders_all_pipelined")
        assert stack.wait_for_run("orders_all_pipelined", run_id, timeout=300) == "failed"
        [ti] = stack.task_instances("orders_all_pipelined", run_id)
        log = task_log_file(stack, "orders_all_pipelined", run_id, ti["task_id"], ti["try_number"])
        assert "host localhost lost" in log and "regionflow session start --host localhost" in log
    finally:
        stack.session_servers.start()
    stack.clear_task("orders_all_pipelined", run_id, [ti["task_id"]])
    assert stack.wait_for_run("orders_all_pipelined", run_id, timeout=300) == "success"
