"""regionflow's store on PostgreSQL restarts mid-run (issue 43 item 5): the scheduler keeps running, the
store's grants stay consistent and the runs finish. A real stack (Airflow's metadata on SQLite, so the
restart concerns regionflow's store alone; `backend = submit` and plain Python tasks: no Spark) on a
PostgreSQL server of this module's own (tests/postgres.py), stopped for `OUTAGE_S` seconds while one task
needing the whole cluster runs and others wait for slots. First, without a stack, the store itself across
restarts of that server: pooled connections replaced, the executor's store waiting. The retry decision is
tested without a server in tests/test_store_retry.py."""
from __future__ import annotations

import os
import shutil
import statistics
import threading
import time
from datetime import datetime

import pytest
from pool_checks import overlapping_holders
from postgres import throwaway_server

from regionflow.executors.store_retry import RetryingStore, StoreRetry
from regionflow.store import GrantState, RegionflowStore, StoreError
from regionflow.testing import EmbeddedAirflow

HERE = os.path.dirname(__file__)
DAG_ID = "rf_store_restart"
RUNS = 4
OUTAGE_S = 6.0  # the store's server is down this long (plus pg_ctl's own stop and start)
pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def server():
    """A PostgreSQL server of this module's own: the tests restart it (the session's serves other modules)."""
    with throwaway_server("regionflow-pg-restart-") as postgres:
        yield postgres


@pytest.fixture(scope="module")
def restart_stack(tmp_path_factory, server):
    home = tmp_path_factory.mktemp("store_restart")
    dags = home / "dags"
    shutil.copytree(os.path.join(HERE, "dags_store_restart"), dags)
    store_url = server.new_database("store")
    options = {"hosts": "localhost:slots=4", "data_dir": str(home / "data"), "store_url": store_url,
               "backend": "submit"}
    stack = EmbeddedAirflow(str(home), str(dags), regionflow_options=options, parallelism=8,
                            components=("api-server", "scheduler", "dag-processor"))
    stack.start()
    try:
        yield stack, store_url
    finally:
        stack.stop()


def wait_until(condition, timeout, what):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out after {timeout} s waiting for {what}"
        time.sleep(0.25)


def settle(store, timeout=60):
    """The store's rows once none is waiting or granted (the last ends reach the executor a moment after
    Airflow calls the runs done)."""
    deadline = time.monotonic() + timeout
    while any(g.state in (GrantState.WAITING, GrantState.GRANTED) for g in store.grants()) \
            and time.monotonic() < deadline:
        time.sleep(0.5)
    return store.grants()


def whole_running_while_another_waits(stack, store, run_ids):
    """A `whole` task (all 4 slots) runs in its worker while another run's `whole` waits for its slots."""
    wholes = [g for g in store.grants(dag_id=DAG_ID) if g.task_id == "whole"]
    granted = [g for g in wholes if g.state is GrantState.GRANTED]
    if not granted or not any(g.state is GrantState.WAITING for g in wholes):
        return False
    tis = stack.task_instances(DAG_ID, granted[0].run_id)
    return any(ti["task_id"] == "whole" and ti["state"] == "running" for ti in tis)


def scheduler_alive(stack) -> bool:
    return stack.component_alive("scheduler") and stack.health()["scheduler"]["status"] == "healthy"


def store_refused(store) -> bool:
    try:
        store.pool_version()
    except StoreError:
        return True
    return False


def test_a_store_call_waits_for_a_restarting_server_and_pooled_connections_are_replaced(server):
    url = server.new_database("calls")
    plain, retrying = RegionflowStore(url), RetryingStore(url, retry=StoreRetry(10.0))
    assert plain.pool_version() == retrying.pool_version() == 0  # each keeps a pooled connection
    server.restart()
    assert plain.pool_version() == 0  # the pooled connection died with the server: replaced before use
    restart = threading.Thread(target=server.restart, kwargs={"down_s": 3.0})
    restart.start()
    try:
        wait_until(lambda: store_refused(plain), 30, "the server to stop")
        started = time.monotonic()
        assert retrying.pool_version() == 0  # waits for the server instead of failing
        waited = time.monotonic() - started
    finally:
        restart.join()
    assert 1.0 < waited < 10.0


