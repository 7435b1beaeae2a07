"""Faults on the session backend through Airflow, on two hosts (a and b, each with its own Spark
Connect server started by the embedded stack): kill -9 of an Airflow component while a region attempt
runs (the component then restarted, as its supervisor would), and kill -9 of the server that runs a
region attempt, and kill -9 of the LocalExecutor worker that supervises a region's task process. Each run
ends with the reference's sink rows and every slot released."""
import os
import re
import shutil
import signal
import time

import pytest
from e2e_runs import run, task_log_file

from regionflow.executors.region_executor import UNHEARD_END_GRACE_S
from regionflow.processes import command_line, live_processes
from regionflow.scheduling.blocklist import EVERY_JOB
from regionflow.store import RegionflowStore
from regionflow.testing import EmbeddedAirflow
from regionflow.units.dags import dag_run_outputs

pytestmark = pytest.mark.timeout(900)
HERE = os.path.dirname(__file__)
DAG_ID = "orders_host_loss"
# Airflow fails a task instance whose heartbeats stopped after this long (default 300 s): the end of a try
# whose supervising worker was killed. Live tasks heartbeat every 2 s (the stack's min_heartbeat_interval): 15
# missed heartbeats in a row end a try.
HEARTBEAT_TIMEOUT_S = 30
EXECUTION_API_RETRIES = 10


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    home = tmp_path_factory.mktemp("airflow-session-faults")
    dags = home / "dags"
    shutil.copytree(os.path.join(HERE, "dags_session"), dags)
    options = {"hosts": "a:slots=4;b:slots=4", "max_shards": "1", "data_dir": str(home / "data"),
               "backend": "session", "blocklist_expiry": "600", "lost_host_probe_interval": "2"}
    extra = {"scheduler": {"task_instance_heartbeat_timeout": str(HEARTBEAT_TIMEOUT_S),
                           "task_instance_heartbeat_timeout_detection_interval": "5"},
             # a task process started while the api-server is down (killed below) retries its execution API
             # calls; the default 5 tries wait ~15 s in all, shorter than a restart on a loaded box (a try of
             # `products` failed while still queued, twice, in 11 s each): 10 tries wait minutes
             "workers": {"execution_api_retries": str(EXECUTION_API_RETRIES)}}
    with EmbeddedAirflow(str(home), str(dags), regionflow_options=options, extra_config=extra) as airflow:
        yield airflow


def wait_until(predicate, timeout):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.5)
    return True


