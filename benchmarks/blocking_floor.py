"""What materialising every edge costs in Spark alone: the floor under regionflow's all-blocking mode.

Usage: .venv/bin/python benchmarks/blocking_floor.py [--sf 1] [--repeats 5] [--queries 3,9]
                                                    [--slots 2] [--tpch-dir DIR]

For each TPC-H query, on one Spark Connect server (one host of --slots slots, started once), each
repeat runs, one after another:

  plain        the job's vertex functions as one plain PySpark program (`run_reference`);
  staged       the same functions, whole, in topological order, in one client session, every
               vertex's output written as Parquet by one Spark job and read back by its consumers:
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
import json
import os
import statistics
import sys
import tempfile
import time
from typing import Any

from regionflow.core.graph import load_job
from regionflow.core.plan import Plan
from regionflow.examples import tpch, tpch_data
from regionflow.scheduling.hosts import Cluster
from regionflow.spark.api import reference_context
from regionflow.spark.computer import SinkFigures, check_frame
from regionflow.spark.connect import SessionServers
from regionflow.spark.filesystems import local_path
from regionflow.spark.runner import LocalRunner, RunOptions, run_reference
from regionflow.spark.session_backend import apply_session_conf
from regionflow.spark.unit import default_conf


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
    url = servers.server(next(iter(cluster)).name).url
    rows = []
    try:
        for query in queries:
            rows.append(_query(query, url, options, args, data_dir))
    finally:
        servers.stop()
    print(json.dumps({"sf": args.sf, "slots": args.slots, "repeats": args.repeats, "rows": rows}, indent=2))
    for row in rows:
        print(f"Q{row['query']:<3} units={row['units']:<3} plain={row['plain_s']:.2f}s staged={row['staged_s']:.2f}s "
              f"all-blocking={row['all_blocking_s']:.2f}s  staged/plain={row['staged_over_plain']:.2f}x "
              f"all-blocking/plain={row['all_blocking_over_plain']:.2f}x "
              f"all-blocking/staged={row['all_blocking_over_staged']:.2f}x  answers={row['answers']}")


def _query(query: int, url: str, options: RunOptions, args: argparse.Namespace, data_dir: str) -> dict[str, Any]:
    job = f"regionflow.examples.tpch:q{query}"
    plan = Plan(load_job(job), "all-blocking")
    times: dict[str, list[float]] = {"plain": [], "staged": [], "all-blocking": []}
    answers: dict[str, str] = {}
    units = 0
    for repeat in range(args.repeats + 1):  # the first round warms the server up and is not counted
        plain = run_reference(job, plan, options)
        staged_s, staged_path = _staged(plan, url, args.slots, os.path.join(data_dir, f"staged-q{query}-{repeat}"))
        summary = LocalRunner(job, plan, options).run()
        units = len(summary.units)
        if repeat:
            times["plain"].append(plain.makespan)
            times["staged"].append(staged_s)
            times["all-blocking"].append(summary.makespan)
        answers = {"plain": _check(query, args.sf, plain.sinks[tpch.SINK_VERTEX]["path"]),
                   "staged": _check(query, args.sf, staged_path),
                   "all-blocking": _check(query, args.sf, summary.sinks[tpch.SINK_VERTEX]["path"])}
    medians = {kind: statistics.median(values) for kind, values in times.items()}
    return {"query": query, "units": units, "plain_s": round(medians["plain"], 3),
            "staged_s": round(medians["staged"], 3), "all_blocking_s": round(medians["all-blocking"], 3),
            "staged_over_plain": round(medians["staged"] / medians["plain"], 3),
            "all_blocking_over_plain": round(medians["all-blocking"] / medians["plain"], 3),
            "all_blocking_over_staged": round(medians["all-blocking"] / medians["staged"], 3),
            "answers": ",".join(f"{kind}:{verdict}" for kind, verdict in answers.items())}


def _staged(plan: Plan, url: str, slots: int, out_dir: str) -> tuple[float, str]:
    """Every vertex whole, in topological order; every output but the sink written as Parquet by one
    job (at most one file per slot, as a unit writes) and read back by its consumers. Returns the
    makespan (session included, as plain's) and the sink's path."""
    from pyspark.sql import SparkSession

    started = time.monotonic()
    spark = SparkSession.builder.remote(url).create()
    try:
        apply_session_conf(spark, default_conf(slots, {}))
        stored: dict[str, Any] = {}
        topology = plan.topology
        sink_path = ""
        for name in topology.vertex_names:
            vertex = plan.graph.vertices[name]
            index = topology.vertex_index[name]
            inputs = {}
            for exec_edge in topology.in_edges[index]:
                src = exec_edge.edge.src
                inputs[src if src not in inputs else f"{src}[{exec_edge.index}]"] = stored[src]
            frame = vertex.resolve_fn()(spark, inputs, reference_context(plan.graph.name, name, "staged",
                                                                          vertex.parallelism))
            check_frame(frame)
            path = os.path.join(out_dir, name)
            if vertex.sink:  # written and observed as plain writes its sink
                figures = SinkFigures(frame)
                figures.observe(frame).write.mode("overwrite").parquet(path)
                figures.total()
                sink_path = path
            else:
                schema = frame.schema
                frame.coalesce(slots).write.mode("overwrite").parquet(path)
                stored[name] = spark.read.schema(schema).parquet(path)
    finally:
        spark.stop()
    return time.monotonic() - started, sink_path


def _check(query: int, sf: float, path: str) -> str:
    if not any(abs(sf - known) < 1e-9 for known in tpch_data.ANSWER_SCALE_FACTORS):
        return "n/a"
    columns, rows = tpch_data.read_result(local_path(path), query)
    difference = tpch_data.check_answer(query, sf, rows, columns)
    return "ok" if difference is None else f"MISMATCH({difference})"


if __name__ == "__main__":
    sys.exit(main())
