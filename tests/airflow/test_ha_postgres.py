"""Airflow's HA setup: two schedulers on PostgreSQL, each with its own RegionExecutor, share one slot pool
through regionflow's store (also on PostgreSQL). Twenty runs of `rf_ha` (tasks asking 1, 2 and 3 of the 4
slots) compete: the ledger shows no slot held by two grants at once, the FIFO order holds across the
schedulers, and every run succeeds. Then one scheduler is killed (kill -9) while its tasks run: the other
takes over its rows and adopts its running task instances, which finish without a restart, and no slot
leaks. The PostgreSQL server is the session's (tests/postgres.py); no Spark."""
from __future__ import annotations

import os
import shutil
import time

import pytest
from pool_checks import fifo_violations, overlapping_holders

from regionflow.processes import live_processes
from regionflow.store import GrantState, RegionflowStore
from regionflow.testing import EmbeddedAirflow

HERE = os.path.dirname(__file__)
RUNS = 20
pytestmark = pytest.mark.timeout(1200)


@pytest.fixture(scope="module")
def ha_stack(tmp_path_factory, postgres):
    home = tmp_path_factory.mktemp("ha")
    dags = home / "dags"
    shutil.copytree(os.path.join(HERE, "dags_ha"), dags)
    store_url = postgres.new_database("store")
    options = {"hosts": "a:slots=2;b:slots=2", "data_dir": str(home / "data"), "store_url": store_url,
               "backend": "submit"}
    # A stopped scheduler is noticed after 10 s and its task instances adopted within 5 s more (Airflow's
    # defaults, 30 s and 300 s, would only make the kill test slower).
    extra = {"scheduler": {"scheduler_health_check_threshold": "10", "orphaned_tasks_check_interval": "5"}}
    stack = EmbeddedAirflow(str(home), str(dags), regionflow_options=options, parallelism=8,
                            database_url=postgres.new_database("airflow"), schedulers=2, extra_config=extra,
                            components=("api-server", "scheduler", "dag-processor"))
    stack.start()
    try:
        yield stack, store_url
    finally:
        stack.stop()


def settle(store, timeout=60):
    """The store's rows once none is waiting or granted (the last ends reach the executors a moment
    after Airflow calls the runs done)."""
    deadline = time.monotonic() + timeout
    while any(g.state is not GrantState.RELEASED for g in store.grants()) and time.monotonic() < deadline:
        time.sleep(0.5)
    return store.grants()


def test_two_schedulers_share_one_pool_without_a_double_grant_and_in_fifo_order(ha_stack):
    stack, store_url = ha_stack
    stack.wait_for_dag("rf_ha")
    stack.unpause("rf_ha")
    run_ids = [stack.trigger("rf_ha") for _ in range(RUNS)]
    states = {run_id: stack.wait_for_run("rf_ha", run_id, timeout=900) for run_id in run_ids}
    if set(states.values()) != {"success"}:
        failed = next(run_id for run_id, state in states.items() if state != "success")
        tis = stack.task_instances("rf_ha", failed)
        logs = [stack.task_log("rf_ha", failed, ti["task_id"], max(ti["try_number"], 1))[-3000:] for ti in tis]
        pytest.fail(f"runs not successful: {states}\ntask instances of {failed}: {tis}\n" + "\n".join(logs)
                    + stack.log_tails())
    store = RegionflowStore(store_url)
    grants = settle(store)
    waits = sorted(g.granted_at - g.submitted_at for g in grants)
    print(f"grant waits: median {waits[len(waits) // 2]:.2f} s, max {waits[-1]:.2f} s over {len(grants)} grants")
    assert len(grants) >= 3 * RUNS and all(g.state is GrantState.RELEASED for g in grants)
    assert overlapping_holders(grants) == []
    assert fifo_violations(grants) == []
    owners = {g.owner for g in grants}
    schedulers = {s.scheduler_id for s in store.schedulers()}
    assert len(schedulers) == 2 and owners <= schedulers
    assert len(owners) == 2, "both schedulers queued task instances"  # Airflow splits runs between them


def test_a_killed_scheduler_is_taken_over_and_its_running_tasks_finish_without_a_restart(ha_stack):
    stack, store_url = ha_stack
    store = RegionflowStore(store_url)
    before = {g.bulk_id for g in store.grants()}
    run_ids = [stack.trigger("rf_ha", conf={"sleep": 8}) for _ in range(4)]
    pids = {s.pid: s.scheduler_id for s in store.schedulers() if s.ended_at is None}
    deadline = time.monotonic() + 180
    victim = None
    while victim is None and time.monotonic() < deadline:  # a scheduler whose task runs now
        owners = {g.owner for g in store.live_grants()}
        victim = next((pid for pid in stack.pids_of("scheduler") if pids.get(pid) in owners), None)
        time.sleep(0.5)
    assert victim is not None, "no task started within 180 s"
    victim_id = pids[victim]
    running = [g for g in store.live_grants() if g.owner == victim_id]
    stack.kill("scheduler", stack.pids_of("scheduler").index(victim))
    states = {run_id: stack.wait_for_run("rf_ha", run_id, timeout=600) for run_id in run_ids}
    assert set(states.values()) == {"success"}, states
    grants = [g for g in settle(store) if g.bulk_id not in before]
    assert all(g.state is GrantState.RELEASED for g in grants), [(g.label, g.state) for g in grants]
    assert overlapping_holders(grants) == []
    [stopped] = [s for s in store.schedulers() if s.scheduler_id == victim_id]
    assert stopped.ended_at is not None  # taken over
    for grant in running:  # what ran when the scheduler died finished on that very try, no restart
        after = store.grant_for(grant.bulk_id)
        assert after.state is GrantState.RELEASED and "adopted by scheduler" in (after.message or "")
        [ti] = [t for t in stack.task_instances(grant.dag_id, grant.run_id) if t["task_id"] == grant.task_id]
        assert ti["state"] == "success" and ti["try_number"] == grant.try_number == 1
    # the dead scheduler's orphans (LocalExecutor's workers, whose title may hide the stack's tag) are
    # still the stack's: stop() ends them
    orphans = [pid for pid, _, group in live_processes() if group == victim]
    assert orphans and set(orphans) <= set(stack.pids())
