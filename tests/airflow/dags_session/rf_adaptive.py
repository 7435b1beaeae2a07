"""Adaptive parallelism decided at grant time through Airflow: orders (2 subtasks) hashed, blocking, to
`per_customer`, declared [1, 8] with 1 GiB per subtask. The DAG is planned for the cluster's 4 slots
(per_customer=4); when its region task is granted, it reads a few KB and runs as one subtask."""
from datetime import datetime

from airflow.sdk import DAG

import regionflow
from regionflow.examples import orders as job
from regionflow.operators import SparkVertexOperator, hash_by

with DAG("adaptive_at_grant", schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as adaptive_at_grant:
    orders = SparkVertexOperator(task_id="orders", parallelism=2, fn=job.generate_orders)
    per_customer = SparkVertexOperator(task_id="per_customer", parallelism=(1, 8), fn=job.count_per_customer,
                                       target_bytes_per_subtask=1 << 30, sink="e2e/adaptive_at_grant/per_customer")
    orders >> hash_by("customer_id") >> per_customer
regionflow.transform(adaptive_at_grant, mode="all-blocking")
