"""The RegionExecutor end to end on a real Airflow (api-server, scheduler, dag-processor on SQLite)
with real Spark local[k] submissions (the submit backend), on a 4-slot cluster. One stack for the module.
Its tests are `long` (a spark-submit per region); the scheduling scenarios on the same 4-slot cluster run
on the session backend in test_e2e_session.py."""
import os
import shutil
import signal
import time

import pytest
from e2e_runs import DAGS, MODES, run, times

from regionflow.processes import live_processes, start_ticks, wait_until
from regionflow.store import RegionflowStore
from regionflow.testing import EmbeddedAirflow
from regionflow.units.dags import dag_run_outputs

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


@pytest.mark.long  # ~6.5 min here (13 spark-submits); the same four modes on the session backend: test_e2e_session.py
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


SPARK_SUBMIT_CLASS = "org.apache.spark.deploy.SparkSubmit"
SPARK_LAUNCHER_CLASS = "org.apache.spark.launcher.Main"


def driver_jvms(attempt_id):
    """Pids of the Spark driver JVMs (local mode: spark-submit's own JVM, running SparkSubmit) of the
    application named after `attempt_id` (``--name "regionflow <unit> <attempt id>"``) that already run
    the region program (a Python child). Not the launcher JVM nor the shell scripts that start it."""
    parents = {pid: parent for pid, parent, _ in live_processes()}
    found = []
    for pid in parents:
        argv = _argv(pid)
        if argv and os.path.basename(argv[0]) == "java" and SPARK_SUBMIT_CLASS in argv \
                and SPARK_LAUNCHER_CLASS not in argv and any(attempt_id in arg for arg in argv) \
                and any(parent == pid and "python" in os.path.basename((_argv(child) or [""])[0])
                        for child, parent in parents.items()):
            found.append(pid)
    return found


def _argv(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().decode(errors="replace").split("\0")
    except OSError:
        return None


# long: ~1.5 min with this module's stack, which no other test of `make test` needs. Its parts have cheaper
# siblings there: a killed spark-submit's attempt and processes (tests/spark/test_submit.py), a killed region
# attempt retried with the sink exact (tests/spark/test_connect.py, test_e2e_session_faults.py's killed task
# process on the session backend, Airflow's retry and every slot back).
@pytest.mark.long
def test_a_killed_spark_driver_fails_its_attempt_and_the_retry_leaves_the_sink_exact(stack, orders_reference):
    """kill -9 of the Spark driver JVM of a running region attempt (the example job as one region; the
    Airflow task process lives on): the attempt is recorded as failed, killed by SIGKILL, Airflow's retry
    runs one new attempt, the run succeeds, the sink holds exactly the reference's rows and checksum, and
    every grant of the run is released (no slot leaked)."""
    dag_id = "orders_driver_loss"
    store = RegionflowStore.from_config(f"sqlite:///{stack.home}/regionflow.db")
    run_id = run(stack, dag_id)
    victim = _running_attempt(store, dag_id, run_id)
    assert wait_until(lambda: driver_jvms(victim.attempt_id), 60), "the attempt's driver JVM never appeared"
    [driver] = driver_jvms(victim.attempt_id)
    os.kill(driver, signal.SIGKILL)
    assert wait_until(lambda: start_ticks(driver) is None, 10), f"driver {driver} survived kill -9"

    assert stack.wait_for_run(dag_id, run_id, timeout=600) == "success"
    lost = store.attempt(victim.attempt_id)
    assert lost.state.value == "failed" and "killed by signal 9 (SIGKILL)" in lost.message, lost
    attempts = store.attempts(dag_id, run_id)
    assert [(a.task_id, a.state.value) for a in attempts] == [(victim.task_id, "failed"),
                                                              (victim.task_id, "succeeded")], attempts
    [ti] = stack.task_instances(dag_id, run_id)
    assert (ti["task_id"], ti["try_number"], ti["state"]) == (victim.task_id, 2, "success")
    assert wait_until(lambda: all(g.state.value == "released" for g in store.grants(dag_id, run_id)), 60), \
        [(g.bulk_id, g.state.value) for g in store.grants(dag_id, run_id)]  # no slot leaked
    assert len(store.grants(dag_id, run_id)) == 2 and store.live_grants() == []
    layout, partitions = dag_run_outputs(os.path.join(stack.dags_folder, "rf_driver_loss.py"), dag_id, run_id,
                                         stack.regionflow_options["data_dir"], 1)
    figures = layout.sink_figures(partitions, stack.regionflow_options["data_dir"])["totals"]
    assert (figures["rows"], figures["checksum"]) == (orders_reference["rows"], orders_reference["checksum"])


def _running_attempt(store, dag_id, run_id, timeout=600.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for attempt in store.attempts(dag_id, run_id):
            if attempt.state.value == "running":
                return attempt
        time.sleep(0.05)
    raise AssertionError(f"no attempt of {dag_id} started within {timeout:.0f} s")
