"""Issue 47's deadlock scenario (the seeds' FLIP-119 case): two pipelined jobs that each need the whole cluster.

Usage: .venv/bin/python benchmarks/deadlock.py [--timeout 45] [--format text|json]

Each job is a producer and a consumer that must run at the same time, the producer streaming its output to
the consumer (a pipelined exchange), each at parallelism 2, on a cluster of 4 slots: without slot sharing,
one job needs all 4. Both jobs are triggered at once, under each setup, on its own embedded Airflow stack:

  1 airflow     Airflow today: LocalExecutor, a task per vertex in an Airflow pool of 4 slots with pool_slots 2,
                each task with ``execution_timeout`` --timeout and no retry. The consumer waits for a small
                setup task (it creates the consumer's output folder), as consumers do; the exchange is a
                bounded channel of files (the producer stays at most 2 chunks ahead of its consumer). What
                deadlocks is the allocation, one task at a time, whatever runs inside the tasks: both
                producers get their slots, both consumers wait for slots that only a finished producer frees,
                and both producers wait for their consumers, until the timeout fails them.
  3 regionflow  the RegionExecutor, session backend: the same jobs as regionflow DAGs (producer and consumer
                in different slot sharing groups, so each region needs 4 slots), all-pipelined: each job is
                one region task whose bulk of 4 slots is granted whole or not at all, so one job runs, then
                the other, on Spark; each sink is checked (rows and sum).

Printed per setup: each run's state and latency, whether both producers held slots at once while no consumer
ran (the deadlock), and the makespan. ``--format json``: one JSON document on stdout; progress on stderr.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from datetime import UTC, datetime

from regionflow.testing import EmbeddedAirflow
from regionflow.testing.errors import WaitTimeout

SLOTS = 4
ROWS = 200_000
JOBS = ("a", "b")

AIRFLOW_DAGS = '''"""Setup 1 of benchmarks/deadlock.py: two pipelined jobs, a task per vertex, per-task pool slots."""
import os
import time
from datetime import datetime, timedelta

from airflow.providers.standard.operators.python import PythonOperator
from airflow.sdk import DAG

CHANNEL = os.environ["DEADLOCK_DIR"]
CHUNKS, AHEAD = 20, 2


def _folder(job, run_id):
    return os.path.join(CHANNEL, job, run_id)


def _acked(folder):
    return sum(1 for name in os.listdir(folder) if name.startswith("ack-"))


def produce(job, run_id):
    """Streams CHUNKS chunks to the consumer, at most AHEAD ahead of what it has read."""
    folder = _folder(job, run_id)
    os.makedirs(folder, exist_ok=True)
    for index in range(CHUNKS):
        while index - _acked(folder) >= AHEAD:  # the buffer is full: wait for the consumer
            time.sleep(0.2)
        with open(os.path.join(folder, f".chunk-{{index}}"), "w") as handle:
            handle.write(",".join(str(index * 1000 + i) for i in range(1000)))
        os.rename(os.path.join(folder, f".chunk-{{index}}"), os.path.join(folder, f"chunk-{{index}}"))


def prepare(job, run_id):
    os.makedirs(os.path.join(CHANNEL, "out", job), exist_ok=True)


def consume(job, run_id):
    folder = _folder(job, run_id)
    os.makedirs(folder, exist_ok=True)
    total = 0
    for index in range(CHUNKS):
        path = os.path.join(folder, f"chunk-{{index}}")
        while not os.path.exists(path):  # waits for the producer
            time.sleep(0.2)
        with open(path) as handle:
            total += sum(int(value) for value in handle.read().split(","))
        open(os.path.join(folder, f"ack-{{index}}"), "w").close()
    with open(os.path.join(CHANNEL, "out", job, run_id), "w") as handle:
        handle.write(str(total))


for job in {jobs!r}:
    with DAG(f"pipelined_{{job}}", schedule=None, start_date=datetime(2026, 1, 1), catchup=False,
             default_args={{"retries": 0, "execution_timeout": timedelta(seconds={timeout})}}) as dag:
        kwargs = {{"job": job, "run_id": "{{{{ run_id }}}}"}}
        PythonOperator(task_id="produce", python_callable=produce, op_kwargs=kwargs, pool="spark", pool_slots=2)
        setup = PythonOperator(task_id="prepare", python_callable=prepare, op_kwargs=kwargs)
        setup >> PythonOperator(task_id="consume", python_callable=consume, op_kwargs=kwargs, pool="spark",
                                pool_slots=2)
    globals()[f"pipelined_{{job}}"] = dag
'''

REGIONFLOW_DAGS = '''"""Setup 3 of benchmarks/deadlock.py: the same two pipelined jobs as regionflow DAGs."""
from datetime import datetime

from airflow.sdk import DAG

import regionflow
from regionflow.operators import SparkVertexOperator, hash_by


def produce(spark, inputs, ctx):
    from pyspark.sql import functions as F

    return ctx.range(spark, {rows}).select("id", (F.col("id") % 10).alias("key"))


def consume(spark, inputs, ctx):
    from pyspark.sql import functions as F

    return inputs["produce"].groupBy("key").agg(F.count("*").alias("rows"), F.sum("id").alias("total"))


for job in {jobs!r}:
    with DAG(f"pipelined_{{job}}", schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as dag:
        producer = SparkVertexOperator(task_id="produce", parallelism=2, fn=produce, slot_sharing_group="produce")
        consumer = SparkVertexOperator(task_id="consume", parallelism=2, fn=consume, slot_sharing_group="consume",
                                       sink="deadlock/" + job + "/{{{{ run_id }}}}")
        producer >> hash_by("key") >> consumer
    regionflow.transform(dag, mode="all-pipelined", max_shards=1)
    globals()[f"pipelined_{{job}}"] = dag
'''


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=int, default=45, help="setup 1's execution_timeout per task (s)")
    parser.add_argument("--setups", default="airflow,regionflow")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix="rf-bench-deadlock-")
    _progress(f"deadlock: two pipelined jobs of 4 slots each on {SLOTS} slots, under {root}")
    setups = {name: _setup(name, root, args.timeout) for name in args.setups.split(",") if name}
    result = {"slots": SLOTS, "timeout_s": args.timeout, "setups": setups,
              "regionflow_completes_both": bool(setups.get("regionflow", {}).get("all_succeeded")),
              "airflow_deadlocked": bool(setups.get("airflow", {}).get("deadlocked"))}
    if args.format == "json":
        print(json.dumps(result, indent=2))
    else:
        for name, figures in setups.items():
            print(f"{name}: makespan {figures['makespan_s']} s, deadlocked={figures['deadlocked']}, "
                  f"runs {[(r['dag_id'], r['state'], r['latency_s'], r.get('answer')) for r in figures['runs']]}")
            print(f"  {figures['why']}")
    return 0 if result["regionflow_completes_both"] else 1


def _setup(name: str, root: str, timeout: int) -> dict:
    home = os.path.join(root, name)
    dags = os.path.join(home, "dags")
    data_dir = os.path.join(home, "data")
    os.makedirs(dags)
    source = (AIRFLOW_DAGS.format(jobs=JOBS, timeout=timeout) if name == "airflow"
              else REGIONFLOW_DAGS.format(jobs=JOBS, rows=ROWS))
    with open(os.path.join(dags, f"deadlock_{name}.py"), "w", encoding="utf-8") as handle:
        handle.write(source)
    options = {"hosts": f"localhost:slots={SLOTS}", "data_dir": data_dir, "max_shards": "1"}
    if name == "airflow":
        stack = EmbeddedAirflow(home, dags, executor="LocalExecutor", env={"DEADLOCK_DIR": data_dir},
                                regionflow_options={**options, "backend": "submit"})
    else:
        stack = EmbeddedAirflow(home, dags, executor="regionflow.executors.RegionExecutor",
                                regionflow_options={**options, "backend": "session"})
    with stack.start():
        if name == "airflow":
            stack.create_pool("spark", SLOTS, "the cluster's slots")
        for job in JOBS:
            stack.wait_for_dag(f"pipelined_{job}", timeout=600)
            stack.unpause(f"pipelined_{job}")
        triggered = []
        for job in JOBS:
            triggered.append((f"pipelined_{job}", stack.trigger(f"pipelined_{job}"), datetime.now(UTC)))
        _progress(f"[{name}] both runs triggered")
        runs, tasks = [], {}
        for dag_id, run_id, at in triggered:
            try:
                state = stack.wait_for_run(dag_id, run_id, timeout=4 * timeout + 300)
            except WaitTimeout:
                state = "timed out"
            run = stack.dag_run(dag_id, run_id)
            end = datetime.fromisoformat(run["end_date"]) if run.get("end_date") else datetime.now(UTC)
            tasks[dag_id] = {ti["task_id"]: ti for ti in stack.task_instances(dag_id, run_id)}
            answer = _answer(data_dir, dag_id, run_id) if name == "regionflow" and state == "success" else None
            runs.append({"dag_id": dag_id, "state": state, "latency_s": round((end - at).total_seconds(), 1),
                         "answer": answer, "end": end})
            _progress(f"[{name}] {dag_id}: {state} after {runs[-1]['latency_s']} s" + (f", {answer}" if answer else ""))
    start = triggered[0][2]
    makespan = round((max(r.pop("end") for r in runs) - start).total_seconds(), 1)
    deadlocked, why = _deadlock(tasks, name)
    return {"makespan_s": makespan, "runs": runs, "deadlocked": deadlocked, "why": why,
            "all_succeeded": all(r["state"] == "success" and r["answer"] in (None, "ok") for r in runs)}


def _deadlock(tasks: dict, setup: str) -> tuple[bool, str]:
    """Whether both producers held their slots at once while no consumer ran (setup 1), and why, in words."""
    if setup != "airflow":  # each run is one region task (produce__consume) holding 4 slots
        spans = [(_at(ti["start_date"]), _at(ti["end_date"])) for run in tasks.values() for ti in run.values()
                 if ti.get("start_date") and ti.get("end_date")]
        if len(spans) != 2:
            return False, f"expected one region task per run, found {len(spans)} that ran"
        overlap = max(start for start, _ in spans) < min(end for _, end in spans)
        return False, ("the two regions overlapped" if overlap
                       else "the two regions ran one after the other (each bulk of 4 slots granted whole)")
    producers = [(_at(t["produce"]["start_date"]), _at(t["produce"]["end_date"]) or time.time())
                 for t in tasks.values() if t.get("produce", {}).get("start_date")]
    consumers = [_at(t["consume"].get("start_date")) for t in tasks.values() if "consume" in t]
    if len(producers) < 2:
        return False, "a producer never started"
    both_from, first_end = max(s for s, _ in producers), min(e for _, e in producers)
    consumer_ran = any(c is not None and both_from <= c < first_end for c in consumers)
    states = {dag_id: {task: ti.get("state") for task, ti in t.items()} for dag_id, t in tasks.items()}
    if both_from < first_end and not consumer_ran:
        return True, (f"both producers held the pool's {SLOTS} slots for {first_end - both_from:.0f} s while both "
                      f"consumers waited for a slot; it ended when execution_timeout failed them: {states}")
    return False, f"no deadlock this time: {states}"


def _answer(data_dir: str, dag_id: str, run_id: str) -> str:
    import pyarrow.parquet as pq

    path = os.path.join(data_dir, "sinks", "deadlock", dag_id.rsplit("_", 1)[1], run_id)
    try:
        rows = pq.read_table(path, columns=["key", "rows", "total"]).to_pylist()
    except (OSError, ValueError) as error:
        return f"MISMATCH (sink {path}: {error})"
    found = {"keys": len({row["key"] for row in rows}), "rows": sum(row["rows"] for row in rows),
             "total": sum(row["total"] for row in rows)}
    expected = {"keys": 10, "rows": ROWS, "total": ROWS * (ROWS - 1) // 2}
    return "ok" if found == expected and len(rows) == 10 else f"MISMATCH ({found}, {len(rows)} rows != {expected})"


def _at(value: str | None) -> float | None:
    return datetime.fromisoformat(value).timestamp() if value else None


def _progress(message: str) -> None:
    print(f"{datetime.now(UTC):%H:%M:%S} {message}", file=sys.stderr, flush=True)

if __name__ == "__main__":
    sys.exit(main())
