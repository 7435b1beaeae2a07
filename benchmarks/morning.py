"""Issue 47's headline benchmark: a morning's work arrives at once on one small cluster, under each setup.

Usage: .venv/bin/python benchmarks/morning.py [--quick] [--repeats N] [--sf 0.01] [--slots 4]
           [--setups airflow,regionflow_blocking,regionflow] [--picture PATH] [--format text|json] [--tpch-dir DIR]

The work: DAG runs of five DAGs (the daily orders DAG and TPC-H Q1, Q3, Q9, Q18 as DAGs, each at its own
parallelism: `rfbench.morning_dags.DAGS`), triggered one after another within a few seconds, so that big and
small regions compete. ``--quick``: 6 runs at SF 0.01 (`QUICK_RUNS`); otherwise 20 runs (`FULL_RUNS`) at --sf
(default 0.1).
The cluster, the same for every setup: one host of --slots slots (4), one long-lived Spark Connect server
(regionflow's `ConnectServer`: ``local[4]``, FAIR default pool), started before the clock starts.

Setups (their DAG files: `rfbench.morning_dags`), each on its own embedded Airflow stack
(`regionflow.testing.EmbeddedAirflow`), started before its clock starts:

  1 airflow              Airflow today, shared Spark: LocalExecutor, one PythonOperator per vertex that opens a
                         session on the server through the Spark provider's ``spark_connect`` connection
                         (``AIRFLOW_CONN_SPARK_MORNING``), intermediate data as Parquet between tasks, an Airflow
                         pool ``spark`` of --slots slots and pool_slots = the vertex's parallelism.
  2 airflow_submit       as 1, each task a SparkSubmitOperator of the provider submitting one vertex to
                         ``local[p]`` (a JVM per task; default in full mode only).
  3 regionflow_blocking  the RegionExecutor, session backend, all-blocking: one region task per vertex
                         (max_shards=1), the same tasks as setup 1 (the strict comparison).
  3 regionflow           the same, each DAG in its best exchange mode (`morning_dags.BEST_MODES`: all of
                         them one pipelined region that fits the cluster).

Repeats alternate the setups' order (1, 3, 3' then 3', 3, 1 ...). Figures per setup: makespan (first trigger to
the last run's end; median over repeats), per-run latency from its trigger to its end (p50, p95, max over every
run of every repeat; nearest rank), each run's wait from its trigger to its first task's start (median, max,
max over median, and the biggest run's: the DAG with the most subtasks), runs failed, Spark applications
started during the morning (setup 2: one per task; the others share one server started before it), and each run's sink
checked against the reference (TPC-H: DuckDB's official answers; orders: the plain PySpark reference of each
day, `run_reference`). A setup with a failed run or a wrong answer gets no figure (null). ``ratios``:
regionflow's (best modes) over setup 1's, ``ratios_all_blocking`` the strict comparison's. ``--format json``
prints one JSON document on stdout; progress goes to stderr. Targets (issue 47): makespan and p95 latency <= 0.7x
setup 1. Where the time went, per setup and repeat (``occupancy``): the slot-seconds spent in running task
instances (weighted by their pool_slots, or their grant's slots) as a share of makespan x slots, and under
regionflow the slot-seconds its grants held (grant to release) and the median wait for a grant. The picture
(`rfbench.morning_plot`, matplotlib): busy slots over time per setup (its first repeat) and the run latencies.
Siblings: the deadlock scenario is ``benchmarks/deadlock.py``, the overhead figures ``benchmarks/blocking_floor.py``
(over the staged floor) and ``benchmarks/airflow_executor.py --only throughput`` (Airflow's scheduling).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime

from regionflow.examples import tpch
from regionflow.scheduling.hosts import Cluster
from regionflow.spark.servers.client_env import no_client_marks
from regionflow.spark.servers.session_servers import SessionServers
from regionflow.store import RegionflowStore
from regionflow.testing import EmbeddedAirflow
from regionflow.testing.errors import WaitTimeout
from rfbench import morning_dags, morning_plot, tpch_data

# setup name -> its number in issue 47
SETUPS = {"airflow": 1, "airflow_submit": 2, "regionflow_blocking": 3, "regionflow": 3}
QUICK_SETUPS = ("airflow", "regionflow_blocking", "regionflow")  # setup 2 starts a JVM per task: --full only
BASELINE = "airflow"
TARGET = 0.7
RUN_TIMEOUT_S = 1200.0
STACK_START_TIMEOUT_S = 900.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="6 runs at SF 0.01")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--sf", type=float, default=None, help="TPC-H scale factor (default 0.01 quick, 0.1 full)")
    parser.add_argument("--slots", type=int, default=4)
    parser.add_argument("--setups", default=None, help=f"default: {','.join(QUICK_SETUPS)} (--quick), all "
                                                         f"of {','.join(SETUPS)} otherwise")
    parser.add_argument("--picture", default=None,
                        help="where the PNG goes (default build/morning-<time>.png; needs matplotlib: '.[bench]')")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.add_argument("--tpch-dir", default=os.path.join(tempfile.gettempdir(), "regionflow-tpch"))
    args = parser.parse_args()
    sf = args.sf if args.sf is not None else (0.01 if args.quick else 0.1)
    chosen = args.setups if args.setups is not None else ",".join(QUICK_SETUPS if args.quick else SETUPS)
    setups = [name.strip() for name in chosen.split(",") if name.strip()]
    unknown = [name for name in setups if name not in SETUPS]
    if unknown:
        parser.error(f"unknown setups {unknown}; choose from {list(SETUPS)}")
    for name in setups:
        for problem in morning_dags.check_modes(name, args.slots):
            parser.error(f"setup {name}: {problem}; give --slots at least that many")
    runs = morning_dags.runs_for(args.quick)
    tables = tpch_data.generate(sf, args.tpch_dir, threads=2)
    os.environ[tpch.TPCH_DIR_ENV] = tables
    root = tempfile.mkdtemp(prefix="rf-bench-morning-")
    _progress(f"morning: {len(runs)} runs of {len(morning_dags.DAGS)} DAGs, SF {sf:g}, {args.slots} slots, "
              f"{args.repeats} repeat(s), setups {setups}, under {root}")

    began = time.monotonic()
    with no_client_marks():  # the references are Connect clients; setup 2's spark-submit children must not be
        days = [day for dag_id, day in runs if morning_dags.DAGS[dag_id][0] == "orders"]
        orders = morning_dags.orders_references(days, os.path.join(root, "reference"))
    _progress(f"morning: the orders references of {len(orders)} day(s) in {time.monotonic() - began:.1f} s")
    measured: dict[str, list[dict]] = {name: [] for name in setups}
    for repeat in range(args.repeats):
        order = setups if repeat % 2 == 0 else list(reversed(setups))
        for name in order:
            measured[name].append(_morning(name, repeat, runs, sf, args.slots, tables, root, orders))

    intervals = {name: [one.pop("intervals") for one in rounds] for name, rounds in measured.items()}
    figures = {name: _figures(name, rounds) for name, rounds in measured.items()}
    result = {"quick": args.quick, "sf": sf, "slots": args.slots, "repeats": args.repeats,
              "runs": [{"dag_id": dag_id, "logical_date": day} for dag_id, day in runs],
              "modes": {name: morning_dags.SETUP_MODES[name] for name in setups if name in morning_dags.SETUP_MODES},
              "setups": figures, "ratios": _ratios(figures, "regionflow"),
              "ratios_all_blocking": _ratios(figures, "regionflow_blocking"),
              "answers_ok": all(f["answers_ok"] for f in figures.values())}
    result["targets"] = _targets(result["ratios"])
    result["picture"] = morning_plot.draw(args.picture or os.path.join(
        "build", f"morning-{datetime.now(UTC):%Y%m%dT%H%M%S}.png"), intervals, figures, args.slots, _progress)
    if args.format == "json":
        print(json.dumps(result, indent=2))
    else:
        _print_text(result)
    return 0 if result["answers_ok"] else 1


def _morning(setup: str, repeat: int, runs, sf: float, slots: int, tables: str, root: str,
             orders: dict) -> dict:
    """One morning under `setup` on a fresh stack: trigger every run, wait for all, check the sinks."""
    home = os.path.join(root, f"{setup}-{repeat}")
    dags = os.path.join(home, "dags")
    data_dir = os.path.join(home, "data")
    morning_dags.write_dags(dags, setup)
    env = {tpch.TPCH_DIR_ENV: tables}
    options = {"hosts": f"localhost:slots={slots}", "data_dir": data_dir, "max_shards": "1"}
    servers = None
    if setup == "airflow_submit":  # a Spark application per task, local[p] through the provider's spark connection
        for width in range(1, slots + 1):
            env[f"AIRFLOW_CONN_SPARK_LOCAL_{width}"] = json.dumps({"conn_type": "spark", "host": f"local[{width}]"})
        env["MORNING_DATA_DIR"] = data_dir
        stack = EmbeddedAirflow(home, dags, executor="LocalExecutor", env=env,
                                regionflow_options={**options, "backend": "submit"})
    elif setup == "airflow":
        # the team's Spark Connect server, run beside Airflow; the tasks reach it through a spark_connect connection
        servers = SessionServers(Cluster.local_default(slots), os.path.join(home, "spark-connect"), base_port=None)
        began = time.monotonic()
        servers.start()
        server = servers.server("localhost")
        port = int(server.url.rsplit(":", 1)[1])
        _progress(f"[{setup} #{repeat}] Spark Connect server up on port {port} after {time.monotonic() - began:.1f} s")
        env["AIRFLOW_CONN_SPARK_MORNING"] = json.dumps(
            {"conn_type": "spark_connect", "host": "127.0.0.1", "port": port, "password": server.token})
        env["MORNING_DATA_DIR"] = data_dir
        stack = EmbeddedAirflow(home, dags, executor="LocalExecutor", env=env,
                                regionflow_options={**options, "backend": "submit"})  # no servers of its own
    else:
        stack = EmbeddedAirflow(home, dags, executor="regionflow.executors.RegionExecutor", env=env,
                                regionflow_options={**options, "backend": "session"})
    try:
        began = time.monotonic()
        stack.start(timeout=STACK_START_TIMEOUT_S)
        _progress(f"[{setup} #{repeat}] Airflow stack healthy after {time.monotonic() - began:.1f} s "
                  f"({stack.timings})")
        if setup in ("airflow", "airflow_submit"):
            stack.create_pool("spark", slots, "the cluster's slots")
        for dag_id in morning_dags.DAGS:
            stack.wait_for_dag(dag_id, timeout=600)
            stack.unpause(dag_id)
        return _trigger_and_wait(stack, setup, repeat, runs, sf, data_dir, slots, orders)
    finally:
        stack.stop()
        if servers is not None:
            servers.stop()


def _trigger_and_wait(stack: EmbeddedAirflow, setup: str, repeat: int, runs, sf: float, data_dir: str,
                      slots: int, orders: dict) -> dict:
    triggered = []
    for index, (dag_id, day) in enumerate(runs):
        run_id = f"morning_{repeat}_{index}"
        at = datetime.now(UTC)
        stack.trigger(dag_id, run_id=run_id, logical_date=morning_dags.logical_date_iso(day))
        triggered.append((dag_id, day, run_id, at))
    _progress(f"[{setup} #{repeat}] {len(runs)} runs triggered within "
              f"{(triggered[-1][3] - triggered[0][3]).total_seconds():.1f} s")
    deadline = time.monotonic() + RUN_TIMEOUT_S
    results = []
    for dag_id, day, run_id, at in triggered:
        try:
            state = stack.wait_for_run(dag_id, run_id, timeout=max(1.0, deadline - time.monotonic()))
        except WaitTimeout as error:
            _progress(f"[{setup} #{repeat}] {dag_id} {run_id}: {error}")
            state = "timed out"
        run = stack.dag_run(dag_id, run_id)
        end = datetime.fromisoformat(run["end_date"]) if run.get("end_date") else datetime.now(UTC)
        answer = morning_dags.check_run(dag_id, day, morning_dags.sink_path(setup, data_dir, dag_id, run_id), sf,
                                        orders) if state == "success" else f"not checked: run {state}"
        results.append({"dag_id": dag_id, "run_id": run_id, "state": state, "answer": answer,
                        "latency_s": round((end - at).total_seconds(), 2), "end": end})
        _progress(f"[{setup} #{repeat}] {dag_id} {run_id}: {state} after {results[-1]['latency_s']:.1f} s, "
                  f"answer {answer}")
    zero = triggered[0][3].timestamp()
    makespan = max(r["end"] for r in results).timestamp() - zero
    _progress(f"[{setup} #{repeat}] makespan {makespan:.1f} s")
    tasks = {(dag_id, run_id): stack.task_instances(dag_id, run_id) for dag_id, _, run_id, _ in triggered}
    grants = None
    if setup in morning_dags.SETUP_MODES:
        store = RegionflowStore.from_config(f"sqlite:///{os.path.join(stack.home, 'regionflow.db')}")
        grants = [g for dag_id, _, run_id, _ in triggered for g in store.grants(dag_id, run_id)]
    spans = task_spans(tasks, grants, zero)
    for result, (_, _, run_id, at) in zip(results, triggered, strict=True):
        starts = [span["start_s"] for span in spans if span["run_id"] == run_id]
        result["first_slot_wait_s"] = round(min(starts) - (at.timestamp() - zero), 2) if starts else None
        del result["end"]
    # Spark applications this morning started: one per task under setup 2 (each SparkSubmitOperator submits
    # one); none under the others, whose one Connect server (one application) was started before the clock
    applications = len(spans) if setup == "airflow_submit" else 0
    return {"makespan_s": round(makespan, 2), "runs": results, "intervals": spans,
            "spark_applications_started": applications,
            "occupancy": occupancy(spans, makespan, slots)}


def task_spans(tasks: dict, grants: list | None, zero: float) -> list[dict]:
    """Every task instance that ran, as seconds from the first trigger (`zero`): its run, start, end and slots
    (its pool_slots, or its grant's slots under regionflow), and under regionflow its grant's times."""
    grant_of = {(g.dag_id, g.run_id, g.task_id, g.map_index): g for g in grants or ()}
    spans = []
    for (dag_id, run_id), instances in tasks.items():
        for ti in instances:
            if not ti.get("start_date") or not ti.get("end_date"):
                continue
            start, end = (datetime.fromisoformat(ti[key]).timestamp() - zero for key in ("start_date", "end_date"))
            grant = grant_of.get((dag_id, run_id, ti["task_id"], ti.get("map_index", -1)))
            span = {"dag_id": dag_id, "run_id": run_id, "task_id": ti["task_id"], "start_s": round(start, 3),
                    "end_s": round(end, 3),
                    "slots": len(grant.slots) if grant is not None else int(ti.get("pool_slots") or 1)}
            if grant is not None and grant.granted_at is not None:
                span["granted_s"] = round(grant.granted_at - zero, 3)
                span["released_s"] = round((grant.released_at or end + zero) - zero, 3)
                span["submitted_s"] = round(grant.submitted_at - zero, 3)
            spans.append(span)
    return spans


def occupancy(spans: list[dict], makespan: float, slots: int) -> dict:
    """Where the cluster's slot-seconds (makespan x slots) went: ``running`` in task instances (start to end,
    times the task's slots); under regionflow also ``held``, from a grant to its release (the task's process
    start and end, and the executor noticing it), and the median wait for a grant."""
    capacity = makespan * slots
    running = sum((span["end_s"] - span["start_s"]) * span["slots"] for span in spans)
    figures = {"running_slot_s": round(running, 1), "running_share": round(running / capacity, 3) if capacity else None}
    granted = [span for span in spans if "granted_s" in span]  # regionflow's: the tasks' grants
    if granted:
        held = sum((span["released_s"] - span["granted_s"]) * span["slots"] for span in granted)
        waits = [span["granted_s"] - span["submitted_s"] for span in granted]
        figures.update({"held_slot_s": round(held, 1), "held_share": round(held / capacity, 3) if capacity else None,
                        "grant_wait_median_s": round(statistics.median(waits), 2)})
    return figures


def _figures(setup: str, rounds: list[dict]) -> dict:
    runs = [run for one in rounds for run in one["runs"]]
    latencies = sorted(run["latency_s"] for run in runs)
    failed = sum(run["state"] != "success" for run in runs)
    answers_ok = all(run["answer"] == "ok" for run in runs)
    valid = answers_ok and not failed
    waits = [run["first_slot_wait_s"] for run in runs if run.get("first_slot_wait_s") is not None]
    sizes = {dag_id: morning_dags.subtasks(dag_id) for dag_id in {run["dag_id"] for run in runs}}
    biggest = max(sizes, key=lambda dag_id: sizes[dag_id]) if sizes else None
    biggest_waits = [run["first_slot_wait_s"] for run in runs
                     if run["dag_id"] == biggest and run.get("first_slot_wait_s") is not None]
    median_wait = statistics.median(waits) if waits else None
    return {"setup": SETUPS[setup], "modes": morning_dags.SETUP_MODES.get(setup, "a task per vertex"),
            "answers_ok": answers_ok, "runs_failed": failed, "runs": len(runs),
            "spark_applications_started": [r["spark_applications_started"] for r in rounds],
            "first_slot_wait_median_s": round(median_wait, 2) if median_wait is not None else None,
            "first_slot_wait_max_s": max(waits) if waits else None,
            # issue 47: no run waits longer than 2x the median wait (a median of 0 makes any wait a breach)
            "wait_max_over_median": round(max(waits) / median_wait, 2) if waits and median_wait else None,
            "biggest_run": {"dag_id": biggest, "subtasks": sizes.get(biggest),
                            "first_slot_wait_s": max(biggest_waits) if biggest_waits else None},
            "makespan_s": round(statistics.median(r["makespan_s"] for r in rounds), 2) if valid else None,
            "makespans_s": [r["makespan_s"] for r in rounds],
            "occupancy": [r["occupancy"] for r in rounds],
            "latency_p50_s": _rank(latencies, 0.50) if valid else None,
            "latency_p95_s": _rank(latencies, 0.95) if valid else None,
            "latency_max_s": latencies[-1] if valid and latencies else None,
            "per_run": [{k: run[k] for k in ("dag_id", "run_id", "state", "latency_s", "answer")} for run in runs]}


def _rank(values: list[float], fraction: float) -> float | None:
    """The nearest-rank percentile of sorted `values`."""
    return values[max(0, math.ceil(fraction * len(values)) - 1)] if values else None


def _ratios(figures: dict, setup: str) -> dict:
    """`setup`'s makespan and p95 latency over setup 1's."""
    base, ours = figures.get(BASELINE), figures.get(setup)

    def ratio(key: str) -> float | None:
        if not base or not ours or base[key] is None or ours[key] is None or not base[key]:
            return None
        return round(ours[key] / base[key], 3)
    return {"makespan": ratio("makespan_s"), "p95_latency": ratio("latency_p95_s")}


def _targets(ratios: dict) -> dict:
    return {key: {"target": TARGET, "ratio": value, "met": value is not None and value <= TARGET}
            for key, value in ratios.items()}


def _print_text(result: dict) -> None:
    print(f"morning: {len(result['runs'])} runs, SF {result['sf']:g}, {result['slots']} slots, "
          f"{result['repeats']} repeat(s)")
    for name, f in result["setups"].items():
        print(f"setup {f['setup']} {name:<19} makespan={f['makespan_s']}s latency p50={f['latency_p50_s']}s "
              f"p95={f['latency_p95_s']}s max={f['latency_max_s']}s failed={f['runs_failed']}/{f['runs']} "
              f"answers_ok={f['answers_ok']} first-slot wait median={f['first_slot_wait_median_s']}s "
              f"max={f['first_slot_wait_max_s']}s (max/median {f['wait_max_over_median']}) "
              f"biggest run {f['biggest_run']}")
        for occupancy_ in f["occupancy"]:
            print(f"  occupancy: {occupancy_}")
    for key, target in result["targets"].items():
        verdict = "met" if target["met"] else "NOT met"
        print(f"regionflow (best modes) / setup 1 {key}: {target['ratio']}x (target <= {TARGET}x: {verdict})")
    for key, value in result["ratios_all_blocking"].items():
        print(f"regionflow all-blocking / setup 1 {key}: {value}x")
    print(f"picture: {result['picture']}")


def _progress(message: str) -> None:
    print(f"{datetime.now(UTC):%H:%M:%S} {message}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(main())
