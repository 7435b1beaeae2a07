"""The vertex functions of the TPC-H example jobs (`tpch`, which wires them into jobs): one per scan (with
its filter), join and aggregation, and a final one per query that orders (and limits) the rows. Each
imports PySpark inside, so the module imports without it."""
from __future__ import annotations

import datetime

from .tpch_tables import COLUMNS, LIMIT, ORDER_BY, read_table


def _date(text: str):
    from pyspark.sql import functions as F

    return F.lit(datetime.date.fromisoformat(text))


def _revenue(price: str = "l_extendedprice", discount: str = "l_discount"):
    """``price * (1 - discount)`` as an exact decimal."""
    from pyspark.sql import functions as F

    return F.col(price) * (F.lit(1) - F.col(discount))


def _average_of(total, count, scale: int = 2):
    """An average of DECIMAL(_, `scale`) values as a double from their exact sum `total` and their
    `count` (Columns): divided once, rounded once (as DuckDB does), not Spark's decimal average."""
    from pyspark.sql import functions as F

    unit = 10 ** scale
    exact = (total * F.lit(unit)).cast("long").cast("double")
    return exact / (count * F.lit(unit)).cast("double")


def _ordered(frame, query: int):
    """The final vertex's rows: ordered by the query's ORDER BY, limited, in one partition."""
    from pyspark.sql import functions as F

    order = [F.col(name).desc() if descending else F.col(name).asc() for name, descending in ORDER_BY[query]]
    frame = frame.select(*COLUMNS[query])
    if query in LIMIT:
        return frame.orderBy(*order).limit(LIMIT[query])
    return frame.coalesce(1).sortWithinPartitions(*order)


# ---- Q1: pricing summary report ------------------------------------------------------------------------


def q1_lineitem(spark, inputs, ctx):
    """Line items shipped by 1998-09-02, aggregated locally per return flag and line status (the
    first phase of a two-phase aggregation, as Flink's planner chains a local aggregate to the scan:
    the HASH edge then carries a few rows per call instead of every line item)."""
    from pyspark.sql import functions as F

    lineitem = read_table(spark, "lineitem", ctx, "l_orderkey")
    disc_price = _revenue()
    return lineitem.where(F.col("l_shipdate") <= _date("1998-09-02")).groupBy("l_returnflag", "l_linestatus").agg(
        F.sum("l_quantity").alias("sum_qty"),
        F.sum("l_extendedprice").alias("sum_base_price"),
        F.sum(disc_price).alias("sum_disc_price"),
        F.sum(disc_price * (F.lit(1) + F.col("l_tax"))).alias("sum_charge"),
        F.sum("l_discount").alias("sum_disc"),
        F.count(F.lit(1)).alias("count_order"))


def q1_aggregate(spark, inputs, ctx):
    """Sums, averages and counts per return flag and line status, from the local aggregates."""
    from pyspark.sql import functions as F

    count = F.sum("count_order")
    return inputs["lineitem"].groupBy("l_returnflag", "l_linestatus").agg(
        F.sum("sum_qty").alias("sum_qty"),
        F.sum("sum_base_price").alias("sum_base_price"),
        F.sum("sum_disc_price").alias("sum_disc_price"),
        F.sum("sum_charge").alias("sum_charge"),
        _average_of(F.sum("sum_qty"), count).alias("avg_qty"),
        _average_of(F.sum("sum_base_price"), count).alias("avg_price"),
        _average_of(F.sum("sum_disc"), count).alias("avg_disc"),
        count.alias("count_order"),
    )


def q1_result(spark, inputs, ctx):
    """Q1's rows in ORDER BY order."""
    return _ordered(inputs["aggregate"], 1)


# ---- Q3: shipping priority -----------------------------------------------------------------------------


def q3_customer(spark, inputs, ctx):
    """Customers of the BUILDING segment."""
    from pyspark.sql import functions as F

    customer = read_table(spark, "customer", ctx, "c_custkey")
    return customer.where(F.col("c_mktsegment") == "BUILDING").select("c_custkey")


