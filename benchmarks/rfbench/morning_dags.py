"""The DAG files and the answers of ``benchmarks/morning.py`` (issue 47's headline benchmark).

The morning's work is five DAGs: the daily orders DAG (`regionflow.examples.orders.daily_job`) and TPC-H
Q1, Q3, Q9 and Q18 (`regionflow.examples.tpch.build_job`), each at its own parallelism so that big and
small regions compete for the cluster's slots. Each setup gets one DAG file holding the five DAGs, written
the way its users would write it, and calling the same vertex functions:

- setup 1 (Airflow today, shared Spark): one PythonOperator per vertex, in Airflow's pool ``spark`` (sized
  to the cluster's slots) with ``pool_slots`` = the vertex's parallelism; each task opens a session on the
  team's long-lived Spark Connect server through the official Spark provider's ``spark_connect`` connection
  (`SparkConnectHook`), reads its upstream vertices' Parquet, and writes its own output as Parquet under a
  directory per DAG run. pyspark sends a connection's token only over TLS or to the name ``localhost``;
  on one machine a team connects to a loopback server with ``regionflow.spark.servers.auth.remote_session``
  (a public helper: a loopback channel that presents the token), which is what the tasks do here.
- setup 2 (Airflow today, one submission per task): the same tasks as setup 1, each a ``SparkSubmitOperator``
  of the official provider submitting ``morning_vertex.py`` (one vertex, classic PySpark, Parquet in and out)
  to ``local[p]`` through a ``spark`` connection per parallelism p (``spark_local_<p>``), in the same pool.
- setup 3 (regionflow): one SparkVertexOperator per vertex, the edges as regionflow exchanges, and
  ``regionflow.transform(dag, mode=..., max_shards=1)`` with the setup's mode per DAG (`SETUP_MODES`):
  ``regionflow_blocking`` is all-blocking (one region task per vertex, whose bulk of ``parallelism`` slots the
  RegionExecutor grants: the strict comparison, the same tasks as setup 1), ``regionflow`` each DAG's best mode
  (`BEST_MODES`).

The DAGs are built from the example jobs' graphs (their vertices, parallelism and edges), so both setups run
exactly the same graph.
"""
from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import datetime
from typing import Any

SINK_ROOT = "morning"  # setup 3's sinks: <data_dir>/sinks/morning/<dag_id>/<run_id>

# dag_id -> (job, parallelism): "orders" keeps the example's own parallelism (4, 1, 4, 2, 3)
DAGS: dict[str, tuple[str, int]] = {
    "morning_orders": ("orders", 0),
    "morning_q1": ("q1", 4),
    "morning_q3": ("q3", 2),
    "morning_q9": ("q9", 1),
    "morning_q18": ("q18", 3),
}

# each DAG's best exchange mode: every one of these jobs fits the cluster's 4 slots as one pipelined region (with
# slot sharing a region needs its widest vertex's parallelism: 4, 4, 2, 1, 3), so the whole DAG is one region
# task, one Spark job, and nothing is written between its vertices (checked by `check_modes`)
BEST_MODES: dict[str, str] = {dag_id: "all-pipelined" for dag_id in DAGS}
SETUP_MODES: dict[str, dict[str, str]] = {
    "regionflow_blocking": {dag_id: "all-blocking" for dag_id in DAGS},
    "regionflow": BEST_MODES,
}

# the --quick morning: (dag_id, logical date or None), triggered in this order
QUICK_RUNS: list[tuple[str, str | None]] = [
    ("morning_orders", "2026-01-02"), ("morning_q9", None), ("morning_q1", None),
    ("morning_q18", None), ("morning_orders", "2026-01-03"), ("morning_q3", None),
]
# the full morning (issue 47): 20 runs, each TPC-H DAG four times, the orders DAG for four days; the quick
# morning first, then the rest interleaved so that big and small runs keep arriving together
FULL_RUNS: list[tuple[str, str | None]] = QUICK_RUNS + [
    ("morning_q9", None), ("morning_orders", "2026-01-04"), ("morning_q1", None), ("morning_q18", None),
    ("morning_q3", None), ("morning_q9", None), ("morning_q1", None), ("morning_orders", "2026-01-05"),
    ("morning_q18", None), ("morning_q3", None), ("morning_q9", None), ("morning_q1", None),
    ("morning_q18", None), ("morning_q3", None),
]

