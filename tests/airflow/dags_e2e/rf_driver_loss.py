"""The example job, all-pipelined (one region, so one Airflow task and one Spark application per try),
with retries; its sink vertex `totals` pauses 6 s in the driver before building its DataFrame: a window
in which a test kills the attempt's Spark driver (kill -9)."""
import time
from datetime import datetime, timedelta

from airflow.sdk import DAG

import regionflow
from regionflow.examples import orders as job
from regionflow.operators import SparkVertexOperator, broadcast, forward, hash_by, rescale

PAUSE_S = 6.0


def paused_totals(spark, inputs, ctx):
    time.sleep(PAUSE_S)
    return job.total_by_customer(spark, inputs, ctx)


with DAG("orders_driver_loss", schedule=None, start_date=datetime(2026, 1, 1), catchup=False,
         default_args={"retries": 1, "retry_delay": timedelta(seconds=1)}) as orders_driver_loss:
    orders = SparkVertexOperator(task_id="orders", parallelism=4, fn=job.generate_orders)
    products = SparkVertexOperator(task_id="products", parallelism=1, fn=job.generate_products)
    clean = SparkVertexOperator(task_id="clean", parallelism=4, fn=job.clean_orders)
    enrich = SparkVertexOperator(task_id="enrich", parallelism=2, fn=job.enrich_orders)
    totals = SparkVertexOperator(task_id="totals", parallelism=3, fn=paused_totals,
                                 sink="e2e/orders_driver_loss/totals")
    orders >> forward() >> clean >> rescale() >> enrich >> hash_by("customer_id") >> totals
    products >> broadcast() >> enrich
regionflow.transform(orders_driver_loss, mode="all-pipelined")
