"""Airflow's HA setup: two schedulers on PostgreSQL, each with its own RegionExecutor, share one slot pool
through regionflow's store (also on PostgreSQL). Twenty runs of `rf_ha` (tasks asking 1, 2 and 3 of the 4
slots) compete: the ledger shows no slot held by two grants at once, the FIFO order holds across the
schedulers, and every run succeeds. The PostgreSQL server is the session's (tests/postgres.py); no Spark."""
from __future__ import annotations

import os
import shutil
import time

import pytest
from test_shared_pool import fifo_violations, overlapping_holders

from regionflow.embedded import EmbeddedAirflow
from regionflow.store import GrantState, RegionflowStore

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
    stack = EmbeddedAirflow(str(home), str(dags), regionflow_options=options, parallelism=8,
                            database_url=postgres.new_database("airflow"), schedulers=2,
                            components=("api-server", "scheduler", "dag-processor"))
    stack.start()
    try:
        yield stack, store_url
    finally:
        stack.stop()


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
    deadline = time.monotonic() + 30  # the last ends reach the executors a moment after the runs
    while any(g.state is not GrantState.RELEASED for g in store.grants()) and time.monotonic() < deadline:
        time.sleep(0.5)
    grants = store.grants()
    waits = sorted(g.granted_at - g.submitted_at for g in grants)
    print(f"grant waits: median {waits[len(waits) // 2]:.2f} s, max {waits[-1]:.2f} s over {len(grants)} grants")
    assert len(grants) >= 3 * RUNS and all(g.state is GrantState.RELEASED for g in grants)
    assert overlapping_holders(grants) == []
    assert fifo_violations(grants) == []
    owners = {g.owner for g in grants}
    schedulers = {s.scheduler_id for s in store.schedulers()}
    assert len(schedulers) == 2 and owners <= schedulers
    assert len(owners) == 2, "both schedulers queued task instances"  # Airflow splits runs between them