def q3_customer_orders(spark, inputs, ctx):
    """Orders placed before 1995-03-15 by those customers: the orders scan runs with its join against
    the broadcast customers (on custkey)."""
    from pyspark.sql import functions as F

    orders = read_table(spark, "orders", ctx, "o_orderkey")
    orders = orders.where(F.col("o_orderdate") < _date("1995-03-15"))
    customer = F.broadcast(inputs["customer"])
    return orders.join(customer, orders["o_custkey"] == customer["c_custkey"]).select(
        "o_orderkey", "o_orderdate", "o_shippriority")


def q3_order_lines(spark, inputs, ctx):
    """Line items shipped after 1995-03-15 joined with the broadcast orders of those customers (on
    orderkey), their discounted price aggregated locally per order (two-phase aggregation): the scan
    of the large table runs with its broadcast join, so only the joined partial sums leave it."""
    from pyspark.sql import functions as F

    lineitem = read_table(spark, "lineitem", ctx, "l_orderkey")
    lineitem = lineitem.where(F.col("l_shipdate") > _date("1995-03-15")).select(
        "l_orderkey", _revenue().alias("volume"))
    orders = F.broadcast(inputs["customer_orders"])
    return lineitem.join(orders, lineitem["l_orderkey"] == orders["o_orderkey"]).groupBy(
        "l_orderkey", "o_orderdate", "o_shippriority").agg(F.sum("volume").alias("volume"))


def q3_revenue(spark, inputs, ctx):
    """Revenue per order."""
    from pyspark.sql import functions as F

    return inputs["order_lines"].groupBy("l_orderkey", "o_orderdate", "o_shippriority").agg(
        F.sum("volume").alias("revenue"))


def q3_result(spark, inputs, ctx):
    """The 10 orders of highest revenue."""
    return _ordered(inputs["revenue"], 3)


# ---- Q9: product type profit measure -------------------------------------------------------------------


def q9_part(spark, inputs, ctx):
    """Parts whose name contains 'green'."""
    from pyspark.sql import functions as F

    part = read_table(spark, "part", ctx, "p_partkey")
    return part.where(F.col("p_name").contains("green")).select("p_partkey")


def q9_partsupp(spark, inputs, ctx):
    """Supply costs per part and supplier."""
    return read_table(spark, "partsupp", ctx, "ps_partkey", "ps_partkey", "ps_suppkey", "ps_supplycost")


def q9_supplier(spark, inputs, ctx):
    """Suppliers and their nation keys."""
    return read_table(spark, "supplier", ctx, "s_suppkey", "s_suppkey", "s_nationkey")


def q9_nation(spark, inputs, ctx):
    """Nation names."""
    return read_table(spark, "nation", ctx, "n_nationkey", "n_nationkey", "n_name")


def q9_orders(spark, inputs, ctx):
    """The year of every order."""
    from pyspark.sql import functions as F

    orders = read_table(spark, "orders", ctx, "o_orderkey")
    return orders.select("o_orderkey", F.year("o_orderdate").alias("o_year"))


def q9_green_lines(spark, inputs, ctx):
    """Line items of green parts, with what the profit needs: the lineitem scan runs with its semi
    join against the broadcast green parts (on partkey), so only those lines leave it."""
    from pyspark.sql import functions as F

    lineitem = read_table(spark, "lineitem", ctx, "l_orderkey", "l_orderkey", "l_partkey", "l_suppkey",
                          "l_quantity", "l_extendedprice", "l_discount")
    part = F.broadcast(inputs["part"])
    return lineitem.join(part, lineitem["l_partkey"] == part["p_partkey"], "left_semi")


def q9_costed_lines(spark, inputs, ctx):
    """Each line's profit amount (join with partsupp on partkey and suppkey) and its supplier's nation
    (joins with the broadcast suppliers and nations)."""
    from pyspark.sql import functions as F

    lines, partsupp = inputs["green_lines"], inputs["partsupp"]
    supplier, nation = F.broadcast(inputs["supplier"]), F.broadcast(inputs["nation"])
    joined = lines.join(partsupp, (lines["l_partkey"] == partsupp["ps_partkey"])
                        & (lines["l_suppkey"] == partsupp["ps_suppkey"]))
    joined = joined.join(supplier, joined["l_suppkey"] == supplier["s_suppkey"])
    joined = joined.join(nation, joined["s_nationkey"] == nation["n_nationkey"])
    amount = _revenue() - F.col("ps_supplycost") * F.col("l_quantity")
    return joined.select("l_orderkey", F.col("n_name").alias("nation"), amount.alias("amount"))


