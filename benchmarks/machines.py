"""The example DAG on one machine and on two, and what losing a machine mid-run costs (issue 46).

Usage (root: the machines are Linux network namespaces, `regionflow.testing.machines`):
    .venv/bin/python benchmarks/machines.py [--repeats 3] [--format json]

Two setups, each its own embedded Airflow stack (scheduler, RegionExecutor, session backend) on this
machine (m1), whose Spark Connect servers' drivers bind m1's address on the namespaces' subnet:

  one   machine m2: a Spark standalone master and a worker of 1 core, pinned to core 0; host m2 (1 slot)
  two   machines m2 and m3: the same, m2 pinned to core 0 and m3 to core 1; hosts m2 and m3 (1 slot each)

Each setup runs the example job as a DAG (`orders_all_blocking` of tests/airflow/dags_e2e/rf_modes.py: orders
-> clean -> enrich -> totals, 4 region tasks per vertex at most) `--repeats` times, one run at a time; the
makespan is the DAG run's start to its end as Airflow records them. Then, in the two-machine setup, one more
run in which m3 is lost (every process of it killed, its link cut) as soon as an attempt runs there: its
makespan against the clean median is what the loss cost (the host watch's 30 s bound, the retries on m2).
Every run's sink (rows, checksum) must equal the first run's: the same answers everywhere.

This box has 2 cores; Airflow, the drivers and the task processes (m1) are not pinned and share them with the
executors, so the two-machine speed-up is bounded well below 2x here. Medians; the CPU probe's figures say how
noisy the box was.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from datetime import datetime
from typing import Any

from regionflow.spark.launch.submit import pinned_cpus
from regionflow.spark.servers.standalone import StandaloneCluster
from regionflow.store import RegionflowStore
from regionflow.testing import EmbeddedAirflow
from regionflow.testing.machines import Machines, unavailable
from regionflow.units.dags import dag_run_outputs
from rfbench.machine import cpu_unit_times

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DAG_FILE = os.path.join(ROOT, "tests", "airflow", "dags_e2e", "rf_modes.py")
DAG_ID = "orders_all_blocking"
MAX_SHARDS = 4


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--format", choices=("text", "json"), default="text")
    args = parser.parse_args()
    reason = unavailable()
    if reason is not None:
        print(f"machines: cannot make machines here: {reason}", file=sys.stderr)
        return 2
    work = tempfile.mkdtemp(prefix="rf-bench-machines-")
    try:
        one = run_setup(["m2"], args.repeats, os.path.join(work, "one"), lose=None)
        two = run_setup(["m2", "m3"], args.repeats, os.path.join(work, "two"), lose="m3")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    answers = {tuple(sink) for setup in (one, two) for sink in setup["sinks"]}
    result = {
        "one_machine_s": one["median_s"], "two_machines_s": two["median_s"],
        "speedup": round(one["median_s"] / two["median_s"], 3),
        "lost_machine_run_s": two["lost_s"], "lost_machine_cost_s": round(two["lost_s"] - two["median_s"], 1),
        "runs": {"one": one["makespans_s"], "two": two["makespans_s"]},
        "same_answers": len(answers) == 1, "cpu_unit_ms": round(statistics.median(cpu_unit_times()), 1),
    }
    if args.format == "json":
        print(json.dumps(result, indent=2))
    else:
        print(f"one machine (1 core):       median {one['median_s']:.1f} s of {one['makespans_s']}")
        print(f"two machines (1 core each): median {two['median_s']:.1f} s of {two['makespans_s']}")
        print(f"speed-up two/one:           {result['speedup']:.2f}x")
        print(f"a run losing m3 mid-run:    {two['lost_s']:.1f} s "
              f"(+{result['lost_machine_cost_s']:.1f} s over the median)")
        print(f"same answers in every run:  {result['same_answers']}  (cpu probe: {result['cpu_unit_ms']})")
    return 0 if result["same_answers"] else 1


def run_setup(names: list[str], repeats: int, home: str, lose: str | None) -> dict[str, Any]:
    """The makespans of `repeats` runs on machines `names`, and with `lose`, one more run losing it."""
    os.makedirs(os.path.join(home, "dags"))
    shutil.copy(DAG_FILE, os.path.join(home, "dags"))
    with Machines(names) as machines:
        clusters = []
        try:
            for core, name in enumerate(names):
                with pinned_cpus((core % os.cpu_count(),)):  # its daemons and executors inherit the core
                    clusters.append(StandaloneCluster(workers=1, cores_per_worker=1, memory_per_worker="1g",
                                                      work_dir=os.path.join(home, f"spark-{name}"),
                                                      address=machines[name].address,
                                                      netns=machines[name].namespace).start())
            hosts = ";".join(f"{name}:slots=1,mem=1g,{cluster.host_fields}"
                             for name, cluster in zip(names, clusters, strict=True))
            options = {"hosts": hosts, "max_shards": str(MAX_SHARDS), "data_dir": os.path.join(home, "data"),
                       "data_dir_shared": "true", "backend": "session", "bind_address": machines.address,
                       "blocklist_expiry": "600", "lost_host_probe_interval": "2"}
            retries = {"core": {"default_task_retries": "1", "default_task_retry_delay": "1"}}  # a lost try is retried
            with EmbeddedAirflow(home, os.path.join(home, "dags"), regionflow_options=options,
                                 extra_config=retries) as stack:
                stack.wait_for_dag(DAG_ID)
                stack.unpause(DAG_ID)
                makespans, sinks = [], []
                for _ in range(repeats):
                    seconds, sink = timed_run(stack)
                    makespans.append(seconds)
                    sinks.append(sink)
                    print(f"machines: {len(names)} machine(s): a run took {seconds:.1f} s", file=sys.stderr)
                lost_s = None
                if lose is not None:
                    lost_s, sink = timed_run(stack, lose=(machines, lose))
                    sinks.append(sink)
                    print(f"machines: the run losing {lose} took {lost_s:.1f} s", file=sys.stderr)
        finally:
            for cluster in clusters:
                cluster.stop()
    return {"makespans_s": [round(s, 1) for s in makespans], "median_s": round(statistics.median(makespans), 1),
            "lost_s": None if lost_s is None else round(lost_s, 1), "sinks": sinks}


def timed_run(stack: EmbeddedAirflow, lose: tuple[Machines, str] | None = None) -> tuple[float, tuple[int, str]]:
    run_id = stack.trigger(DAG_ID)
    if lose is not None:
        machines, name = lose
        store = RegionflowStore.from_config(f"sqlite:///{stack.home}/regionflow.db")
        deadline = time.monotonic() + 300
        while not any(a.state.value == "running" and a.host == name for a in store.attempts(DAG_ID, run_id)):
            if time.monotonic() > deadline:
                raise RuntimeError(f"no attempt ran on {name} within 300 s")
            time.sleep(0.2)
        machines.lose(name)
    state = stack.wait_for_run(DAG_ID, run_id, timeout=1200)
    if state != "success":
        raise RuntimeError(f"run {run_id} ended {state}")
    dag_run = stack.dag_run(DAG_ID, run_id)
    started, ended = (datetime.fromisoformat(dag_run[key]) for key in ("start_date", "end_date"))
    seconds = (ended - started).total_seconds()
    data_dir = stack.regionflow_options["data_dir"]
    layout, partitions = dag_run_outputs(os.path.join(stack.dags_folder, "rf_modes.py"), DAG_ID, run_id, data_dir,
                                         MAX_SHARDS)
    totals = layout.sink_figures(partitions, data_dir)["totals"]
    return seconds, (totals["rows"], totals["checksum"])


if __name__ == "__main__":
    sys.exit(main())
