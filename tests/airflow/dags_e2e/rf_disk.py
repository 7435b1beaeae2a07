"""A small blocking job for the disk test: orders(2) -HASH(customer_id)-> counts(2, sink), two region
tasks per run, so fifty runs stay cheap."""
from datetime import datetime

from airflow.sdk import DAG

import regionflow
from regionflow.examples import orders as job
from regionflow.operators import SparkVertexOperator, hash_by

with DAG("disk_runs", schedule=None, start_date=datetime(2026, 1, 1), catchup=False, max_active_runs=50) as dag:
    orders = SparkVertexOperator(task_id="orders", parallelism=2, fn=job.generate_orders)
    counts = SparkVertexOperator(task_id="counts", parallelism=2, fn=job.count_per_customer, sink="disk/counts")
    orders >> hash_by("customer_id") >> counts
regionflow.transform(dag, mode="all-blocking")
