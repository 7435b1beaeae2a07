"""Soak: DAG runs arriving continuously for a long time, the scheduler killed and restarted on a timer.

One embedded Airflow stack (SQLite, the RegionExecutor, the session backend on one local host) runs a
small all-blocking regionflow DAG (`soak_orders`: the example job, parallelism 2, four blocking
edges, so every run writes and releases partitions). A new run is triggered every
``--interval`` seconds for ``--duration`` seconds; every ``--restart-every`` seconds the scheduler is
killed (``--restart-mode kill``: kill -9, the next one adopts its grants and task instances) or stopped
(``term``: SIGTERM) and a new one started. Then it waits for every run to end.

Printed (text, or --format json):

- runs triggered, succeeded, failed; scheduler restarts; gate runs (``--max-shards 2``);
- queue wait per grant (from the store: granted_at - submitted_at), p50 and p99;
- the data dir's largest size while it ran and its size at the end, and the blocking partitions left
  on disk (with ``partition_retention = 0`` every one is deleted once its consumers committed);
- leaked slots: live grants once every run has ended (must be 0), and attempts still recorded as
  running then (must be 0).

Usage: .venv/bin/python benchmarks/soak.py [--duration 3600] [--interval 20] [--restart-every 600]
       [--restart-mode kill|term] [--slots 2] [--retention 0] [--max-shards 1] [--format text|json]

With ``--max-shards 2`` every region task has two shards, and `clean` and `enrich` (FORWARD and RESCALE,
blocking) wait per shard for the partitions they read (per-partition-group readiness): ``gate_runs``
counts the tries that ran without slots and deferred first.

The issue's setting is the default (1 hour, a restart every 10 min); a short look:
``--duration 300 --restart-every 100``.
"""
from __future__ import annotations

import argparse
import json
import os
import tempfile
import textwrap
import threading
import time
from typing import Any

from regionflow.contract import is_inputs_gate
from regionflow.spark.data.filesystems import LocalFileSystem
from regionflow.store import RegionflowStore
from regionflow.testing import EmbeddedAirflow

DAG_ID = "soak_orders"
DAG_SOURCE = textwrap.dedent('''
    from datetime import datetime, timedelta

    from airflow.sdk import DAG

    import regionflow
    from regionflow.examples import orders as job
    from regionflow.operators import SparkVertexOperator, broadcast, forward, hash_by, rescale

    with DAG("soak_orders", schedule=None, start_date=datetime(2026, 1, 1), catchup=False, max_active_runs=64,
             default_args={"retries": 2, "retry_delay": timedelta(seconds=2)}) as dag:
        orders = SparkVertexOperator(task_id="orders", parallelism=2, fn=job.generate_orders)
        products = SparkVertexOperator(task_id="products", parallelism=1, fn=job.generate_products)
        clean = SparkVertexOperator(task_id="clean", parallelism=2, fn=job.clean_orders)
        enrich = SparkVertexOperator(task_id="enrich", parallelism=2, fn=job.enrich_orders)
        totals = SparkVertexOperator(task_id="totals", parallelism=2, fn=job.total_by_customer,
                                     sink="soak/totals")
        orders >> forward() >> clean >> rescale() >> enrich >> hash_by("customer_id") >> totals
        products >> broadcast() >> enrich
    regionflow.transform(dag, mode="all-blocking")
''')
TERMINAL = ("success", "failed")


def percentile(values: list[float], q: float) -> float | None:
    """The q-quantile (0..1) of `values` by nearest rank, or None when there are none."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def partitions_left(data_dir: str) -> int:
    """Blocking partition datasets (``e<edge>`` directories of committed units) still on disk."""
    count = 0
    for folder, dirs, _ in os.walk(data_dir):
        if os.path.basename(os.path.dirname(folder)) == "units":
            count += sum(1 for name in dirs if name.startswith("e") and name[1:].isdigit())
    return count


class DiskWatch(threading.Thread):
    """Samples the data dir's size every `period` seconds; `largest` is the maximum seen."""

    def __init__(self, path: str, period: float = 5.0) -> None:
        super().__init__(daemon=True)
        self.path, self.period, self.largest = path, period, 0
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.wait(self.period):
            self.largest = max(self.largest, LocalFileSystem().size(self.path))

    def stop(self) -> None:
        self._done.set()
        self.join()
        self.largest = max(self.largest, LocalFileSystem().size(self.path))


