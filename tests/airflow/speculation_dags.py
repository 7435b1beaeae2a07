"""The DAG of the speculation tests (test_speculation_transform.py, test_speculation_sensor.py): the
orders example as Airflow tasks, transformed with speculation on or off."""
from __future__ import annotations

from datetime import datetime

from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG

import regionflow
from regionflow.examples import orders as job
from regionflow.operators import SparkVertexOperator, broadcast, forward, hash_by, rescale


def example(config, speculation=True, speculation_config=None, clean_flag=None, dag_id="orders_spec",
            totals_external=False):
    with DAG(dag_id, schedule=None, start_date=datetime(2026, 1, 1)) as dag:
        start = EmptyOperator(task_id="start")
        orders = SparkVertexOperator(task_id="orders", parallelism=4, fn=job.generate_orders)
        products = SparkVertexOperator(task_id="products", parallelism=1, fn=job.generate_products)
        clean = SparkVertexOperator(task_id="clean", parallelism=4, fn=job.clean_orders, speculation=clean_flag)
        enrich = SparkVertexOperator(task_id="enrich", parallelism=2, fn=job.enrich_orders)
        totals = SparkVertexOperator(task_id="totals", parallelism=3, fn=job.total_by_customer, sink="t",
                                     external_writes=totals_external)
        start >> orders >> forward() >> clean >> rescale() >> enrich >> hash_by("customer_id") >> totals
        products >> broadcast() >> enrich
    result = regionflow.transform(dag, mode="pointwise-pipelined-only", config=config, speculation=speculation,
                                  speculation_config=speculation_config)
    return dag, result