# what every setup's program needs: the DAGs' jobs, and (setups 1 and 2) one vertex run on a SparkSession
_JOBS = '''
import os
from datetime import datetime

from regionflow.examples import orders, tpch

DAGS = {dags!r}


def job(dag_id, sink):
    """The example job a DAG runs, at its parallelism, its sink at `sink`."""
    name, parallelism = DAGS[dag_id]
    if name == "orders":
        return orders.daily_job(sink=sink)
    return tpch.build_job(int(name[1:]), parallelism, sink=sink, name=dag_id)


class VertexContext:
    """What the example functions ask of their `ctx`: the run's values, and the whole input (one task)."""

    def __init__(self, vertex, parallelism, logical_date, params=None):
        self.vertex, self.parallelism, self.logical_date = vertex, parallelism, logical_date
        self.params = dict(params or {{}})
        self.whole = True

    def range(self, spark, total):
        return spark.range(0, total, numPartitions=self.parallelism)

    def share(self, frame, *columns):
        return frame


def run_vertex_on(spark, dag_id, run_id, vertex, upstream, parallelism, logical_date, params=None):
    """One vertex of a run as a task per vertex runs it: its upstream vertices' Parquet in, its output as Parquet
    (the sink's under sinks/, the others' under the run's work dir of $MORNING_DATA_DIR)."""
    data = os.environ["MORNING_DATA_DIR"]
    run_dir = os.path.join(data, "work", dag_id, run_id)
    spec = job(dag_id, "unused").vertices[vertex]
    inputs = {{name: spark.read.parquet(os.path.join(run_dir, name)) for name in upstream}}
    frame = spec.resolve_fn()(spark, inputs, VertexContext(vertex, parallelism, logical_date, params))
    path = os.path.join(data, "sinks", dag_id, run_id) if spec.sink is not None else os.path.join(run_dir, vertex)
    frame.write.mode("overwrite").parquet(path)
'''

_PRELUDE = _JOBS + '''
from airflow.sdk import DAG


def task_per_vertex(task_for):
    """Setups 1 and 2: one DAG per job, a task per vertex (`task_for(dag_id, name, vertex, upstream names)`)
    and the job's edges as the tasks' dependencies."""
    for dag_id in DAGS:
        graph = job(dag_id, "unused")
        with DAG(dag_id, schedule=None, start_date=datetime(2026, 1, 1), catchup=False, max_active_tasks=32,
                 max_active_runs=16) as dag:
            tasks = {{name: task_for(dag_id, name, vertex, [edge.src for edge in graph.edges if edge.dst == name])
                     for name, vertex in graph.vertices.items()}}
            for edge in graph.edges:
                tasks[edge.src] >> tasks[edge.dst]
        globals()[dag_id] = dag
'''

AIRFLOW_DAGS = '''"""Setup 1 of benchmarks/morning.py: Airflow today, on a shared long-lived Spark Connect server."""
from urllib.parse import unquote

from airflow.providers.standard.operators.python import PythonOperator
''' + _PRELUDE + '''
CONN_ID = "spark_morning"
POOL = "spark"


def spark_session(parallelism):
    """A session on the team's Spark Connect server, from the provider's connection URL."""
    from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook

    from regionflow.spark.servers.auth import remote_session

    base, _, params = SparkConnectHook(CONN_ID).get_connection_url().partition("/;")
    values = dict(item.split("=", 1) for item in params.split(";") if "=" in item)
    spark = remote_session(base, unquote(values["token"]) if "token" in values else None)
    spark.conf.set("spark.sql.shuffle.partitions", str(max(2, 2 * parallelism)))
    return spark


def run_vertex(vertex, upstream, parallelism, **context):
    spark = spark_session(parallelism)
    try:
        run_vertex_on(spark, context["dag"].dag_id, context["run_id"], vertex, upstream, parallelism,
                      context.get("logical_date"), context.get("params"))
    finally:
        spark.stop()


task_per_vertex(lambda dag_id, name, vertex, upstream: PythonOperator(
    task_id=name, python_callable=run_vertex, pool=POOL, pool_slots=vertex.parallelism,
    op_kwargs={{"vertex": name, "upstream": upstream, "parallelism": vertex.parallelism}}))
'''

