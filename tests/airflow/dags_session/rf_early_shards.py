"""Per-partition-group readiness: `source` (2 subtasks, 2 shards) FORWARD, blocking, into `copy` (2
subtasks, 2 shards, a sink). Shard 1 of the source pauses `PAUSE_S` in its driver code, so `copy[0]`,
which reads only `source[0]`'s partitions, can run and commit while `source[1]` still runs. In
`early_shards_broken` the source's subtask 1 raises instead: `copy[1]` fails naming it, `copy[0]` succeeds."""
import time
from datetime import datetime

from airflow.sdk import DAG

import regionflow
from regionflow.examples import orders as job
from regionflow.operators import SparkVertexOperator, forward

PAUSE_S = 45.0


def slow_second_shard(spark, inputs, ctx):
    if 1 in ctx.subtasks:
        time.sleep(PAUSE_S)
    return job.generate_orders(spark, inputs, ctx)


def broken_second_shard(spark, inputs, ctx):
    if 1 in ctx.subtasks:
        raise ValueError("source subtask 1 is broken on purpose")
    return job.generate_orders(spark, inputs, ctx)


def copy_orders(spark, inputs, ctx):
    return inputs["source"]


def early_shards_dag(dag_id, source_fn):
    with DAG(dag_id, schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as dag:
        source = SparkVertexOperator(task_id="source", parallelism=2, fn=source_fn)
        copy = SparkVertexOperator(task_id="copy", parallelism=2, fn=copy_orders, sink=f"e2e/{dag_id}/orders")
        source >> forward(exchange="blocking") >> copy
    regionflow.transform(dag, mode="all-blocking", max_shards=2)
    return dag


early_shards = early_shards_dag("early_shards", slow_second_shard)
early_shards_broken = early_shards_dag("early_shards_broken", broken_second_shard)
