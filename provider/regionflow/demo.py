"""The main job (`make demo`): the example DAG through a real, embedded Airflow.

Starts Airflow on SQLite (api-server, scheduler, dag-processor, triggerer on 127.0.0.1) with the
RegionExecutor and local Spark (one Spark Connect server per host; ``--backend submit``: none),
triggers ``orders_daily`` for two logical dates (``--dates``; a daily DAG: each run writes its own
``ds=`` partition), waits, prints each region task's state and timing and each run's sink partition with
its row count and checksum (compare each with ``regionflow run regionflow.examples.orders:daily
--reference --logical-date DATE``), and stops everything it started.

    python -m regionflow.demo [--home DIR] [--dags-folder dags] [--slots 3] [--reference-checksum HEX]
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from datetime import datetime

from .testing import EmbeddedAirflow
from .units.dags import dag_run_outputs

DAG_ID = "orders_daily"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m regionflow.demo")
    parser.add_argument("--home", default=os.path.abspath(".demo/airflow"))
    parser.add_argument("--dags-folder", default=os.path.abspath("dags"))
    parser.add_argument("--slots", type=int, default=3)
    parser.add_argument("--max-shards", type=int, default=1)
    parser.add_argument("--backend", choices=("session", "submit"), default="session",
                        help="[regionflow] backend: session starts one Spark Connect server per host with Airflow")
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--dates", nargs="+", default=["2026-01-01", "2026-01-02"],
                        help="the logical dates of the runs to trigger (default: 2026-01-01 2026-01-02)")
    args = parser.parse_args(argv)
    shutil.rmtree(args.home, ignore_errors=True)
    data_dir = os.path.join(args.home, "regionflow-data")
    options = {"hosts": f"localhost:slots={args.slots}", "max_shards": str(args.max_shards), "data_dir": data_dir,
               "backend": args.backend}
    # only the runs triggered here: no run of the daily schedule of its own when the DAG is unpaused
    stack = EmbeddedAirflow(args.home, args.dags_folder, regionflow_options=options,
                            extra_config={"scheduler": {"use_job_schedule": "False"}})
    started = time.monotonic()
    print(f"starting Airflow in {args.home} (RegionExecutor, {args.slots} slots, {args.backend} backend) ...",
          flush=True)
    with stack.start():
        print(f"Airflow is up at {stack.api_url} after {time.monotonic() - started:.0f} s", flush=True)
        print("components: " + ", ".join(f"{name} (pid {pid})" for name, pid in stack.components_running().items()),
              flush=True)
        stack.wait_for_dag(DAG_ID)
        stack.unpause(DAG_ID)
        runs = {stack.trigger(DAG_ID, logical_date=f"{day}T00:00:00+00:00"): day for day in args.dates}
        print(f"triggered {DAG_ID} runs {', '.join(runs)}; waiting ...", flush=True)
        states = {run_id: stack.wait_for_run(DAG_ID, run_id, timeout=args.timeout) for run_id in runs}
        for run_id, state in states.items():
            print(f"\nDAG run {run_id} (logical date {runs[run_id]}): {state}")
            print_task_instances(stack.task_instances(DAG_ID, run_id))
            if state == "success":
                print_sinks(os.path.join(args.dags_folder, f"{DAG_ID}.py"), data_dir, run_id, args.max_shards)
        state = "success" if all(s == "success" for s in states.values()) else "failed"
    print("stopped Airflow")
    return 0 if state == "success" else 1


def print_task_instances(task_instances: list[dict]) -> None:
    print(f"\n{'region task':<28} {'shard':>5} {'state':<10} {'start':<12} {'seconds':>8}")
    for ti in sorted(task_instances, key=lambda t: (t.get("start_date") or "", t["task_id"], t["map_index"])):
        start, end = _parse(ti.get("start_date")), _parse(ti.get("end_date"))
        seconds = f"{(end - start).total_seconds():.1f}" if start and end else "-"
        print(f"{ti['task_id']:<28} {max(ti['map_index'], 0):>5} {ti['state'] or '-':<10} "
              f"{start.strftime('%H:%M:%S') if start else '-':<12} {seconds:>8}")
    starts = [started for ti in task_instances if (started := _parse(ti.get("start_date")))]
    ends = [ended for ti in task_instances if (ended := _parse(ti.get("end_date")))]
    if starts and ends:
        print(f"region tasks, first start to last end: {(max(ends) - min(starts)).total_seconds():.1f} s")


def print_sinks(dag_file: str, data_dir: str, run_id: str, max_shards: int) -> None:
    layout, partitions = dag_run_outputs(dag_file, DAG_ID, run_id, data_dir, max_shards)
    for vertex, figures in layout.sink_figures(partitions, data_dir).items():
        print(f"sink {vertex}: {figures['rows']} rows, checksum {figures['checksum']:016x} at {figures['path']}")


def _parse(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value.replace("Z", "+00:00")) if value else None


if __name__ == "__main__":
    sys.exit(main())