SUBMIT_DAGS = '''"""Setup 2 of benchmarks/morning.py: Airflow today, one Spark submission per task."""
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
''' + _PRELUDE + '''
POOL = "spark"
RUNNER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "morning_vertex.py")


def submit_task(dag_id, name, vertex, upstream):
    p = vertex.parallelism
    return SparkSubmitOperator(
        task_id=name, application=RUNNER, conn_id=f"spark_local_{{p}}", pool=POOL, pool_slots=p,
        name=f"{{dag_id}}.{{name}}", application_args=[
            dag_id, name, "{{{{ run_id }}}}", ",".join(upstream) or "-", str(p),
            "{{{{ dag_run.logical_date.isoformat() if dag_run.logical_date else '-' }}}}"],
        conf={{"spark.sql.shuffle.partitions": str(max(2, 2 * p)), "spark.ui.enabled": "false"}})


task_per_vertex(submit_task)
'''

# the program each setup-2 task submits: one vertex, classic PySpark, Parquet in and out as in setup 1
VERTEX_RUNNER = '''"""One vertex of a morning DAG as a Spark application (setup 2 of benchmarks/morning.py)."""
import sys

from pyspark.sql import SparkSession
''' + _JOBS + '''

def main(dag_id, vertex, run_id, upstream, parallelism, logical_date):
    spark = SparkSession.builder.getOrCreate()
    try:
        run_vertex_on(spark, dag_id, run_id, vertex, [name for name in upstream.split(",") if name != "-"],
                      int(parallelism), None if logical_date == "-" else datetime.fromisoformat(logical_date))
    finally:
        spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:7])
'''

REGIONFLOW_DAGS = '''"""Setup 3 of benchmarks/morning.py: regionflow, each DAG in its exchange mode (MODES)."""
import regionflow
from regionflow.operators import SparkVertexOperator, broadcast, forward, hash_by, rebalance, rescale
''' + _PRELUDE + '''
MODES = {modes!r}
EXCHANGES = {{"forward": forward, "rescale": rescale, "rebalance": rebalance, "broadcast": broadcast}}

for dag_id in DAGS:
    graph = job(dag_id, "{sink_root}/" + dag_id + "/{{{{ run_id }}}}")
    with DAG(dag_id, schedule=None, start_date=datetime(2026, 1, 1), catchup=False, max_active_tasks=32,
             max_active_runs=16) as dag:
        ops = {{name: SparkVertexOperator(task_id=name, parallelism=vertex.parallelism, fn=vertex.fn,
                                          sink=vertex.sink.path if vertex.sink else None)
               for name, vertex in graph.vertices.items()}}
        for edge in graph.edges:
            kind = edge.distribution.value
            ops[edge.src] >> (hash_by(*edge.keys) if kind == "hash" else EXCHANGES[kind]()) >> ops[edge.dst]
    regionflow.transform(dag, mode=MODES[dag_id], max_shards=1)
    globals()[dag_id] = dag
'''


def write_dags(folder: str, setup: str) -> str:
    """Write the five DAGs of `setup` ("airflow", "airflow_submit" or a key of `SETUP_MODES`) into `folder`
    (setup 2 also its vertex program, ``morning_vertex.py``, which the DAG processor does not load: no DAG in it);
    return the DAG file's path."""
    os.makedirs(folder, exist_ok=True)
    template = {"airflow": AIRFLOW_DAGS, "airflow_submit": SUBMIT_DAGS}.get(setup, REGIONFLOW_DAGS)
    if setup == "airflow_submit":
        with open(os.path.join(folder, "morning_vertex.py"), "w", encoding="utf-8") as handle:
            handle.write(VERTEX_RUNNER.format(dags=DAGS))
    path = os.path.join(folder, f"morning_{setup}.py")
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(template.format(dags=DAGS, sink_root=SINK_ROOT, modes=SETUP_MODES.get(setup, {})))
    return path


def graph_of(dag_id: str):
    """The job graph a morning DAG runs (its sink path unused)."""
    from regionflow.examples import orders, tpch

    name, parallelism = DAGS[dag_id]
    if name == "orders":
        return orders.daily_job(sink="unused")
    return tpch.build_job(int(name[1:]), parallelism, sink="unused", name=dag_id)


