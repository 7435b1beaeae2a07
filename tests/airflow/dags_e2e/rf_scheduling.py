"""Small DAGs for the executor's scheduling behaviour on a 4-slot cluster."""
import time
from datetime import datetime

from airflow.providers.standard.operators.python import PythonOperator
from airflow.sdk import DAG, cross_downstream

import regionflow
from regionflow.examples import orders as job
from regionflow.operators import SparkVertexOperator, hash_by


def count_orders_here(spark, inputs, ctx):
    """Defined in the DAG file, so the Spark driver has to load this DAG file to find it."""
    (frame,) = inputs.values()
    return frame.groupBy("customer_id").count()


def pause(seconds):
    time.sleep(seconds)


def whole_cluster_dag(dag_id: str, parallelism: int, count_fn):
    """One region of `parallelism` slots: a source hash-partitioned, pipelined, into a counter."""
    with DAG(dag_id, schedule=None, start_date=datetime(2026, 1, 1), catchup=False, max_active_runs=4) as dag:
        source = SparkVertexOperator(task_id="source", parallelism=parallelism, fn=job.generate_orders)
        count = SparkVertexOperator(task_id="count", parallelism=parallelism, fn=count_fn,
                                    sink=f"e2e/{dag_id}/counts")
        source >> hash_by("customer_id", exchange="pipelined") >> count
    regionflow.transform(dag, mode="all-pipelined")
    return dag


whole_cluster = whole_cluster_dag("whole_cluster", 4, job.count_per_customer)
too_big = whole_cluster_dag("too_big", 5, job.count_per_customer)
big_after_stream = whole_cluster_dag("big_after_stream", 4, count_orders_here)

with DAG("stream", schedule=None, start_date=datetime(2026, 1, 1), catchup=False, max_active_tasks=64) as stream:
    previous = None
    for wave in range(5):
        tasks = [PythonOperator(task_id=f"w{wave}_{i}", python_callable=pause, op_args=[4]) for i in range(4)]
        if previous:
            cross_downstream(previous, tasks)
        previous = tasks

with DAG("too_big_later", schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as too_big_later:
    # a 1-slot first region, then a pipelined region of 5 slots: the run cannot finish on 4 slots
    source = SparkVertexOperator(task_id="source", parallelism=1, fn=job.generate_orders)
    spread = SparkVertexOperator(task_id="spread", parallelism=5, fn=job.count_per_customer)
    count = SparkVertexOperator(task_id="count", parallelism=5, fn=job.count_per_customer,
                                sink="e2e/too_big_later/counts")
    source >> hash_by("customer_id", exchange="blocking") >> spread
    spread >> hash_by("customer_id", exchange="pipelined") >> count
regionflow.transform(too_big_later, mode="all-blocking")
