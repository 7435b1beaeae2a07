"""Jobs used by the Spark runtime tests: the example job with a fault injected.

Importable by name inside spark-submit (the runner zips this module into --py-files)."""
import time

from regionflow.examples import orders


def clean_slowly_in_first_attempt(spark, inputs, ctx):
    """Like the example's clean, but the first attempt of clean#0 crawls, so it can be killed mid-write."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType

    frame = orders.clean_orders(spark, inputs, ctx)
    if ctx.attempt_id.startswith("a1-") and ctx.subtask_index == 0:
        crawl = F.udf(lambda value: (time.sleep(0.003), value)[1], LongType())
        frame = frame.withColumn("order_id", crawl("order_id"))
    return frame


def clean_that_raises(spark, inputs, ctx):
    if ctx.subtask_index == 1:
        raise ValueError(f"negative amount in order {ctx.subtask_index * 1000 + 42}")
    return orders.clean_orders(spark, inputs, ctx)


def slow_job():
    return orders.build_job(sink="fault/totals", name="orders_fault",
                            functions={"clean": clean_slowly_in_first_attempt})


def raising_job():
    return orders.build_job(sink="raising/totals", name="orders_raising", functions={"clean": clean_that_raises})