def subtasks(dag_id: str) -> int:
    """How many subtasks a DAG's job has (the sum of its vertices' parallelism): the size of its run."""
    return sum(vertex.parallelism for vertex in graph_of(dag_id).vertices.values())


def check_modes(setup: str, slots: int) -> list[str]:
    """What is wrong with `setup`'s modes on a cluster of `slots` slots: a region that needs more (empty: fine)."""
    from regionflow.core.plan import Plan

    problems = []
    for dag_id, mode in SETUP_MODES.get(setup, {}).items():
        plan = Plan(graph_of(dag_id), mode)
        widest = max(plan.slots(region) for region in plan.regions)
        if widest > slots:
            problems.append(f"{dag_id} in mode {mode} has a region of {widest} slots, more than the cluster's {slots}")
    return problems


def sink_path(setup: str, data_dir: str, dag_id: str, run_id: str) -> str:
    """Where a run's sink lands under `setup`."""
    if setup in ("airflow", "airflow_submit"):
        return os.path.join(data_dir, "sinks", dag_id, run_id)
    return os.path.join(data_dir, "sinks", SINK_ROOT, dag_id, run_id)


ORDERS_COLUMNS = ("customer_id", "category", "total_cents", "orders")


def orders_references(days: Sequence[str | None], work_dir: str) -> dict[str | None, list[tuple]]:
    """The orders DAG's totals for each of `days`, from the project's reference: the same vertex functions as
    one plain PySpark program (`run_reference`, the DAG's default params), on a Spark Connect server of its own;
    (customer_id, category, total_cents, orders) rows, sorted."""
    from regionflow.core.graph import load_job
    from regionflow.core.plan import Plan
    from regionflow.core.run_context import cli_context
    from regionflow.scheduling.hosts import Cluster
    from regionflow.spark.servers.session_servers import SessionServers
    from regionflow.units.reference import run_reference
    from regionflow.units.runner import RunOptions

    job = "regionflow.examples.orders:daily"
    servers = SessionServers(Cluster.local_default(2), os.path.join(work_dir, "sessions"), base_port=None)
    servers.start()
    try:
        references = {}
        for day in dict.fromkeys(days):
            options = RunOptions(data_dir=work_dir, cluster=servers.cluster, progress=None, servers=servers,
                                 context=cli_context(day, None, [], dag_id="orders_daily"))
            summary = run_reference(job, Plan(load_job(job)), options)
            references[day] = _orders_rows(summary.sinks["totals"]["path"])
        return references
    finally:
        servers.stop()


def _orders_rows(path: str) -> list[tuple]:
    import pyarrow.parquet as pq

    table = pq.read_table(path, columns=list(ORDERS_COLUMNS))
    return sorted(tuple(row[c] for c in ORDERS_COLUMNS) for row in table.to_pylist())


def check_run(dag_id: str, logical_date: str | None, path: str, sf: float,
              orders: dict[str | None, list[tuple]]) -> str:
    """"ok", or what is wrong with the sink of one run at `path` (`orders`: `orders_references`)."""
    from rfbench import tpch_data

    name, _ = DAGS[dag_id]
    try:
        if name == "orders":
            rows = _orders_rows(path)
            expected = orders[logical_date]
            if rows == expected:
                return "ok"
            first = next((i for i, (a, b) in enumerate(zip(rows, expected, strict=False)) if a != b),
                         min(len(rows), len(expected)))
            return f"MISMATCH ({len(rows)} rows, {len(expected)} expected; they differ from row {first})"
        query = int(name[1:])
        columns, rows = tpch_data.read_result(path, query)
        difference = tpch_data.check_answer(query, sf, rows, columns)
        return "ok" if difference is None else f"MISMATCH ({difference})"
    except OSError as error:
        return f"MISMATCH (sink {path} unreadable: {error})"


def logical_date_iso(day: str | None) -> str | None:
    return datetime.fromisoformat(day).strftime("%Y-%m-%dT00:00:00Z") if day else None


def runs_for(quick: bool) -> Sequence[tuple[str, str | None]]:
    return QUICK_RUNS if quick else FULL_RUNS


__all__: list[Any] = ["BEST_MODES", "DAGS", "SETUP_MODES", "check_modes", "check_run", "graph_of", "orders_references",
                     "runs_for", "sink_path", "subtasks", "write_dags"]