def soak(args: argparse.Namespace) -> dict[str, Any]:
    """Run the soak and return its figures."""
    root = tempfile.mkdtemp(prefix="rf-soak-")
    dags, data = os.path.join(root, "dags"), os.path.join(root, "data")
    os.makedirs(dags)
    with open(os.path.join(dags, "soak_orders.py"), "w", encoding="utf-8") as handle:
        handle.write(DAG_SOURCE)
    options = {"hosts": f"localhost:slots={args.slots}", "data_dir": data, "backend": "session",
               "partition_retention": str(args.retention), "max_shards": str(args.max_shards)}
    with EmbeddedAirflow(os.path.join(root, "home"), dags, regionflow_options=options) as stack:
        stack.wait_for_dag(DAG_ID, timeout=300)
        stack.unpause(DAG_ID)
        store = RegionflowStore.from_config(f"sqlite:///{stack.home}/regionflow.db")
        disk = DiskWatch(data)
        disk.start()
        run_ids: list[str] = []
        restarts = 0
        began = time.monotonic()
        next_run = next_restart = began
        next_restart += args.restart_every
        while time.monotonic() - began < args.duration:
            now = time.monotonic()
            if now >= next_run:
                run_ids.append(stack.trigger(DAG_ID))
                next_run += args.interval
            if now >= next_restart:
                restart(stack, args.restart_mode)
                restarts += 1
                next_restart += args.restart_every
            time.sleep(0.5)
        states = {run_id: stack.wait_for_run(DAG_ID, run_id, timeout=args.drain_timeout) for run_id in run_ids}
        time.sleep(10)  # the last releases reach the store at the executor's next sync
        disk.stop()
        grants = store.grants(DAG_ID)
        waits = [g.granted_at - g.submitted_at for g in grants if g.granted_at is not None]
        return {
            "duration_s": args.duration, "interval_s": args.interval, "restart_every_s": args.restart_every,
            "restart_mode": args.restart_mode, "slots": args.slots, "partition_retention_s": args.retention,
            "max_shards": args.max_shards,
            "runs_triggered": len(run_ids),
            "runs_succeeded": sum(1 for state in states.values() if state == "success"),
            "runs_failed": sum(1 for state in states.values() if state == "failed"),
            "scheduler_restarts": restarts,
            "grants": len(grants),
            "gate_runs": sum(1 for g in grants if is_inputs_gate(g.message)),
            "queue_wait_p50_s": _round(percentile(waits, 0.5)),
            "queue_wait_p99_s": _round(percentile(waits, 0.99)),
            "data_dir_max_mib": round(disk.largest / 2**20, 2),
            "data_dir_end_mib": round(LocalFileSystem().size(data) / 2**20, 2),
            "partitions_left": partitions_left(data),
            "leaked_slots": sum(len(g.slots) for g in store.live_grants()),
            "attempts_left_running": sum(1 for run_id in run_ids for attempt in store.attempts(DAG_ID, run_id)
                                         if attempt.state.value == "running"),
        }


def restart(stack: EmbeddedAirflow, mode: str) -> None:
    """Kill -9 (mode kill) or stop (term) the scheduler, then start a new one."""
    if mode == "kill":
        stack.kill("scheduler")
        stack.revive("scheduler")
    else:
        stack.restart("scheduler")


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=3600.0, help="seconds during which runs arrive")
    parser.add_argument("--interval", type=float, default=20.0, help="seconds between two runs")
    parser.add_argument("--restart-every", type=float, default=600.0, help="seconds between scheduler restarts")
    parser.add_argument("--restart-mode", choices=("kill", "term"), default="kill")
    parser.add_argument("--slots", type=int, default=2)
    parser.add_argument("--max-shards", type=int, default=1,
                        help="[regionflow] max_shards: with 2, clean and enrich wait per shard for their inputs")
    parser.add_argument("--retention", type=float, default=0.0, help="[regionflow] partition_retention")
    parser.add_argument("--drain-timeout", type=float, default=1800.0, help="seconds to wait for the last runs")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    args = parser.parse_args()
    figures = soak(args)
    if args.format == "json":
        print(json.dumps(figures, indent=2))
    else:
        width = max(len(key) for key in figures)
        print("\n".join(f"{key:<{width}}  {value}" for key, value in figures.items()))
    if figures["leaked_slots"]:
        raise SystemExit(f"{figures['leaked_slots']} slot(s) leaked")


if __name__ == "__main__":
    main()
