"""TPC-H Q1, Q3, Q9, Q18: DuckDB, plain PySpark and regionflow in each exchange mode, on the same Parquet.

Usage: .venv/bin/python benchmarks/tpch.py [--sf 0.1] [--repeats 3] [--modes all-blocking,all-pipelined]
                                           [--queries 1,3,9,18] [--slots 2] [--parallelism 4]
                                           [--tpch-dir DIR] [--data-dir DIR] [--backend session|submit]

The tables are generated once per scale factor under --tpch-dir (kept between invocations). For every
query, the median of --repeats runs of:
  duckdb     the official query text (``PRAGMA tpch(q)``) on views over the Parquet, --slots threads;
  plain      the job's vertex functions as one plain PySpark program (`run_reference`): with the session
             backend a client session of the same Spark Connect server as the mode it is compared with,
             run right before each regionflow run (so both see the same JVM, cores and cache state);
             with --backend submit one spark-submit (its makespan includes the JVM start);
  <mode>     `regionflow run` (LocalRunner) of the job (`regionflow.examples.tpch.build_job`). session
             backend: one Spark Connect server per mode, started before the mode's runs and shared by
             them (like Flink's TaskManagers, which outlive jobs), so the makespan excludes its start.
A mode whose regions need more slots than given (all-pipelined needs the parallelism) runs on its
minimum and is marked so. Ratios are to plain. Each kind's last run is checked against DuckDB's official
answers (scale factors 0.01, 0.1 and 1; ``n/a`` otherwise).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time

from regionflow.core.graph import load_job
from regionflow.core.plan import Plan
from regionflow.examples import tpch
from regionflow.scheduling.hosts import Cluster
from regionflow.spark.data.filesystems import local_path
from regionflow.spark.driver.program import resolve_sink_path
from regionflow.units.reference import run_reference
from regionflow.units.runner import LocalRunner, RunOptions
from rfbench import tpch_data


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sf", type=float, default=0.1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--modes", default="all-blocking,all-pipelined")
    parser.add_argument("--queries", default=",".join(str(q) for q in tpch.QUERIES))
    parser.add_argument("--slots", type=int, default=2)
    parser.add_argument("--parallelism", type=int, default=tpch.DEFAULT_PARALLELISM)
    parser.add_argument("--tpch-dir", default=os.path.join(tempfile.gettempdir(), "regionflow-tpch"))
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--backend", choices=("session", "submit"), default="session")
    args = parser.parse_args()
    queries = [int(q) for q in args.queries.split(",") if q.strip()]
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    data_dir = args.data_dir or tempfile.mkdtemp(prefix="rf-bench-tpch-")
    tables = tpch_data.generate(args.sf, args.tpch_dir, threads=args.slots)
    os.environ[tpch.TPCH_DIR_ENV] = tables  # read by the vertex functions in the runs' processes
    jobs = {query: _job_reference(query, args.parallelism, data_dir) for query in queries}
    print(f"TPC-H sf={args.sf:g} tables={tables} data_dir={data_dir} slots={args.slots} "
          f"parallelism={args.parallelism} backend={args.backend}", flush=True)

    rows: list[dict] = []
    for query in queries:  # one kind at a time: never two Spark JVMs at once
        rows.append(_duckdb(query, tables, args))
    plain: dict[tuple[int, str], dict] = {}
    if args.backend == "submit":
        for query in queries:
            plain[(query, "")] = _plain(query, jobs[query], data_dir, args)
            rows.append(plain[(query, "")])
    for mode in modes:
        mode_rows = _regionflow(mode, jobs, data_dir, args)
        for row in mode_rows:
            if row["run"].startswith("plain"):
                plain[(row["query"], mode)] = row
        rows += mode_rows
    for row in rows:
        base = plain.get((row["query"], row.get("mode", ""))) or next(
            value for (query, _), value in plain.items() if query == row["query"])
        row["ratio_to_plain"] = round(row["makespan_s"] / base["makespan_s"], 3)
    rows.sort(key=lambda row: queries.index(row["query"]))
    print(json.dumps({"sf": args.sf, "slots": args.slots, "parallelism": args.parallelism, "rows": rows}, indent=2))
    for row in rows:
        wall = f"wall={row['wall_s']:>6.1f}s" if "wall_s" in row else " " * 12
        print(f"Q{row['query']:<3} {row['run']:<26} {row['resources']:<18} makespan={row['makespan_s']:>7.2f}s "
              f"x{row['ratio_to_plain']:<6} {wall} answer={row['answer']} {row.get('note', '')}")


def _job_reference(query: int, parallelism: int, data_dir: str) -> str:
    """``regionflow.examples.tpch:q<n>`` for the default parallelism, else a JSON job spec file."""
    if parallelism == tpch.DEFAULT_PARALLELISM:
        return f"regionflow.examples.tpch:q{query}"
    path = os.path.join(data_dir, "jobs", f"tpch_q{query}_p{parallelism}.json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(tpch.build_job(query, parallelism).to_spec(), handle, indent=2)
    return path


def _duckdb(query: int, tables: str, args) -> dict:
    con = tpch_data.official_connection(tables, threads=args.slots)
    try:
        times, result = [], []
        for _ in range(args.repeats):
            began = time.perf_counter()
            result = con.execute(f"PRAGMA tpch({query})").fetchall()
            times.append(time.perf_counter() - began)
    finally:
        con.close()
    return {"query": query, "run": "duckdb", "resources": f"threads={args.slots}",
            "makespan_s": round(statistics.median(times), 3), "answer": _check(query, args.sf, result)}


def _plain(query: int, job: str, data_dir: str, args) -> dict:
    times, summary = [], None
    for _ in range(args.repeats):
        summary = run_reference(job, Plan(load_job(job)), _options(data_dir, args.slots, args.backend))
        times.append(summary.makespan)
    return {"query": query, "run": "plain pyspark", "resources": f"slots={args.slots}",
            "makespan_s": round(statistics.median(times), 2),
            "answer": _check_sink(query, job, summary, data_dir, args)}


def _regionflow(mode: str, jobs: dict[int, str], data_dir: str, args) -> list[dict]:
    plans = {query: Plan(load_job(job), mode) for query, job in jobs.items()}
    slots = max([args.slots] + [plan.min_slots for plan in plans.values()])
    servers = _start_servers(slots, data_dir, mode) if args.backend == "session" else None
    rows = []
    try:
        for query, job in jobs.items():
            times, walls, summary = [], [], None
            plain_times, plain_summary = [], None
            for _ in range(args.repeats):
                if servers is not None:  # plain PySpark on the same server, right before
                    plain_summary = run_reference(job, plans[query], _options(data_dir, slots, args.backend, servers))
                    plain_times.append(plain_summary.makespan)
                began = time.monotonic()
                summary = LocalRunner(job, plans[query], _options(data_dir, slots, args.backend, servers)).run()
                walls.append(time.monotonic() - began)
                times.append(summary.makespan)
            if plain_summary is not None:
                rows.append({"query": query, "mode": mode, "run": f"plain pyspark ({mode} server)",
                             "resources": f"slots={slots}", "makespan_s": round(statistics.median(plain_times), 2),
                             "answer": _check_sink(query, job, plain_summary, data_dir, args)})
            rows.append({"query": query, "mode": mode, "run": f"regionflow {mode}",
                         "resources": f"slots={slots} units={len(summary.units)}",
                         "makespan_s": round(statistics.median(times), 2), "wall_s": round(statistics.median(walls), 2),
                         "answer": _check_sink(query, job, summary, data_dir, args),
                         "note": "" if slots == args.slots else f"needs {slots} slots"})
    finally:
        if servers is not None:
            servers.stop()
    return rows


def _start_servers(slots: int, data_dir: str, mode: str):
    from regionflow.spark.servers.session_servers import SessionServers

    servers = SessionServers(Cluster.local_default(slots), os.path.join(data_dir, f"sessions-{mode}"), base_port=None)
    began = time.monotonic()
    servers.start()
    print(f"{mode}: Spark Connect server ({slots} slots) up after {time.monotonic() - began:.1f} s", flush=True)
    return servers


def _options(data_dir: str, slots: int, backend: str, servers=None) -> RunOptions:
    return RunOptions(data_dir=data_dir, cluster=Cluster.local_default(slots), progress=None, backend=backend,
                      servers=servers)


def _check_sink(query: int, job: str, summary, data_dir: str, args) -> str:
    if summary is None:
        return "n/a"
    figures = summary.sinks.get(tpch.SINK_VERTEX, {})
    path = figures.get("path") or resolve_sink_path(load_job(job).vertices[tpch.SINK_VERTEX], data_dir)
    try:
        columns, rows = tpch_data.read_result(local_path(path), query)
    except OSError as error:  # pyarrow: FileNotFoundError, or not Parquet
        return f"MISMATCH (sink {path} unreadable: {error})"
    return _check(query, args.sf, rows, columns)


def _check(query: int, sf: float, rows, columns=None) -> str:
    if not any(abs(sf - known) < 1e-9 for known in tpch_data.ANSWER_SCALE_FACTORS):
        return "n/a"
    difference = tpch_data.check_answer(query, sf, rows, columns)
    return "ok" if difference is None else f"MISMATCH ({difference})"


if __name__ == "__main__":
    main()
