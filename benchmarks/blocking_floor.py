"""What materialising every edge costs in Spark alone: the floor under regionflow's all-blocking mode.

Usage: .venv/bin/python benchmarks/blocking_floor.py [--sf 1] [--repeats 5] [--queries 3,9]
                                                    [--slots 2] [--tpch-dir DIR]

For each TPC-H query, on one Spark Connect server (one host of --slots slots, started once), each
repeat runs, one after another:

  plain        the job's vertex functions as one plain PySpark program (`run_reference`);
  staged       the same plain program (`run_reference`) with every vertex's output but the sink's
               written as Parquet by one Spark job and read back by its consumers:
               what an all-blocking execution must at least do in Spark (one job per vertex, every
               edge on disk), with nothing of regionflow around it: no scheduler, no slot pool, no
               partition groups, no routing columns, no commit, no new session per unit;
  all-blocking `regionflow run` (LocalRunner) of the job, all-blocking, on the same server.

Printed per query (medians): the three makespans, staged / plain (the floor of any all-blocking
execution in Spark on this machine), all-blocking / plain (issue 13's target: <= 1.3) and
all-blocking / staged (regionflow's own overhead). Every sink is checked against `tpch_answers()`.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import tempfile
from collections.abc import Callable
from typing import Any

from regionflow.core.graph import JobGraph, load_job
from regionflow.core.plan import Plan
from regionflow.examples import tpch
from regionflow.scheduling.hosts import Cluster
from regionflow.spark.data.filesystems import local_path
from regionflow.spark.servers.session_servers import SessionServers
from regionflow.units.reference import run_reference
from regionflow.units.runner import LocalRunner, RunOptions
from rfbench import tpch_data


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sf", type=float, default=1.0)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--queries", default="3,9")
    parser.add_argument("--slots", type=int, default=2)
    parser.add_argument("--tpch-dir", default=os.path.join(tempfile.gettempdir(), "regionflow-tpch"))
    args = parser.parse_args()
    queries = [int(q) for q in args.queries.split(",") if q.strip()]
    tables = tpch_data.generate(args.sf, args.tpch_dir, threads=args.slots)
    os.environ[tpch.TPCH_DIR_ENV] = tables
    data_dir = tempfile.mkdtemp(prefix="rf-bench-floor-")
    cluster = Cluster.local_default(args.slots)
    options = RunOptions(data_dir=data_dir, cluster=cluster, progress=None)
    servers = SessionServers(cluster, os.path.join(data_dir, "sessions"), base_port=None)
    servers.start()
    options.servers = servers
    rows = []
    try:
        for query in queries:
            rows.append(_query(query, options, args, data_dir))
    finally:
        servers.stop()
    print(json.dumps({"sf": args.sf, "slots": args.slots, "repeats": args.repeats, "rows": rows}, indent=2))
    for row in rows:
        print(f"Q{row['query']:<3} units={row['units']:<3} plain={row['plain_s']:.2f}s staged={row['staged_s']:.2f}s "
              f"all-blocking={row['all_blocking_s']:.2f}s  staged/plain={row['staged_over_plain']:.2f}x "
              f"all-blocking/plain={row['all_blocking_over_plain']:.2f}x "
              f"all-blocking/staged={row['all_blocking_over_staged']:.2f}x  answers={row['answers']}")


def _query(query: int, options: RunOptions, args: argparse.Namespace, data_dir: str) -> dict[str, Any]:
    job = f"regionflow.examples.tpch:q{query}"
    plan = Plan(load_job(job), "all-blocking")
    staged_plan = Plan(_staged_graph(plan.graph, args.slots, os.path.join(data_dir, f"staged-q{query}")),
                       plan.mode)
    times: dict[str, list[float]] = {"plain": [], "staged": [], "all-blocking": []}
    for repeat in range(args.repeats + 1):  # the first round warms the server up and is not counted
        plain = run_reference(job, plan, options)
        staged = run_reference(job, staged_plan, options)
        summary = LocalRunner(job, plan, options).run()
        if repeat:
            times["plain"].append(plain.makespan)
            times["staged"].append(staged.makespan)
            times["all-blocking"].append(summary.makespan)
    answers = {kind: _check(query, args.sf, run.sinks[tpch.SINK_VERTEX]["path"])  # the last round's sinks
               for kind, run in (("plain", plain), ("staged", staged), ("all-blocking", summary))}
    medians = {kind: statistics.median(values) for kind, values in times.items()}
    return {"query": query, "units": len(summary.units), "plain_s": round(medians["plain"], 3),
            "staged_s": round(medians["staged"], 3), "all_blocking_s": round(medians["all-blocking"], 3),
            "staged_over_plain": round(medians["staged"] / medians["plain"], 3),
            "all_blocking_over_plain": round(medians["all-blocking"] / medians["plain"], 3),
            "all_blocking_over_staged": round(medians["all-blocking"] / medians["staged"], 3),
            "answers": ",".join(f"{kind}:{verdict}" for kind, verdict in answers.items())}


def _staged_graph(graph: JobGraph, slots: int, out_dir: str) -> JobGraph:
    """`graph` whose every vertex but the sink writes its output as Parquet (one job, at most one file
    per slot, as a unit writes) and hands its consumers the files read back: run as plain PySpark
    (`run_reference`), every edge is materialised and nothing else changes."""
    staged = JobGraph(graph.name, graph.default_mode)
    for name, vertex in graph.vertices.items():
        staged.vertices[name] = vertex if vertex.sink else dataclasses.replace(
            vertex, fn=_materialised(vertex.resolve_fn(), os.path.join(out_dir, name), slots))
    staged.edges = list(graph.edges)
    return staged


def _materialised(fn: Callable[..., Any], path: str, slots: int) -> Callable[..., Any]:
    def staged(spark, inputs, ctx):
        frame = fn(spark, inputs, ctx)
        schema = frame.schema  # as a unit asks for the schema of what it writes
        frame.coalesce(slots).write.mode("overwrite").parquet(path)
        return spark.read.schema(schema).parquet(path)
    return staged


def _check(query: int, sf: float, path: str) -> str:
    if not any(abs(sf - known) < 1e-9 for known in tpch_data.ANSWER_SCALE_FACTORS):
        return "n/a"
    columns, rows = tpch_data.read_result(local_path(path), query)
    difference = tpch_data.check_answer(query, sf, rows, columns)
    return "ok" if difference is None else f"MISMATCH({difference})"


if __name__ == "__main__":
    sys.exit(main())
