"""Makespan of the example job in every exchange mode on 2 slots, against the plain PySpark reference.

Usage: .venv/bin/python benchmarks/spark_modes.py [--slots 2] [--repeats 1] [--data-dir DIR]
                                                   [--backend submit|session|both]

submit backend: every unit is one spark-submit, so the makespan is mostly Spark start-up. session
backend: one Spark Connect server per host, started by the run before its clock starts (like Flink's
TaskManagers, which outlive jobs); each attempt is a client session. `wall` adds the server start.
The reference (one plain PySpark program) includes its own JVM start. A mode whose regions need more
slots than given runs at its minimum and is marked so.
"""
from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time

from regionflow.core.graph import load_job
from regionflow.core.plan import Plan
from regionflow.scheduling.hosts import Cluster
from regionflow.units.reference import run_reference
from regionflow.units.runner import LocalRunner, RunOptions

JOB = "regionflow.examples.orders:job"
MODES = ("all-blocking", "forward-pipelined-only", "pointwise-pipelined-only", "all-pipelined")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--slots", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--backend", choices=("submit", "session", "both"), default="both")
    args = parser.parse_args()
    backends = ("submit", "session") if args.backend == "both" else (args.backend,)
    data_dir = args.data_dir or tempfile.mkdtemp(prefix="rf-bench-modes-")
    reference_times, reference = [], None
    for _ in range(args.repeats):
        summary = run_reference(JOB, Plan(load_job(JOB)), _options(data_dir, args.slots))
        reference_times.append(summary.makespan)
        reference = summary.sinks["totals"]
    reference_s = statistics.median(reference_times)
    rows = [{"run": "reference", "slots": args.slots, "attempts": 1, "makespan_s": round(reference_s, 1),
             "ratio_to_reference": 1.0, "checksum_matches": True}]
    for backend in backends:
        for mode in MODES:
            plan = Plan(load_job(JOB), mode)
            slots = max(args.slots, plan.min_slots)
            times, walls, summary = [], [], None
            for _ in range(args.repeats):
                began = time.monotonic()
                summary = LocalRunner(JOB, plan, _options(data_dir, slots, backend)).run()
                walls.append(time.monotonic() - began)
                times.append(summary.makespan)
            makespan = statistics.median(times)
            totals = summary.sinks["totals"]
            rows.append({"run": f"{backend} {mode}", "slots": slots, "attempts": len(summary.units),
                         "makespan_s": round(makespan, 1), "ratio_to_reference": round(makespan / reference_s, 2),
                         "wall_s": round(statistics.median(walls), 1),
                         "checksum_matches": (totals["rows"], totals["checksum"]) == (reference["rows"],
                                                                                      reference["checksum"]),
                         "note": "" if slots == args.slots else f"needs {plan.min_slots} slots"})
    print(json.dumps({"rows": rows}, indent=2))
    for row in rows:
        print(f"{row['run']:<34} slots={row['slots']} attempts={row.get('attempts', 1)} "
              f"makespan={row['makespan_s']:>6.1f}s  x{row['ratio_to_reference']:<5} "
              f"wall={row.get('wall_s', row['makespan_s']):>6.1f}s "
              f"checksum={'ok' if row['checksum_matches'] else 'MISMATCH'} {row.get('note', '')}")


def _options(data_dir: str, slots: int, backend: str = "submit") -> RunOptions:
    return RunOptions(data_dir=data_dir, cluster=Cluster.local_default(slots), progress=None, backend=backend)


if __name__ == "__main__":
    main()
