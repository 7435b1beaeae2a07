"""Speculation on a really slow host: the example job with 8 shards on two hosts, one slowed down.

One embedded Airflow stack (RegionExecutor; hosts a and b with one slot each, pinned to cores 0
and 1) runs the example job (orders and clean with parallelism 8, so their region task has 8
shards) three times in the same invocation:

1. no slowdown, speculation off (the baseline);
2. host a slowed down, speculation off;
3. host a slowed down, speculation on (the detector's settings are printed).

"Slowed down" is real CPU contention, not a sleep in the job: CPU hogs pinned to core 0 in their
own sessions (`regionflow.testing.slow_host.CpuHogs`), from the trigger to the end of the run
(``--slowdown whole-run``) or until every shard of the 8-shard region task has committed
(``--slowdown first-region``: a host that is slow for a while, the long tail speculation is for).
Printed per run: its makespan (DAG run start to end), the span of the sharded task (first shard
attempt's start to last end), the run's copies (requested, won) and the sink checksum, which must be
equal in every run. With ``--repeats N`` the three runs are repeated N times on the same stack and a
summary gives the median makespans and their ratios to the no-slowdown median, and
``one_fast_host_bound_s``: the no-slowdown makespan plus its sharded span, an estimate of the best
makespan any scheduler can reach when host a does nothing useful during the sharded task (host b then
runs all 8 shards, twice the clean span).

Usage: .venv/bin/python benchmarks/speculation.py [--repeats 3] [--slowdown whole-run|first-region] [--hogs 4]
       [--nice 0] [--quantile 0.75] [--multiplier 1.5] [--min-runtime 10] [--blocklist-expiry 300]

With the whole run slowed, host a does about a fifth of its work (4 hogs at nice 0), so the cluster
has 1.2 hosts' worth of CPU instead of 2: no scheduler can finish CPU-bound work in less than about
2 / 1.2 = 1.67x the no-slowdown makespan.

`--blocklist-expiry` defaults to 300 s with ``--slowdown whole-run`` (the host stays slow for the whole
run, and an operator who knows that sets the expiry to cover it) and to the product's 60 s with
``--slowdown first-region`` (a longer entry would keep the recovered host idle: 300 s there made
speculation on slower than off, 1.81x against 1.47x).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import threading
import time
from datetime import datetime

from regionflow.store import RegionflowStore
from regionflow.testing import EmbeddedAirflow
from regionflow.testing.slow_host import CpuHogs
from regionflow.units.dags import dag_run_outputs

SHARDS = 8
SHARDED_TASK = "orders__clean"  # the region task with SHARDS shards
DAG_SOURCE = '''
from datetime import datetime
from airflow.sdk import DAG
import regionflow
from regionflow.examples import orders as job
from regionflow.operators import SparkVertexOperator, broadcast, forward, hash_by, rescale

def example(dag_id, speculation):
    with DAG(dag_id, schedule=None, start_date=datetime(2026, 1, 1), catchup=False, max_active_tasks=32) as dag:
        orders = SparkVertexOperator(task_id="orders", parallelism={shards}, fn=job.generate_orders)
        products = SparkVertexOperator(task_id="products", parallelism=1, fn=job.generate_products)
        clean = SparkVertexOperator(task_id="clean", parallelism={shards}, fn=job.clean_orders)
        enrich = SparkVertexOperator(task_id="enrich", parallelism=2, fn=job.enrich_orders)
        totals = SparkVertexOperator(task_id="totals", parallelism=4, fn=job.total_by_customer,
                                     sink="bench/" + dag_id + "/totals")
        orders >> forward() >> clean >> rescale() >> enrich >> hash_by("customer_id") >> totals
        products >> broadcast() >> enrich
    regionflow.transform(dag, mode="forward-pipelined-only", max_shards={shards}, speculation=speculation,
                         speculation_config={speculation_config!r})
    return dag

speculation_off = example("speculation_off", False)
speculation_on = example("speculation_on", True)
'''


def main() -> None:
    args = parse_args()
    root = tempfile.mkdtemp(prefix="rf-bench-speculation-")
    speculation_config = {"quantile": args.quantile, "multiplier": args.multiplier, "min_runtime": args.min_runtime,
                          "interval": 1}
    stack = stack_for(root, speculation_config, args.blocklist_expiry, args.backend)
    runs = (("no_slowdown", "speculation_off", False), ("slow_host_speculation_off", "speculation_off", True),
            ("slow_host_speculation_on", "speculation_on", True))
    print(json.dumps({"hosts": "a:slots=1,affinity=0;b:slots=1,affinity=1", "shards": SHARDS,
                      "hogs": {"count": args.hogs, "nice": args.nice, "cores": [0], "slowdown": args.slowdown},
                      "speculation": speculation_config, "blocklist_expiry_s": args.blocklist_expiry,
                      "backend": args.backend}), flush=True)
    measured: dict[str, list[dict]] = {name: [] for name, _, _ in runs}
    with stack.start():
        for dag_id in ("speculation_off", "speculation_on"):
            stack.wait_for_dag(dag_id)
            stack.unpause(dag_id)
        for repeat in range(args.repeats):
            for name, dag_id, slow in runs:
                hogs = CpuHogs([0], count=args.hogs, nice=args.nice) if slow else None
                figures = measure(stack, dag_id, hogs, args.slowdown)
                measured[name].append(figures)
                print(json.dumps({"repeat": repeat + 1, name: figures}), flush=True)
    print(json.dumps(summary(measured), indent=2))


def summary(measured: dict[str, list[dict]]) -> dict:
    """Medians per run kind, their ratios to the no-slowdown median, and the one-fast-host bound:
    the no-slowdown makespan plus its sharded span (host a useless while the sharded task runs: host b
    runs all of its shards, twice its clean span, and nothing else of the run gets faster)."""
    result: dict = {}
    clean = statistics.median(f["makespan_s"] for f in measured["no_slowdown"])
    for name, runs in measured.items():
        makespan = statistics.median(f["makespan_s"] for f in runs)
        result[name] = {"makespans_s": [f["makespan_s"] for f in runs], "median_makespan_s": makespan,
                        "median_ratio_to_no_slowdown": round(makespan / clean, 2),
                        "sharded_task_spans_s": [f["sharded_task_span_s"] for f in runs],
                        "copies_requested": sum(f["copies_requested"] for f in runs),
                        "copies_won": sum(f["copies_won"] for f in runs)}
    spans = [f["sharded_task_span_s"] for f in measured["no_slowdown"] if f["sharded_task_span_s"]]
    if spans:
        bound = clean + statistics.median(spans)
        result["one_fast_host_bound_s"] = round(bound, 1)
        result["one_fast_host_bound_ratio"] = round(bound / clean, 2)
    checksums = {f["checksum"] for runs in measured.values() for f in runs}
    result["same_checksum_in_every_run"] = len(checksums) == 1
    return result


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--slowdown", choices=("whole-run", "first-region"), default="whole-run")
    parser.add_argument("--hogs", type=int, default=4, help="CPU hogs on core 0 (host a)")
    parser.add_argument("--nice", type=int, default=0, help="the hogs' nice (negative needs root)")
    parser.add_argument("--quantile", type=float, default=0.75)
    parser.add_argument("--multiplier", type=float, default=1.5)
    parser.add_argument("--min-runtime", type=float, default=10.0)
    parser.add_argument("--repeats", type=int, default=1, help="rounds of the three runs; medians are printed")
    parser.add_argument("--backend", choices=("session", "submit"), default="session",
                        help="[regionflow] backend of the region tasks and the copies")
    parser.add_argument("--blocklist-expiry", type=float, default=None,
                        help="seconds; default 300 for whole-run, 60 for first-region")
    args = parser.parse_args()
    if args.blocklist_expiry is None:
        args.blocklist_expiry = 300.0 if args.slowdown == "whole-run" else 60.0
    return args


def stack_for(root: str, speculation_config: dict, blocklist_expiry: float, backend: str) -> EmbeddedAirflow:
    home = os.path.join(root, "home")
    dags = os.path.join(root, "dags")
    os.makedirs(dags)
    with open(os.path.join(dags, "speculation_bench.py"), "w", encoding="utf-8") as handle:
        handle.write(DAG_SOURCE.format(shards=SHARDS, speculation_config=speculation_config))
    options = {"hosts": "a:slots=1,affinity=0;b:slots=1,affinity=1", "data_dir": os.path.join(root, "data"),
               "blocklist_expiry": str(blocklist_expiry), "backend": backend}
    return EmbeddedAirflow(home, dags, regionflow_options=options)


def measure(stack: EmbeddedAirflow, dag_id: str, hogs: CpuHogs | None, slowdown: str) -> dict:
    store = RegionflowStore.from_config(f"sqlite:///{os.path.join(stack.home, 'regionflow.db')}")
    stopped = threading.Event()
    try:
        if hogs:
            hogs.start()
        run_id = stack.trigger(dag_id)
        if hogs and slowdown == "first-region":
            threading.Thread(target=stop_when_sharded_task_done, args=(store, dag_id, run_id, hogs, stopped),
                             daemon=True).start()
        state = stack.wait_for_run(dag_id, run_id, timeout=3600)
    finally:
        stopped.set()
        if hogs:
            hogs.stop()
    run = stack.dag_run(dag_id, run_id)
    makespan = (_at(run["end_date"]) - _at(run["start_date"])).total_seconds()
    _wait_for_copies_to_close(store, dag_id, run_id)
    copies = store.copy_requests(dag_id, run_id)
    attempts = store.attempts(dag_id, run_id)
    sharded = [a for a in attempts if a.task_id == SHARDED_TASK and a.ended_at is not None]
    return {"state": state, "makespan_s": round(makespan, 1),
            "sharded_task_span_s": round(max(a.ended_at for a in sharded) - min(a.started_at for a in sharded), 1)
            if sharded else None,
            "submissions": len(attempts),
            "attempts_on_a": sum(1 for a in attempts if a.host == "a"),
            "copies_requested": len(copies),
            "copies_won": sum(1 for c in copies if c.state.value == "won"),
            "checksum": sink_checksum(stack, dag_id, run_id)}


def stop_when_sharded_task_done(store: RegionflowStore, dag_id: str, run_id: str, hogs: CpuHogs,
                                stopped: threading.Event) -> None:
    while not stopped.wait(1):
        done = {a.map_index for a in store.attempts(dag_id, run_id, SHARDED_TASK) if a.state == "succeeded"}
        if len(done) == SHARDS:
            break
    hogs.stop()


def _wait_for_copies_to_close(store: RegionflowStore, dag_id: str, run_id: str, timeout: float = 60) -> None:
    deadline = time.time() + timeout
    while any(c.is_open for c in store.copy_requests(dag_id, run_id)) and time.time() < deadline:
        time.sleep(1)


def sink_checksum(stack: EmbeddedAirflow, dag_id: str, run_id: str) -> str | None:
    data_dir = stack.regionflow_options["data_dir"]
    layout, partitions = dag_run_outputs(os.path.join(stack.dags_folder, "speculation_bench.py"), dag_id, run_id,
                                         data_dir, SHARDS)
    figures = layout.sink_figures(partitions, data_dir)["totals"]
    return f"{figures['rows']} rows, {figures['checksum']}"


def _at(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


if __name__ == "__main__":
    main()
