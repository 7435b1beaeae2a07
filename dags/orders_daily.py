"""Example DAG: daily order totals per customer and category, on Spark, scheduled by regionflow.

    orders(4) -FORWARD-> clean(4) -RESCALE-> enrich(2) -HASH(customer_id)-> totals(3, sink)
                         products(1) -BROADCAST-^

`regionflow.transform` replaces the vertex operators by one task per pipelined region (named after
its vertices); with `[core] executor = regionflow.executors.RegionExecutor` each region task waits for
all of its slots in the FIFO bulk pool, then runs as one Spark submission.
"""
import os
from datetime import datetime

from airflow.sdk import DAG

import regionflow
from regionflow.examples import orders as job
from regionflow.operators import SparkVertexOperator, broadcast, forward, hash_by, rescale

MODE = os.environ.get("REGIONFLOW_EXAMPLE_MODE", "pointwise-pipelined-only")

with DAG("orders_daily", schedule=None, start_date=datetime(2026, 1, 1), catchup=False,
         tags=["regionflow", "example"]) as dag:
    orders = SparkVertexOperator(task_id="orders", parallelism=4, fn=job.generate_orders)
    products = SparkVertexOperator(task_id="products", parallelism=1, fn=job.generate_products)
    clean = SparkVertexOperator(task_id="clean", parallelism=4, fn=job.clean_orders)
    enrich = SparkVertexOperator(task_id="enrich", parallelism=2, fn=job.enrich_orders)
    totals = SparkVertexOperator(task_id="totals", parallelism=3, fn=job.total_by_customer,
                                 sink="orders_daily/totals")

    orders >> forward() >> clean >> rescale() >> enrich >> hash_by("customer_id") >> totals
    products >> broadcast() >> enrich

regionflow.transform(dag, mode=MODE)
