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

from ..core.graph import JobGraph

ORDER_COUNT = int(os.environ.get("REGIONFLOW_ORDERS_COUNT", "20000"))
CUSTOMERS = 500
PRODUCTS = 60
CATEGORIES = 7
DEFAULT_SINK = "orders/totals"  # relative: resolved under the run's data dir


def generate_orders(spark, inputs, ctx):
    from pyspark.sql import functions as F

    order_id = F.col("id")
    return ctx.range(spark, ORDER_COUNT).select(
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