def test_runs_in_flight_and_waiting_finish_when_the_stores_server_restarts(restart_stack, server):
    stack, store_url = restart_stack
    store = RegionflowStore.from_config(store_url)
    stack.wait_for_dag(DAG_ID)
    stack.unpause(DAG_ID)
    run_ids = [stack.trigger(DAG_ID, conf={"whole": 3, "one": 1}) for _ in range(RUNS)]
    wait_until(lambda: whole_running_while_another_waits(stack, store, run_ids), 300,
               "a `whole` task to run while another waits for slots")
    down = time.time()
    server.restart(down_s=OUTAGE_S)
    up = time.time()

    states = {run_id: stack.wait_for_run(DAG_ID, run_id, timeout=600) for run_id in run_ids}
    if set(states.values()) != {"success"}:
        failed = next(run_id for run_id, state in states.items() if state != "success")
        tis = stack.task_instances(DAG_ID, failed)
        logs = [stack.task_log(DAG_ID, failed, ti["task_id"], max(ti["try_number"], 1))[-3000:] for ti in tis]
        pytest.fail(f"runs not successful: {states}\ntask instances of {failed}: {tis}\n" + "\n".join(logs)
                    + stack.log_tails())
    assert scheduler_alive(stack)

    grants = settle(store)
    assert [(g.bulk_id, g.state) for g in grants if g.state is not GrantState.RELEASED] == []
    assert overlapping_holders(grants) == []
    for run_id in run_ids:  # each task instance ran once, on try 1, admitted once
        tis = stack.task_instances(DAG_ID, run_id)
        assert sorted((ti["task_id"], ti["state"], ti["try_number"]) for ti in tis) == [
            ("left", "success", 1), ("right", "success", 1), ("whole", "success", 1)]
        rows = [g for g in grants if g.run_id == run_id]
        assert sorted((g.task_id, g.try_number, g.bulk_id.split(":", 1)[1]) for g in rows) == [
            ("left", 1, "1"), ("right", 1, "1"), ("whole", 1, "1")], [(g.bulk_id, g.message) for g in rows]

    log = open(stack.log_path("scheduler"), encoding="utf-8").read()
    assert "regionflow's store is unreachable" in log  # the executor met the outage, and waited it out
    assert "unexpected error" not in log

    print(figures(stack, run_ids, down, up))


def figures(stack, run_ids, down, up) -> str:
    """How long the store was away, and how long tasks queued while it was waited for their start then
    (Airflow's queued time to start time) against the others."""
    def moment(text):
        return datetime.fromisoformat(text).timestamp()

    waits_in, waits_out, spans, wholes = [], [], [], []
    for run_id in run_ids:
        run = stack.dag_run(DAG_ID, run_id)
        spans.append(moment(run["end_date"]) - moment(run["start_date"]))
        for ti in stack.task_instances(DAG_ID, run_id):
            queued, started = moment(ti["queued_when"]), moment(ti["start_date"])
            (waits_in if queued <= up and started >= down else waits_out).append(started - queued)
            if ti["task_id"] == "whole":
                wholes.append((started, moment(ti["end_date"])))
    wholes.sort()
    pairs = zip(wholes, wholes[1:], strict=False)
    handoffs = [(start - end, end <= up and start >= down) for (_, end), (start, _) in pairs]
    return (f"store down {up - down:.1f} s (pg_ctl stop -m fast, {OUTAGE_S:g} s, pg_ctl start); the whole cluster "
            f"passed from one run's task to the next in {[round(gap, 1) for gap, across in handoffs if across]} s "
            f"across the outage, {[round(gap, 1) for gap, across in handoffs if not across]} s otherwise; queued to "
            f"start: {sorted(round(w, 1) for w in waits_in)} s for tasks queued or waiting across the outage, median "
            f"{statistics.median(waits_out):.1f} s max {max(waits_out):.1f} s for the others; runs took "
            f"{sorted(round(span, 1) for span in spans)} s")