def running_attempt(store, run_id, task_id, timeout=300.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for attempt in store.attempts(DAG_ID, run_id, task_id):
            if attempt.state.value == "running":
                return attempt
        time.sleep(0.05)
    raise AssertionError(f"no attempt of {task_id} started within {timeout:.0f} s")


def sink_figures(stack, run_id):
    layout, partitions = dag_run_outputs(os.path.join(stack.dags_folder, "rf_host_loss.py"), DAG_ID, run_id,
                                         stack.regionflow_options["data_dir"], 1)
    figures = layout.sink_figures(partitions, stack.regionflow_options["data_dir"])["totals"]
    return figures["rows"], figures["checksum"]


def test_the_components_killed_mid_run_leave_the_run_exact(stack, orders_reference):
    """kill -9 of the dag-processor, the triggerer and the api-server together while `orders` runs on
    Spark, restarted 5 s later (one run for the three: each used to have a run of its own, ~40 s each):
    the run succeeds, every slot goes back, the sink holds exactly the reference's rows."""
    store = RegionflowStore.from_config(f"sqlite:///{stack.home}/regionflow.db")
    run_id = run(stack, DAG_ID)
    running_attempt(store, run_id, "orders")
    components = ("dag-processor", "triggerer", "api-server")
    for component in components:
        stack.kill(component)
    time.sleep(5)  # the run goes on without them meanwhile (its task processes wait for the api-server)
    stack.revive(*components)

    assert stack.wait_for_run(DAG_ID, run_id, timeout=600) == "success"
    assert wait_until(lambda: all(g.state.value == "released" for g in store.grants(DAG_ID, run_id)), 60), \
        [(g.bulk_id, g.state.value) for g in store.grants(DAG_ID, run_id)]  # no slot leaked
    assert store.live_grants() == []
    assert sink_figures(stack, run_id) == (orders_reference["rows"], orders_reference["checksum"])


def task_process(ti_id):
    """The pid of the task process (Airflow's task runner, titled ``airflow worker -- <ti id>``) of a try."""
    return next((pid for pid, _, _ in live_processes()
                 if command_line(pid).startswith(f"airflow worker -- {ti_id}")), None)


def parent_of(pid):
    """The parent pid of live process `pid`."""
    return next(parent for child, parent, _ in live_processes() if child == pid)


def test_a_killed_task_process_has_its_attempt_settled_and_its_spark_session_interrupted(stack, orders_reference):
    """kill -9 of the task process running `orders`' attempt (its Spark Connect client): the process records
    nothing, so the RegionExecutor, told the try ended, records the attempt killed and interrupts its
    session on the host's server by the attempt id before the slots go back; Airflow's retry runs a new
    attempt, the run succeeds with the reference's rows and no attempt is left recorded as running."""
    store = RegionflowStore.from_config(f"sqlite:///{stack.home}/regionflow.db")
    run_id = run(stack, DAG_ID)
    victim = running_attempt(store, run_id, "orders")
    [ti] = [t for t in stack.task_instances(DAG_ID, run_id) if t["task_id"] == "orders"]
    assert wait_until(lambda: task_process(ti["id"]) is not None, 60), "no task process of orders"
    os.kill(task_process(ti["id"]), signal.SIGKILL)

    assert stack.wait_for_run(DAG_ID, run_id, timeout=600) == "success"
    assert wait_until(lambda: store.attempt(victim.attempt_id).state.value != "running", 60)
    lost = store.attempt(victim.attempt_id)
    assert lost.state.value == "killed", lost
    assert lost.message.startswith("its task process ended without recording how the attempt ended"), lost.message
    assert re.search(rf"\d+ Spark Connect operation\(s\) of its session interrupted on host {victim.host}$",
                     lost.message), lost.message
    attempts = store.attempts(DAG_ID, run_id)
    assert [a.state.value for a in attempts if a.task_id == "orders"] == ["killed", "succeeded"]
    assert not [a for a in attempts if a.state.value == "running"]
    assert wait_until(lambda: all(g.state.value == "released" for g in store.grants(DAG_ID, run_id)), 60), \
        [(g.bulk_id, g.state.value) for g in store.grants(DAG_ID, run_id)]
    assert sink_figures(stack, run_id) == (orders_reference["rows"], orders_reference["checksum"])


def test_a_killed_worker_ends_its_try_by_heartbeat_and_its_slots_go_back(stack, orders_reference):
    """kill -9 of the LocalExecutor worker process that supervises `orders`' task process: nobody reports the
    try's end to the executor and its task process is orphaned. Airflow fails the try once its heartbeats
    stop (`task_instance_heartbeat_timeout`), the retry runs, and the run succeeds with exactly the
    reference's rows (whichever attempt commits first wins, the other cannot add a row). The executor gives
    the unreported try's slots back `UNHEARD_END_GRACE_S` after Airflow's database shows it ended, no
    attempt is left recorded as running, and no grant is left live."""
    store = RegionflowStore.from_config(f"sqlite:///{stack.home}/regionflow.db")
    run_id = run(stack, DAG_ID)
    victim = running_attempt(store, run_id, "orders")
    [ti] = [t for t in stack.task_instances(DAG_ID, run_id) if t["task_id"] == "orders"]
    assert wait_until(lambda: task_process(ti["id"]) is not None, 60), "no task process of orders"
    task_pid = task_process(ti["id"])
    worker_pid = parent_of(task_pid)
    assert "LocalExecutor" in command_line(worker_pid), command_line(worker_pid)  # the worker, not the scheduler
    os.kill(worker_pid, signal.SIGKILL)

    assert stack.wait_for_run(DAG_ID, run_id, timeout=600) == "success"
    tries = [t["try_number"] for t in stack.task_instances(DAG_ID, run_id) if t["task_id"] == "orders"]
    assert tries == [2], tries  # the first try ended by Airflow's heartbeat check, the retry ran
    assert sink_figures(stack, run_id) == (orders_reference["rows"], orders_reference["checksum"])
    assert wait_until(lambda: all(g.state.value == "released" for g in store.grants(DAG_ID, run_id)),
                      UNHEARD_END_GRACE_S + 90), [(g.bulk_id, g.state.value) for g in store.grants(DAG_ID, run_id)]
    assert store.live_grants() == []
    assert wait_until(lambda: store.attempt(victim.attempt_id).state.value != "running", 60), \
        store.attempt(victim.attempt_id)
    ended = store.attempt(victim.attempt_id)
    # the orphan stops at once, saying why: its attempt's watch sees it lost its parent, or its next log
    # line finds the pipe broken, whichever comes first; had it committed before, its commit would stand
    assert (ended.state.value == "killed" and ended.message.startswith("orphaned: the process that started")) \
        or (ended.state.value == "failed" and "lost its supervisor" in ended.message) \
        or ended.state.value == "succeeded", ended
    attempts = [a for a in store.attempts(DAG_ID, run_id) if a.task_id == "orders"]
    assert not [a for a in attempts if a.state.value == "running"], attempts
    assert sum(a.state.value == "succeeded" for a in attempts) == 1, attempts  # one commit, one winner
    assert wait_until(lambda: task_pid not in {pid for pid, _, _ in live_processes()}, 60), \
        "the orphaned task process lives on"


# Last in the module: the killed server is down until the test starts it again.
def test_a_killed_server_loses_its_attempt_and_the_retry_runs_on_the_other_host(stack, orders_reference):
    store = RegionflowStore.from_config(f"sqlite:///{stack.home}/regionflow.db")
    run_id = run(stack, DAG_ID)
    victim = running_attempt(store, run_id, "orders")
    server = stack.session_servers.server(victim.host)
    os.killpg(server.status().pid, signal.SIGKILL)  # kill -9 of the host's whole Spark (its JVM)
    killed_at = time.time()

    assert stack.wait_for_run(DAG_ID, run_id, timeout=600) == "success"
    lost = store.attempt(victim.attempt_id)
    assert lost.state.value in ("failed", "killed") and f"host {victim.host} lost" in lost.message
    assert lost.ended_at - killed_at < 30  # the attempt did not hang on the dead server
    attempts = store.attempts(DAG_ID, run_id)
    [retry] = [a for a in attempts if a.task_id == "orders" and a.state.value == "succeeded"]
    assert retry.host != victim.host
    later = [a for a in attempts if a.started_at > lost.ended_at]
    assert later and all(a.host != victim.host for a in later)  # the lost host is blocklisted for the run
    assert [b.host for b in store.active_blocks() if b.job_id == EVERY_JOB] == [victim.host]  # ... and for every run
    assert wait_until(lambda: all(g.state.value == "released" for g in store.grants(DAG_ID, run_id)), 60), \
        [(g.bulk_id, g.state.value) for g in store.grants(DAG_ID, run_id)]  # every slot of the run went back
    assert sink_figures(stack, run_id) == (orders_reference["rows"], orders_reference["checksum"])
    assert f"host {victim.host} lost" in task_log_file(stack, DAG_ID, run_id, "orders", 1)
    # the host comes back: the scheduler's probe (every 2 s here) lifts its entry long before its 600 s end
    server.start()
    assert wait_until(lambda: not [b for b in store.active_blocks() if b.job_id == EVERY_JOB], 60), \
        store.active_blocks()
