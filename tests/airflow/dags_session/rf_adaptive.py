"""Adaptive parallelism decided at grant time through Airflow. adaptive_at_grant: orders (2 subtasks) hashed,
blocking, to `per_customer`, declared [1, 8] with 1 GiB per subtask. The DAG is planned for the cluster's 4
slots (per_customer=4); when its region task is granted, it reads a few KB and runs as one subtask.
elastic_at_grant and adaptive_per_run: below."""
from datetime import datetime, timedelta

from airflow.providers.standard.operators.python import PythonOperator
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


def products_slowly(spark, inputs, ctx):
    """The example's products, after holding the region's 3 slots for 25 s (in the driver)."""
    import time

    time.sleep(25.0)
    return job.generate_products(spark, inputs, ctx)


def pause():
    import time

    time.sleep(3.0)


# elastic_at_grant: `hold` (3 subtasks) and the plain `pause` task (a slot of its own) start together and
# fill the 4 slots; `orders`, adaptive [1, 4] and planned at 4, is queued when `pause` ends. Its full request
# waits for `hold`, alone in the queue; after [regionflow] elastic_wait the RegionExecutor admits it again
# with the one free slot, and it runs as one subtask while `hold` still runs.
with DAG("elastic_at_grant", schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as elastic_at_grant:
    SparkVertexOperator(task_id="hold", parallelism=3, fn=products_slowly, sink="e2e/elastic_at_grant/hold")
    elastic_orders = SparkVertexOperator(task_id="orders", parallelism=(1, 4), fn=job.generate_orders,
                                         sink="e2e/elastic_at_grant/orders")
    PythonOperator(task_id="pause", python_callable=pause) >> elastic_orders
regionflow.transform(elastic_at_grant, mode="all-pipelined")


def orders_of_run(spark, inputs, ctx):
    """``params["orders"]`` of the example's orders (the DAG's default, or the run's conf)."""
    from pyspark.sql import functions as F

    order_id = F.col("id")
    return ctx.range(spark, int(ctx.params["orders"])).select(
        order_id.alias("order_id"), (order_id * 7919 % job.CUSTOMERS).alias("customer_id"),
        (order_id * 104729 % job.PRODUCTS).alias("product_id"), (order_id * 31 % 5).alias("quantity"),
        (order_id * 17 % 1000 + 99).alias("unit_price_cents"))


FAILING_ORDERS = 70000  # the run whose mapped shard 1 fails its first try


def count_failing_once(spark, inputs, ctx):
    """The example's count per customer; in a run of FAILING_ORDERS orders, mapped shard 1 fails its first try,
    so that its retry, a new try of the same map index, must read the same key groups for the counts to hold."""
    if int(ctx.params["orders"]) == FAILING_ORDERS and ctx.map_index == 1 and ctx.try_number == 1:
        raise RuntimeError("shard 1 fails its first try on purpose")
    return job.count_per_customer(spark, inputs, ctx)


# adaptive_per_run: per_customer, declared [1, 8] with 64 KiB per subtask, is cut into shards (max_shards 8), so
# its parallelism is decided per run by its decision task, from the bytes `orders` wrote (by key group), and its
# shards are mapped over the decision: 2 for the default 8,000 orders (about 84 KB), 6 for 70,000 (about 360 KB).
with DAG("adaptive_per_run", schedule=None, start_date=datetime(2026, 1, 1), catchup=False,
         params={"orders": 8000}, default_args={"retries": 1, "retry_delay": timedelta(seconds=1)}) \
        as adaptive_per_run:
    run_orders = SparkVertexOperator(task_id="orders", parallelism=2, fn=orders_of_run)
    run_per_customer = SparkVertexOperator(task_id="per_customer", parallelism=(1, 8), fn=count_failing_once,
                                           target_bytes_per_subtask=64 << 10,
                                           sink="e2e/adaptive_per_run/orders={{ params.orders }}")
    run_orders >> hash_by("customer_id") >> run_per_customer
regionflow.transform(adaptive_per_run, mode="all-blocking", max_shards=8)
