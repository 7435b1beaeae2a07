"""Example DAG: daily order totals per customer and category, on Spark, scheduled by regionflow.

    orders(4) -FORWARD-> clean(4) -RESCALE-> enrich(2) -HASH(customer_id)-> totals(3, sink)
                         products(1) -BROADCAST-^

A daily DAG: `orders` generates the orders of the run's logical date (``ctx.logical_date``), `clean` keeps
the orders of at least ``params.min_quantity`` items (a run's conf may override it), and `totals` writes
one partition per day, ``orders_daily/totals/ds={{ ds }}`` (a templated sink, rendered when its region task
runs), so runs of different days (a backfill, ``airflow backfill create --dag-id orders_daily ...``) write
side by side and a rerun of a day replaces only that day's partition.

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

with DAG("orders_daily", schedule="@daily", start_date=datetime(2026, 1, 1), catchup=False, max_active_runs=2,
         params={"min_quantity": 1}, tags=["regionflow", "example"]) as dag:
    orders = SparkVertexOperator(task_id="orders", parallelism=4, fn=job.generate_daily_orders)
    products = SparkVertexOperator(task_id="products", parallelism=1, fn=job.generate_products)
    clean = SparkVertexOperator(task_id="clean", parallelism=4, fn=job.clean_daily_orders)
    enrich = SparkVertexOperator(task_id="enrich", parallelism=2, fn=job.enrich_orders)
    totals = SparkVertexOperator(task_id="totals", parallelism=3, fn=job.total_by_customer,
                                 sink="orders_daily/totals/ds={{ ds }}")

    orders >> forward() >> clean >> rescale() >> enrich >> hash_by("customer_id") >> totals
    products >> broadcast() >> enrich

regionflow.transform(dag, mode=MODE)
