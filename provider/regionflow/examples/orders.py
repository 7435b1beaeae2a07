"""The example job: daily order totals per customer and product category.

    orders(4) -FORWARD-> clean(4) -RESCALE-> enrich(2) -HASH(customer_id)-> totals(3, sink)
                         products(1) -BROADCAST-^

Each function is called once per vertex and unit with whole DataFrames (see `regionflow.spark.driver.api`);
the sources take their share of the ids with `ctx.range`.
Input data is generated deterministically from ids (no downloads); money is in integer cents so
that sums are exact whatever the partitioning, and the sink checksum is the same in every exchange
mode and in the plain reference run.
"""
from __future__ import annotations

import os
from datetime import date

from ..core.graph import JobGraph

ORDER_COUNT = int(os.environ.get("REGIONFLOW_ORDERS_COUNT", "20000"))
CUSTOMERS = 500
PRODUCTS = 60
CATEGORIES = 7
DEFAULT_SINK = "orders/totals"  # relative: resolved under the run's data dir
DAILY_SINK = "orders_daily/totals/ds={{ ds }}"  # one partition per logical date
DAILY_START = date(2026, 1, 1)  # day 0 of the daily example's orders


def generate_orders(spark, inputs, ctx):
    return _orders(ctx.range(spark, ORDER_COUNT))


def generate_daily_orders(spark, inputs, ctx):
    """The orders of the run's logical date: ``ORDER_COUNT`` orders whose ids start at day x ORDER_COUNT
    (day 0: `DAILY_START`, and a run without a logical date), so each day has its own orders."""
    from pyspark.sql import functions as F

    day = (ctx.logical_date.date() - DAILY_START).days if ctx.logical_date else 0
    return _orders(ctx.range(spark, ORDER_COUNT).select((F.col("id") + F.lit(day * ORDER_COUNT)).alias("id")))


def _orders(ids):
    from pyspark.sql import functions as F

    order_id = F.col("id")
    return ids.select(
        order_id.alias("order_id"),
        (order_id * 7919 % CUSTOMERS).alias("customer_id"),
        (order_id * 104729 % PRODUCTS).alias("product_id"),
        (order_id * 31 % 5).alias("quantity"),  # 0 marks a cancelled order
        (order_id * 17 % 1000 + 99).alias("unit_price_cents"),
    )


def generate_products(spark, inputs, ctx):
    from pyspark.sql import functions as F

    return ctx.range(spark, PRODUCTS).select(
        F.col("id").alias("product_id"),
        F.concat(F.lit("category-"), (F.col("id") % CATEGORIES).cast("string")).alias("category"),
    )


def clean_orders(spark, inputs, ctx):
    from pyspark.sql import functions as F

    orders = inputs["orders"]
    return orders.where(F.col("quantity") > 0).select(
        "order_id", "customer_id", "product_id",
        (F.col("quantity") * F.col("unit_price_cents")).alias("amount_cents"),
    )


def clean_daily_orders(spark, inputs, ctx):
    """`clean_orders`, keeping the orders of at least ``params.min_quantity`` items (default 1: every
    order that was not cancelled); a run's conf overrides it (``{"min_quantity": 3}``)."""
    from pyspark.sql import functions as F

    minimum = int(ctx.params.get("min_quantity", 1))
    return clean_orders(spark, {"orders": inputs["orders"].where(F.col("quantity") >= minimum)}, ctx)


def enrich_orders(spark, inputs, ctx):
    from pyspark.sql import functions as F

    products = F.broadcast(inputs["products"])
    return inputs["clean"].join(products, "product_id").select("customer_id", "category", "amount_cents")


def total_by_customer(spark, inputs, ctx):
    from pyspark.sql import functions as F

    return inputs["enrich"].groupBy("customer_id", "category").agg(
        F.sum("amount_cents").alias("total_cents"),
        F.count(F.lit(1)).alias("orders"),
    )


def build_job(sink: str = DEFAULT_SINK, orders_parallelism: int = 4, name: str = "orders",
              functions: dict | None = None) -> JobGraph:
    """The example job; `functions` replaces vertex functions by vertex name (tests inject faults)."""
    fns = {"orders": generate_orders, "products": generate_products, "clean": clean_orders,
           "enrich": enrich_orders, "totals": total_by_customer, **(functions or {})}
    graph = JobGraph(name)
    graph.add_vertex("orders", orders_parallelism, fn=fns["orders"])
    graph.add_vertex("products", 1, fn=fns["products"])
    graph.add_vertex("clean", orders_parallelism, fn=fns["clean"])
    graph.add_vertex("enrich", 2, fn=fns["enrich"])
    graph.add_vertex("totals", 3, fn=fns["totals"], sink=sink)
    graph.connect("orders", "clean", "forward")
    graph.connect("clean", "enrich", "rescale")
    graph.connect("products", "enrich", "broadcast")
    graph.connect("enrich", "totals", "hash", keys=["customer_id"])
    return graph.validate()


job = build_job()


def daily_job(sink: str = DAILY_SINK) -> JobGraph:
    """The job of ``dags/orders_daily.py`` (its plain reference: ``regionflow run
    regionflow.examples.orders:daily --reference --logical-date 2026-01-02``): the day's orders, the
    ``min_quantity`` param, a sink partition per logical date."""
    return build_job(sink=sink, name="orders_daily",
                     functions={"orders": generate_daily_orders, "clean": clean_daily_orders})


daily = daily_job()


def scaled_job() -> JobGraph:
    """The example at one parallelism P for every vertex but products (``REGIONFLOW_ORDERS_PARALLELISM``,
    default 4): ``benchmarks/scale.py`` runs it at P = 4 ... 1024."""
    parallelism = int(os.environ.get("REGIONFLOW_ORDERS_PARALLELISM", "4"))
    graph = JobGraph(f"orders_p{parallelism}")
    graph.add_vertex("orders", parallelism, fn=generate_orders)
    graph.add_vertex("products", 1, fn=generate_products)
    graph.add_vertex("clean", parallelism, fn=clean_orders)
    graph.add_vertex("enrich", parallelism, fn=enrich_orders)
    graph.add_vertex("totals", parallelism, fn=total_by_customer, sink=f"orders_p{parallelism}/totals")
    graph.connect("orders", "clean", "forward")
    graph.connect("clean", "enrich", "rescale")
    graph.connect("products", "enrich", "broadcast")
    graph.connect("enrich", "totals", "hash", keys=["customer_id"])
    return graph.validate()


def count_per_customer(spark, inputs, ctx):
    """Orders per customer of whatever single input the vertex has (for small scheduling examples)."""
    (frame,) = inputs.values()
    return frame.groupBy("customer_id").count()
