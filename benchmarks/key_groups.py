"""What storing a blocking HASH edge by key group costs (`regionflow.core.keygroups`).

The example's orders (2 producer units) hashed by customer to a count per customer whose region is cut into
shards (``max_shards`` 4, all-blocking): the consumer adaptive ``[1, 8]``, so its input is stored by key group
(K = 8: one directory per producer unit, sorted by key group), against the same consumer fixed at the value the
adaptive one is planned at, stored as a directory per consumer shard. The adaptive consumer has no byte
target, so the decision `regionflow run` takes for the run (`units.per_run`) is the cluster's slots, the value
it was planned at: same slots, same shards, same subtasks, same rows: only the storage differs. The two runs
alternate on one shared Spark Connect server (after a warm-up pair); the figures are medians and the ratio is
taken pair by pair.

Usage: .venv/bin/python benchmarks/key_groups.py [--orders 2000000] [--slots 2] [--repeats 5]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile

from regionflow.core.adaptive import decided_plan
from regionflow.core.graph import load_job
from regionflow.core.plan import Plan
from regionflow.scheduling.hosts import Cluster
from regionflow.spark.servers.session_servers import SessionServers
from regionflow.units.runner import LocalRunner, RunOptions
from rfbench.keygroup_jobs import CONSUMER_ENV
from rfbench.machine import cpu_unit_times

MAX_SHARDS = 4
ADAPTIVE, FIXED = "rfbench.keygroup_jobs:adaptive", "rfbench.keygroup_jobs:fixed"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--orders", type=int, default=2_000_000)
    parser.add_argument("--slots", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    # read by the example when it is first imported (here, by the first load_job, and in every attempt)
    os.environ["REGIONFLOW_ORDERS_COUNT"] = str(args.orders)
    adaptive = decided_plan(load_job(ADAPTIVE), args.slots, "all-blocking")
    planned = adaptive.graph.vertices["per_customer"].parallelism
    os.environ[CONSUMER_ENV] = str(planned)
    fixed = Plan(load_job(FIXED), "all-blocking")
    data_dir = tempfile.mkdtemp(prefix="rf-bench-keygroups-")
    cluster = Cluster.local_default(args.slots)
    servers = SessionServers(cluster, os.path.join(data_dir, "sessions"), base_port=None)
    servers.start()
    times: dict[str, list[float]] = {"key groups": [], "by unit": []}
    ratios, last = [], {}
    try:
        for repeat in range(args.repeats + 1):  # the first pair warms the server up and is not counted
            pair = {}
            for kind, (job, plan) in (("key groups", (ADAPTIVE, adaptive)), ("by unit", (FIXED, fixed))):
                options = RunOptions(data_dir=data_dir, cluster=cluster, max_shards=MAX_SHARDS, progress=None,
                                     servers=servers, keep_partitions=True, run_id=f"{kind.replace(' ', '-')}-{repeat}")
                runner = LocalRunner(job, plan, options)
                summary = runner.run()
                pair[kind] = summary.makespan
                last[kind] = (runner, summary)
            if repeat:
                for kind, seconds in pair.items():
                    times[kind].append(seconds)
                ratios.append(pair["key groups"] / pair["by unit"])
    finally:
        servers.stop()
    decided = last["key groups"][0].store.decisions()["per_customer"]["values"]
    if decided != {"per_customer": planned}:  # then the two would not run the same subtasks
        raise SystemExit(f"the adaptive consumer was decided {decided}, not its planned {planned}")
    sinks = {kind: summary.sinks["per_customer"] for kind, (_, summary) in last.items()}
    result = {
        "orders": args.orders, "slots": args.slots, "max_shards": MAX_SHARDS, "consumer_parallelism": planned,
        "repeats": args.repeats, "cpu_unit_ms": round(statistics.median(cpu_unit_times()), 1),
        "directories_per_producer_unit": {kind: _directories(runner) for kind, (runner, _) in last.items()},
        "makespan_s": {kind: round(statistics.median(values), 2) for kind, values in times.items()},
        "ratio_key_groups_to_by_unit": round(statistics.median(ratios), 3),
        "same_rows": (sinks["key groups"]["rows"], sinks["key groups"]["checksum"])
        == (sinks["by unit"]["rows"], sinks["by unit"]["checksum"]),
    }
    print(json.dumps(result, indent=2))


def _directories(runner: LocalRunner) -> int:
    """``_rf_unit`` directories in the first producer unit's dataset of the run's one blocking edge."""
    [edge] = [e.index for e in runner.plan.topology.edges if e.blocking]
    dataset = runner.store.partition_path(runner.keys[runner.layout.units_of_logical(0)[0]], edge)
    return sum(1 for name in os.listdir(dataset) if name.startswith("_rf_unit="))


if __name__ == "__main__":
    main()
