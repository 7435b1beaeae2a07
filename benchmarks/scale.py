"""Does a vertex's cost grow with its parallelism? The example job at P = 4 ... 1024.

Usage: .venv/bin/python benchmarks/scale.py [--parallelism 4,16,64,256,1024] [--modes all-blocking,all-pipelined]
                                            [--rows 2000000] [--slots 2] [--repeats 3] [--plot docs/scale.png]

`regionflow.examples.orders:scaled_job` (orders, clean, enrich, totals at P; products at 1) runs
through `regionflow run`'s runner on the session backend, and, in the same invocation and on the same
Spark Connect server, as the plain PySpark reference (the same functions run once each, whole, with
no regions and no partition store). For every P and mode it prints the median makespan of both, their
ratio, the Spark jobs per vertex (counted from the server's event log: the listener's SparkListenerJobStart
events), and the data files written per blocking edge (the runner keeps the partitions for the count).

A pipelined region holds every subtask, so all-pipelined needs P slots: its host declares
max(slots, P) slots (Spark runs them as threads on the same cores) and the row says so.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time

JOB = "regionflow.examples.orders:scaled_job"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--parallelism", default="4,16,64,256,1024")
    parser.add_argument("--modes", default="all-blocking,all-pipelined")
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--slots", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--plot", default=None, help="write a PNG plot here (needs matplotlib)")
    parser.add_argument("--driver-memory", default="4g", help="the server JVM's heap: all-pipelined at P=256 runs "
                        "P tasks at once (Spark's default 1g runs out)")
    args = parser.parse_args()
    os.environ["REGIONFLOW_ORDERS_COUNT"] = str(args.rows)  # read when the example module is imported
    rows = []
    for mode in args.modes.split(","):
        for parallelism in (int(p) for p in args.parallelism.split(",")):
            rows.append(measure(mode, parallelism, args.slots, args.repeats, args.driver_memory))
            print_row(rows[-1], flush=True)
    print(json.dumps({"rows": rows}, indent=2))
    if args.plot:
        plot(rows, args.plot)


def measure(mode: str, parallelism: int, slots: int, repeats: int, driver_memory: str = "4g") -> dict:
    from regionflow.core.graph import load_job
    from regionflow.core.plan import Plan
    from regionflow.scheduling.hosts import Cluster
    from regionflow.spark.servers.session_servers import SessionServers
    from regionflow.units.reference import run_reference
    from regionflow.units.runner import LocalRunner, RunOptions
    from rfbench.spark_counts import blocking_files, event_log_conf, jobs_started

    os.environ["REGIONFLOW_ORDERS_PARALLELISM"] = str(parallelism)
    plan = Plan(load_job(JOB), mode)
    host_slots = max(slots, plan.min_slots)
    cluster = Cluster.local_default(host_slots)
    work = tempfile.mkdtemp(prefix=f"rf-scale-{mode}-{parallelism}-")
    events = os.path.join(work, "events")
    os.makedirs(events)
    servers = SessionServers(cluster, os.path.join(work, "sessions"), base_port=None,
                             conf={**event_log_conf(events), "spark.driver.memory": driver_memory})
    servers.start()
    try:
        reference_s, reference_jobs, reference_sink = [], [], None
        runs_s, run_jobs, files, sink = [], [], {}, None
        for repeat in range(repeats):
            before = jobs_started(events)
            began = time.monotonic()
            options = RunOptions(data_dir=os.path.join(work, "data"), cluster=cluster, progress=None,
                                 backend="session", servers=servers, run_id=f"reference-{repeat}")
            reference_sink = run_reference(JOB, plan, options).sinks["totals"]
            reference_s.append(time.monotonic() - began)
            reference_jobs.append(jobs_started(events) - before)
            before = jobs_started(events)
            options = RunOptions(data_dir=os.path.join(work, "data"), cluster=cluster, progress=None,
                                 backend="session", servers=servers, keep_partitions=True, run_id=f"run-{repeat}")
            summary = LocalRunner(JOB, plan, options).run()
            runs_s.append(summary.makespan)
            run_jobs.append(jobs_started(events) - before)
            sink = summary.sinks["totals"]
            files = {f"{plan.topology.edges[e].edge.src}->{plan.topology.edges[e].edge.dst}": count for e, count in
                     blocking_files(os.path.join(work, "data", f"run-{repeat}", "units"), plan).items()}
    finally:
        servers.stop()
    vertices = len(plan.graph.vertices)
    reference_median, run_median = statistics.median(reference_s), statistics.median(runs_s)
    return {
        "mode": mode, "parallelism": parallelism, "host_slots": host_slots,
        "reference_s": round(reference_median, 2), "regionflow_s": round(run_median, 2),
        "ratio": round(run_median / reference_median, 2),
        "jobs_per_vertex": round(statistics.median(run_jobs) / vertices, 1),
        "reference_jobs_per_vertex": round(statistics.median(reference_jobs) / vertices, 1),
        "files_per_blocking_edge": files,
        "max_files_per_blocking_edge_over_p": round(max(files.values(), default=0) / parallelism, 2),
        "checksum_matches": (sink["rows"], sink["checksum"]) == (reference_sink["rows"], reference_sink["checksum"]),
    }


def print_row(row: dict, flush: bool = False) -> None:
    print(f"{row['mode']:<14} P={row['parallelism']:<5} slots={row['host_slots']:<5} "
          f"plain={row['reference_s']:>6.2f}s regionflow={row['regionflow_s']:>6.2f}s x{row['ratio']:<5} "
          f"jobs/vertex={row['jobs_per_vertex']} (plain {row['reference_jobs_per_vertex']}) "
          f"files/P={row['max_files_per_blocking_edge_over_p']} "
          f"checksum={'ok' if row['checksum_matches'] else 'MISMATCH'}", flush=flush)


def plot(rows: list[dict], path: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"matplotlib is not installed: no plot written to {path} (pip install matplotlib)")
        return
    figure, axis = plt.subplots(figsize=(7, 4))
    for mode in dict.fromkeys(row["mode"] for row in rows):
        mine = [row for row in rows if row["mode"] == mode]
        ps = [row["parallelism"] for row in mine]
        axis.plot(ps, [row["regionflow_s"] for row in mine], marker="o", label=f"regionflow {mode}")
        axis.plot(ps, [row["reference_s"] for row in mine], linestyle="--", marker="x", label=f"plain PySpark ({mode})")
    axis.set_xscale("log", base=2)
    axis.set_xlabel("parallelism P of every vertex")
    axis.set_ylabel("makespan (s), median")
    axis.set_title("Example job: makespan against parallelism (2 cores)")
    axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    print(f"plot written to {path}")


if __name__ == "__main__":
    main()
