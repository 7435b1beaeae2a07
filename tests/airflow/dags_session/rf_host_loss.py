"""The example job (all-blocking) with retries, whose source vertex `orders` pauses 4 s in its driver
code before building its DataFrame: a window in which a test kills the host's Spark Connect server."""
import time
from datetime import datetime, timedelta

from airflow.sdk import DAG

import regionflow
from regionflow.examples import orders as job
from regionflow.operators import SparkVertexOperator, broadcast, forward, hash_by, rescale

PAUSE_S = 4.0


def paused_orders(spark, inputs, ctx):
    time.sleep(PAUSE_S)
    return job.generate_orders(spark, inputs, ctx)


with DAG("orders_host_loss", schedule=None, start_date=datetime(2026, 1, 1), catchup=False,
         default_args={"retries": 1, "retry_delay": timedelta(seconds=1)}) as orders_host_loss:
    orders = SparkVertexOperator(task_id="orders", parallelism=4, fn=paused_orders)
    products = SparkVertexOperator(task_id="products", parallelism=1, fn=job.generate_products)
    clean = SparkVertexOperator(task_id="clean", parallelism=4, fn=job.clean_orders)
    enrich = SparkVertexOperator(task_id="enrich", parallelism=2, fn=job.enrich_orders)
    totals = SparkVertexOperator(task_id="totals", parallelism=3, fn=job.total_by_customer,
                                 sink="e2e/orders_host_loss/totals")
    orders >> forward() >> clean >> rescale() >> enrich >> hash_by("customer_id") >> totals
    products >> broadcast() >> enrich
regionflow.transform(orders_host_loss, mode="all-blocking")
