"""Speculative execution end to end: a real Airflow stack, real Spark local[1] submissions on two hosts
pinned to different cores, and CPU hogs pinned to core 0 during the run, so host a is really slow.
The slow host's shard is copied to b, the copy commits first, the output equals the reference, the
sink holds exactly one part file per subtask, and the blocklist entry expires afterwards."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

import pytest

from regionflow.core.graph import load_dag_file_job
from regionflow.core.plan import Plan
from regionflow.embedded import EmbeddedAirflow
from regionflow.operators.region import run_key_for
from regionflow.spark.store import PartitionStore
from regionflow.spark.unit import UnitLayout
from regionflow.store import RegionflowStore, job_id_for

DAGS = os.path.join(os.path.dirname(__file__), "dags_speculation")
DAG_ID = "orders_speculation"
HOGS = 4
BLOCKLIST_EXPIRY_S = 20
# Opt-in (REGIONFLOW_E2E_SPECULATION=1): on the shared 2-core box the Airflow stack and other load sit on
# core 1, so host b was as slow as host a under 4 hogs (every shard ~50 s on both) and nothing was
# speculated; the one run so far also hit the sensor reschedule race fixed since in RegionExecutor.
pytestmark = [pytest.mark.timeout(1500),
              pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPU cores"),
              pytest.mark.skipif(not os.environ.get("REGIONFLOW_E2E_SPECULATION"),
                                 reason="opt-in: set REGIONFLOW_E2E_SPECULATION=1 (needs a quiet machine)")]

HOG = "import os\nos.sched_setaffinity(0, {0})\nwhile True:\n    pass\n"


def start_hogs(count: int) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", HOG]) for _ in range(count)]


def stop_hogs(hogs: list[subprocess.Popen]) -> None:
    for hog in hogs:
        hog.kill()
    for hog in hogs:
        hog.wait(timeout=10)


def test_the_copy_of_the_slow_hosts_shard_wins(tmp_path, orders_reference):
    dags = tmp_path / "dags"
    shutil.copytree(DAGS, dags)
    data_dir = str(tmp_path / "data")
    options = {"hosts": "a:slots=1,affinity=0;b:slots=1,affinity=1", "max_shards": "4", "data_dir": data_dir,
               "blocklist_expiry": str(BLOCKLIST_EXPIRY_S)}
    airflow = EmbeddedAirflow(str(tmp_path / "home"), str(dags), regionflow_options=options)
    airflow.start()
    hogs: list[subprocess.Popen] = []
    try:
        airflow.wait_for_dag(DAG_ID)
        airflow.unpause(DAG_ID)
        hogs = start_hogs(HOGS)
        run_id = airflow.trigger(DAG_ID)
        state = airflow.wait_for_run(DAG_ID, run_id, timeout=1200)
        stop_hogs(hogs)
        hogs = []
        store = RegionflowStore.from_config(f"sqlite:///{tmp_path / 'home' / 'regionflow.db'}")
        deadline = time.time() + 60  # a losing copy is killed within a watcher tick of the commit
        while any(c.is_open for c in store.copy_requests(DAG_ID, run_id)) and time.time() < deadline:
            time.sleep(1)
        attempts = store.attempts(DAG_ID, run_id)
        copies = store.copy_requests(DAG_ID, run_id)
        summary = "\n".join(f"{a.task_id}[{a.map_index}] {a.attempt_id} on {a.host}: {a.state} "
                            f"{a.duration_s and round(a.duration_s, 1)} s{' (copy)' if a.speculative else ''}"
                            for a in attempts) + "\n" + "\n".join(
            f"copy {c.request_id} {c.task_id}[{c.map_index}]: {c.state} {c.host} {c.message}" for c in copies)
        assert state == "success", summary + "\n" + airflow.log_tails()
        # a copy of a shard that ran on the slow host won; the copy ran on b; its original lost
        winners = {c.unit_key: c.winner_attempt for c in store.commits(DAG_ID, run_id)}
        won = [a for a in attempts if a.speculative and winners.get(a.unit_key) == a.attempt_id]

        def slow_host_original_lost(copy) -> bool:
            originals = [a for a in attempts if a.unit_key == copy.unit_key and not a.speculative]
            return bool(originals) and all(a.host == "a" and a.state in ("lost_commit", "killed", "failed")
                                           for a in originals)

        assert any(copy.host == "b" and slow_host_original_lost(copy) for copy in won), \
            "no copy on b beat a slow original on a:\n" + summary
        for copy in won:  # whoever won, its unit has no other winner
            assert [a for a in attempts if a.unit_key == copy.unit_key and a.state == "succeeded"] == [copy], summary
        assert all(c.state.value in ("won", "lost", "failed", "cancelled") for c in copies), summary
        # every unit has exactly one winner and the output equals the reference
        plan = Plan(load_dag_file_job(os.path.join(str(dags), "rf_speculation.py"), DAG_ID))
        layout = UnitLayout(plan, 4)
        partitions = PartitionStore(data_dir, run_key_for(DAG_ID, run_id))
        assert all(partitions.committed(key) is not None for key in layout.keys)
        figures = layout.sink_figures(partitions, data_dir)["totals"]
        assert (figures["rows"], figures["checksum"]) == (orders_reference["rows"], orders_reference["checksum"])
        files = sorted(name for name in os.listdir(figures["path"]) if not name.startswith(("_", ".")))
        assert files == [f"part-{subtask:05d}.parquet" for subtask in range(4)], files
        # the blocklist entry of the slow host expires
        job = job_id_for(DAG_ID, run_id)
        assert any(c.excluded_hosts and "a" in c.excluded_hosts for c in copies)
        deadline = time.time() + BLOCKLIST_EXPIRY_S + 10
        while store.active_blocks(job_id=job) and time.time() < deadline:
            time.sleep(1)
        assert store.active_blocks(job_id=job) == []
        print(summary)
    finally:
        stop_hogs(hogs)
        airflow.stop()
