"""A per-run decision against fixed parallelism (issue 50): the example's orders hashed by customer to a count
per customer, the consumer fixed at 1 or at 8 subtasks, or adaptive ``[1, 8]`` with a byte target, decided for
the run from the bytes its producers wrote (`core.run_decision.for_run`, what the decision task runs) and cut
into as many shards. Input sizes 1x, 10x and 100x of ``--orders``.

Each size runs in a process of its own (the example reads its order count when first imported). There the
three jobs run in turn on one shared Spark Connect server, ``--repeats`` rounds after a warm-up round, through
`LocalRunner` with ``max_shards`` 8, each shard its own Spark job as in Airflow (Airflow's own per-task
overhead, a second or so per task instance and one more task for the decision, is not in these figures: it
would add most to fixed 8). The adaptive job is decided inside its run, as `regionflow run` does it
(`units.per_run`: once its producers have committed, from their bytes), so its makespan includes the decision;
the decision is also timed on its own. Figures are medians; the ratio is the decided makespan over the better
fixed one, round by round.

The producers of the adaptive job sort their key groups unless the job's last run was decided as one shard
(`spark.data.history`). "decided" is a run of a recurring job (the round before, or the warm-up, was its last
run); "decided, first run" has that history removed first, as a job's first run has none.

Usage: .venv/bin/python benchmarks/per_run_decision.py [--orders 20000] [--scales 1,10,100] [--repeats 3]
       [--slots 2] [--target-kib 16384]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

MAX_SHARDS = 8
JOBS = {"fixed 1": "rfbench.per_run_jobs:fixed_1", "fixed 8": "rfbench.per_run_jobs:fixed_8",
        "decided": "rfbench.per_run_jobs:adaptive", "decided, first run": "rfbench.per_run_jobs:adaptive"}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--orders", type=int, default=20_000)
    parser.add_argument("--scales", default="1,10,100")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--slots", type=int, default=2)
    parser.add_argument("--target-kib", type=int, default=16384)  # Flink's default: 16 MiB
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # one size, in this process
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one_size(args)))
        return
    from rfbench.machine import cpu_unit_times

    sizes = []
    for scale in (int(s) for s in args.scales.split(",")):
        command = [sys.executable, __file__, "--one", "--orders", str(args.orders * scale), "--repeats",
                   str(args.repeats), "--slots", str(args.slots), "--target-kib", str(args.target_kib)]
        print(f"scale {scale}x: {args.orders * scale} orders ...", file=sys.stderr, flush=True)
        done = subprocess.run(command, check=True, stdout=subprocess.PIPE, text=True)
        sizes.append({"scale": scale, **json.loads(done.stdout.strip().splitlines()[-1])})
    result = {"slots": args.slots, "max_shards": MAX_SHARDS, "target_bytes_per_subtask": args.target_kib << 10,
              "repeats": args.repeats, "cpu_unit_ms": round(statistics.median(cpu_unit_times()), 1), "sizes": sizes,
              "within_1_2x_of_the_better_fixed_everywhere": all(s["ratio_to_better_fixed"] <= 1.2 for s in sizes)}
    print(json.dumps(result, indent=2))


def one_size(args: argparse.Namespace) -> dict:
    os.environ["REGIONFLOW_ORDERS_COUNT"] = str(args.orders)  # read by the example when first imported
    from rfbench.per_run_jobs import TARGET_ENV

    os.environ[TARGET_ENV] = str(args.target_kib << 10)
    from regionflow.core.adaptive import decided_plan
    from regionflow.core.graph import load_job
    from regionflow.core.plan import Plan
    from regionflow.core.run_decision import for_run
    from regionflow.scheduling.hosts import Cluster
    from regionflow.spark.data.history import HISTORY
    from regionflow.spark.servers.session_servers import SessionServers
    from regionflow.units.runner import LocalRunner, RunOptions

    data_dir = tempfile.mkdtemp(prefix="rf-bench-per-run-")
    cluster = Cluster.local_default(args.slots)
    servers = SessionServers(cluster, os.path.join(data_dir, "sessions"), base_port=None)
    servers.start()

    def run(job: str, plan: Plan, run_id: str) -> tuple[LocalRunner, float, dict]:
        options = RunOptions(data_dir=data_dir, cluster=cluster, max_shards=MAX_SHARDS, progress=None,
                             servers=servers, keep_partitions=True, run_id=run_id)
        runner = LocalRunner(job, plan, options)
        summary = runner.run()
        return runner, summary.makespan, summary.sinks["per_customer"]

    try:
        planned = decided_plan(load_job(JOBS["decided"]), args.slots, "all-blocking")
        first, _, _ = run(JOBS["decided"], planned, "bytes")  # the producers' partitions the decision reads
        started = time.monotonic()
        input_bytes = first.layout.region_input_bytes(1, first.store)
        decision = for_run(planned, 1, MAX_SHARDS, cluster.total_slots, args.slots, input_bytes)
        deciding = time.monotonic() - started
        if first.store.decisions()["per_customer"]["values"] != decision.values:
            raise SystemExit(f"the run decided {first.store.decisions()} where the rule gives {decision.values}")
        plans = {"fixed 1": Plan(load_job(JOBS["fixed 1"]), "all-blocking"),
                 "fixed 8": Plan(load_job(JOBS["fixed 8"]), "all-blocking"), "decided": planned,
                 "decided, first run": planned}
        times: dict[str, list[float]] = {kind: [] for kind in JOBS}
        ratios: dict[str, list[float]] = {"decided": [], "decided, first run": []}
        rows = {}
        for repeat in range(args.repeats + 1):  # the first round warms the server up and is not counted
            round_times = {}
            for kind, job in JOBS.items():
                if kind == "decided, first run":
                    shutil.rmtree(os.path.join(data_dir, HISTORY), ignore_errors=True)
                _, seconds, sink = run(job, plans[kind], f"{kind.replace(' ', '-').replace(',', '')}-{repeat}")
                round_times[kind] = seconds
                rows[kind] = (sink["rows"], sink["checksum"])
            if repeat:
                for kind, seconds in round_times.items():
                    times[kind].append(seconds)
                for kind, kept in ratios.items():
                    kept.append(round_times[kind] / min(round_times["fixed 1"], round_times["fixed 8"]))
    finally:
        servers.stop()
    return {"orders": args.orders, "input_bytes": input_bytes, "decided_parallelism": decision.values["per_customer"],
            "decided_shards": decision.shards, "decision_s": round(deciding, 3),
            "makespan_s": {kind: round(statistics.median(values), 2) for kind, values in times.items()},
            "ratio_to_better_fixed": round(statistics.median(ratios["decided"]), 3),
            "first_run_ratio_to_better_fixed": round(statistics.median(ratios["decided, first run"]), 3),
            "same_rows": len(set(rows.values())) == 1}


if __name__ == "__main__":
    main()
