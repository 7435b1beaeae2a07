"""RegionExecutor against Airflow's LocalExecutor and Airflow pools, on real embedded stacks.

1. Overhead: a DAG of many small independent regions (one slot each) runs under the RegionExecutor
   and under LocalExecutor. Printed: median seconds from a task instance being queued to its Spark
   submission starting (RegionExecutor; from regionflow's attempt records) and to running (both).
2. Starvation: a 4-slot job queued behind a stream of 1-slot tasks on 4 slots. Under Airflow pools
   (LocalExecutor, a 4-slot pool, pool_slots=4 for the big task) versus the RegionExecutor's FIFO bulk
   pool: when the big task started relative to the stream's last task.
3. Throughput (issue 47's scheduling overhead): a DAG of --tasks (200) tiny independent tasks (a Python no-op,
   no Spark: what is measured is Airflow's scheduler and the executor) on --slots slots, under the
   RegionExecutor (each task a 1-slot bulk) and under LocalExecutor with an Airflow pool of --slots slots, in
   alternation, --repeats times. Printed: tasks per second from the first task's start to the last one's end
   (median over repeats) and the RegionExecutor's ratio to LocalExecutor's (target >= 0.9).

Usage: .venv/bin/python benchmarks/airflow_executor.py [--regions 4] [--slots 4] [--tasks 200] [--repeats 1]
                                                       [--only overhead|starvation|throughput]

With --regions <= --slots no region waits for slots, so queued-to-running is the executor's own
overhead; with more regions than slots it also contains the wait for a grant.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import textwrap
import time
from datetime import datetime

from regionflow.store import RegionflowStore
from regionflow.testing import EmbeddedAirflow

SMALL = '''
from datetime import datetime
from airflow.sdk import DAG
import regionflow
from regionflow.examples import orders as job
from regionflow.operators import SparkVertexOperator

with DAG("small_regions", schedule=None, start_date=datetime(2026, 1, 1), catchup=False, max_active_tasks=64) as dag:
    SparkVertexOperator(task_id="products", parallelism={regions}, fn=job.generate_products, sink="bench/products")
regionflow.transform(dag, mode="all-blocking", max_shards={regions})
'''

STARVATION = '''
import time
from datetime import datetime


def pause(seconds):
    time.sleep(seconds)

from airflow.providers.standard.operators.python import PythonOperator
from airflow.sdk import DAG, cross_downstream

with DAG("stream", schedule=None, start_date=datetime(2026, 1, 1), catchup=False, max_active_tasks=64) as stream:
    previous = None
    for wave in range(6):
        tasks = [PythonOperator(task_id=f"w{{wave}}_{{i}}", python_callable=pause, op_args=[3], pool="{pool}")
                 for i in range({slots})]
        if previous:
            cross_downstream(previous, tasks)
        previous = tasks

with DAG("big", schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as big:
    PythonOperator(task_id="big", python_callable=pause, op_args=[3], pool="{pool}", pool_slots={slots},
                   executor_config={{"regionflow": {{"requests": [[{{"unknown": True}}] * {slots}],
                                                     "labels": ["big"]}}}})
'''

TINY = '''
from datetime import datetime

from airflow.providers.standard.operators.python import PythonOperator
from airflow.sdk import DAG


def nothing():
    return None


with DAG("tiny_tasks", schedule=None, start_date=datetime(2026, 1, 1), catchup=False, max_active_tasks={tasks}):
    for index in range({tasks}):
        PythonOperator(task_id=f"t{{index}}", python_callable=nothing, pool="{pool}")
'''
THROUGHPUT_TARGET = 0.9


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--regions", type=int, default=4)
    parser.add_argument("--slots", type=int, default=4)
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--only", choices=("overhead", "starvation", "throughput"), default=None)
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix="rf-bench-airflow-")
    runs = {
        ("starvation", "airflow_pools"): lambda: starvation(root, "LocalExecutor", args, pool="four"),
        ("starvation", "region_executor"): lambda: starvation(root, "regionflow.executors.RegionExecutor", args,
                                                              pool="default_pool"),
        ("overhead", "region_executor"): lambda: overhead(root, "regionflow.executors.RegionExecutor", args),
        ("overhead", "local_executor"): lambda: overhead(root, "LocalExecutor", args),
        ("throughput", "both"): lambda: throughput(root, args),
    }
    result: dict = {}
    for (part, name), measure in runs.items():
        if args.only and part != args.only:
            continue
        result.setdefault(part, {})[name] = measure()
        print(json.dumps({part: {name: result[part][name]}}), file=sys.stderr, flush=True)  # progress: each figure
    print(json.dumps(result, indent=2))


def stack_for(root: str, name: str, executor: str, dag_source: str, slots: int) -> EmbeddedAirflow:
    home = os.path.join(root, name)
    dags = os.path.join(home, "dags")
    os.makedirs(dags)
    with open(os.path.join(dags, f"{name}.py"), "w", encoding="utf-8") as handle:
        handle.write(textwrap.dedent(dag_source))
    return EmbeddedAirflow(home, dags, executor=executor, parallelism=max(32, slots),
                           regionflow_options={"hosts": f"localhost:slots={slots}",
                                               "data_dir": os.path.join(home, "data"),
                                               "backend": "submit"})  # no region task here: no Spark servers


def overhead(root: str, executor: str, args) -> dict:
    name = "overhead_" + executor.rsplit(".", 1)[-1]
    stack = stack_for(root, name, executor, SMALL.format(regions=args.regions), args.slots)
    with stack.start():
        stack.wait_for_dag("small_regions")
        stack.unpause("small_regions")
        run_id = stack.trigger("small_regions")
        state = stack.wait_for_run("small_regions", run_id, timeout=1800)
        tis = stack.task_instances("small_regions", run_id)
    queued_to_running = [(_at(t["start_date"]) - _at(t["queued_when"])).total_seconds() for t in tis
                         if t.get("queued_when") and t.get("start_date")]
    figures = {"state": state, "task_instances": len(tis),
               "median_queued_to_running_s": _median(queued_to_running)}
    if "RegionExecutor" in executor:
        store = RegionflowStore.from_config(f"sqlite:///{os.path.join(stack.home, 'regionflow.db')}")
        queued = {(t["task_id"], t["map_index"]): _at(t["queued_when"]).timestamp()
                  for t in tis if t.get("queued_when")}
        starts = [a.started_at - queued[(a.task_id, a.map_index)] for a in store.attempts("small_regions", run_id)
                  if (a.task_id, a.map_index) in queued]
        figures["median_queued_to_submission_s"] = _median(starts)
        figures["note"] = "queued to submission includes waiting for a free slot (more regions than slots)"
    return figures


def starvation(root: str, executor: str, args, pool: str) -> dict:
    name = "starvation_" + executor.rsplit(".", 1)[-1]
    stack = stack_for(root, name, executor, STARVATION.format(pool=pool, slots=args.slots), args.slots)
    with stack.start():
        if pool != "default_pool":
            stack.create_pool(pool, args.slots)
        for dag_id in ("stream", "big"):
            stack.wait_for_dag(dag_id)
            stack.unpause(dag_id)
        stream_run = stack.trigger("stream")
        time.sleep(5)  # the first wave is running
        big_run = stack.trigger("big")
        stack.wait_for_run("big", big_run, timeout=900)
        stack.wait_for_run("stream", stream_run, timeout=900)
        stream_tis = stack.task_instances("stream", stream_run)
        (big_ti,) = stack.task_instances("big", big_run)
    stream_start = min(_at(t["start_date"]) for t in stream_tis)
    stream_end = max(_at(t["end_date"]) for t in stream_tis)
    big_start = _at(big_ti["start_date"])
    return {"big_started_after_stream_start_s": round((big_start - stream_start).total_seconds(), 1),
            "stream_duration_s": round((stream_end - stream_start).total_seconds(), 1),
            "big_started_before_stream_ended": big_start < stream_end}


def throughput(root: str, args) -> dict:
    """Tasks per second through the scheduler, RegionExecutor against LocalExecutor, alternating."""
    executors = {"region_executor": ("regionflow.executors.RegionExecutor", "default_pool"),
                 "local_executor": ("LocalExecutor", "slots")}
    rates: dict[str, list[float]] = {name: [] for name in executors}
    for repeat in range(args.repeats):
        order = list(executors) if repeat % 2 == 0 else list(reversed(executors))
        for name in order:
            executor, pool = executors[name]
            stack = stack_for(root, f"throughput_{name}_{repeat}", executor,
                              TINY.format(tasks=args.tasks, pool=pool), args.slots)
            with stack.start():
                if pool != "default_pool":
                    stack.create_pool(pool, args.slots)
                stack.wait_for_dag("tiny_tasks")
                stack.unpause("tiny_tasks")
                run_id = stack.trigger("tiny_tasks")
                state = stack.wait_for_run("tiny_tasks", run_id, timeout=3600)
                tis = stack.task_instances("tiny_tasks", run_id)
            done = [t for t in tis if t.get("start_date") and t.get("end_date")]
            if state != "success" or len(done) != args.tasks:
                raise SystemExit(f"throughput under {name}: run {state}, {len(done)} of {args.tasks} tasks ran")
            span = (max(_at(t["end_date"]) for t in done) - min(_at(t["start_date"]) for t in done)).total_seconds()
            rates[name].append(round(args.tasks / span, 2))
            print(json.dumps({"throughput": {name: {"repeat": repeat, "tasks_per_s": rates[name][-1],
                                                    "seconds": round(span, 1)}}}), file=sys.stderr, flush=True)
    medians = {name: statistics.median(values) for name, values in rates.items()}
    ratio = round(medians["region_executor"] / medians["local_executor"], 3)
    return {"tasks": args.tasks, "slots": args.slots, "repeats": args.repeats, "tasks_per_s": rates,
            "median_tasks_per_s": medians, "ratio_region_over_local": ratio,
            "target": {"ratio_at_least": THROUGHPUT_TARGET, "met": ratio >= THROUGHPUT_TARGET}}


def _at(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 2) if values else None


if __name__ == "__main__":
    main()