def q9_dated_lines(spark, inputs, ctx):
    """The order year of each line (join on orderkey), amounts aggregated locally per nation and
    year (two-phase aggregation)."""
    from pyspark.sql import functions as F

    lines, orders = inputs["costed_lines"], inputs["orders"]
    dated = lines.join(orders, lines["l_orderkey"] == orders["o_orderkey"])
    return dated.groupBy("nation", "o_year").agg(F.sum("amount").alias("amount"))


def q9_profit(spark, inputs, ctx):
    """Profit per nation and year."""
    from pyspark.sql import functions as F

    return inputs["dated_lines"].groupBy("nation", "o_year").agg(F.sum("amount").alias("sum_profit"))


def q9_result(spark, inputs, ctx):
    """Q9's rows in ORDER BY order."""
    return _ordered(inputs["profit"], 9)


# ---- Q18: large volume customer ------------------------------------------------------------------------


def q18_lineitem(spark, inputs, ctx):
    """The quantity of every order, summed locally over its line items (both readers only sum
    quantities per order: two-phase aggregation)."""
    from pyspark.sql import functions as F

    lineitem = read_table(spark, "lineitem", ctx, "l_orderkey", "l_orderkey", "l_quantity")
    return lineitem.groupBy("l_orderkey").agg(F.sum("l_quantity").alias("l_quantity"))


def q18_orders(spark, inputs, ctx):
    """All orders."""
    return read_table(spark, "orders", ctx, "o_orderkey", "o_orderkey", "o_custkey", "o_orderdate",
                      "o_totalprice")


def q18_customer(spark, inputs, ctx):
    """All customers' names."""
    return read_table(spark, "customer", ctx, "c_custkey", "c_custkey", "c_name")


def q18_large_orders(spark, inputs, ctx):
    """Orders of more than 300 units (the IN subquery)."""
    from pyspark.sql import functions as F

    totals = inputs["lineitem"].groupBy("l_orderkey").agg(F.sum("l_quantity").alias("quantity"))
    return totals.where(F.col("quantity") > 300).select("l_orderkey")


def q18_large_order_rows(spark, inputs, ctx):
    """Those orders' rows (semi join on orderkey)."""
    orders, large = inputs["orders"], inputs["large_orders"]
    return orders.join(large, orders["o_orderkey"] == large["l_orderkey"], "left_semi")


def q18_customer_orders(spark, inputs, ctx):
    """With the customer's name (join on custkey)."""
    orders, customer = inputs["large_order_rows"], inputs["customer"]
    return orders.join(customer, orders["o_custkey"] == customer["c_custkey"]).select(
        "c_name", "c_custkey", "o_orderkey", "o_orderdate", "o_totalprice")


def q18_order_lines(spark, inputs, ctx):
    """With their line items (join on orderkey)."""
    orders, lineitem = inputs["customer_orders"], inputs["lineitem"]
    return orders.join(lineitem, orders["o_orderkey"] == lineitem["l_orderkey"]).drop("l_orderkey")


def q18_quantity(spark, inputs, ctx):
    """Quantity per order."""
    from pyspark.sql import functions as F

    return inputs["order_lines"].groupBy("c_name", "c_custkey", "o_orderkey", "o_orderdate", "o_totalprice").agg(
        F.sum("l_quantity").alias("sum"))


def q18_result(spark, inputs, ctx):
    """The 100 largest orders by total price."""
    return _ordered(inputs["quantity"], 18)


__all__ = [
    "q18_customer", "q18_customer_orders", "q18_large_order_rows", "q18_large_orders", "q18_lineitem",
    "q18_order_lines", "q18_orders", "q18_quantity", "q18_result", "q1_aggregate", "q1_lineitem", "q1_result",
    "q3_customer", "q3_customer_orders", "q3_order_lines", "q3_result", "q3_revenue", "q9_costed_lines",
    "q9_dated_lines", "q9_green_lines", "q9_nation", "q9_orders", "q9_part", "q9_partsupp", "q9_profit", "q9_result",
    "q9_supplier"
]
