"""TPC-H queries 1, 3, 9 and 18 as regionflow jobs: one vertex per scan (with its filter), join and
aggregation, HASH edges on the join and grouping keys, and a final vertex ``result`` of parallelism 1
that orders (and limits) the rows and is the sink, with the columns of the official answer in order.
The jobs are shaped as Flink's batch planner shapes them, and the same functions run as the plain
PySpark reference, so both pay for (and gain from) each choice:

- a vertex feeding an aggregation over a HASH edge aggregates its own rows first (two-phase
  aggregation: a local aggregate chained to the producer), so the edge carries partial sums;
- a join whose build side is small is a BROADCAST edge into the vertex that scans the large table,
  which joins as it scans (a broadcast hash join chained to its probe-side source, as Flink chains
  it), so only the joined rows leave that vertex: Q3's BUILDING customers into the orders scan and
  those orders into the lineitem scan, Q9's green parts into the lineitem scan and its suppliers and
  nations into the partsupp join. Spark's optimizer makes the same choice in the plain program (a
  broadcast join below its size threshold).

    Q3:  customer(p) -BROADCAST-> customer_orders(p, scans orders) -BROADCAST-> order_lines(p, scans
         lineitem) -HASH(l_orderkey)-> revenue(p) -REBALANCE-> result(1, sink)

    Q9:  part(p) -BROADCAST-> green_lines(p, scans lineitem) -HASH(l_partkey, l_suppkey)-> costed_lines(p)
         partsupp(p) -HASH(ps_partkey, ps_suppkey)-> costed_lines; supplier(p), nation(1) -BROADCAST-> costed_lines
         costed_lines -HASH(l_orderkey)-> dated_lines(p) <-HASH(o_orderkey)- orders(p)
         dated_lines -HASH(nation, o_year)-> profit(p) -REBALANCE-> result(1, sink)

Input: the Parquet tables written by `rfbench.tpch_data.generate` (benchmarks/), one directory per table
under the directory in the environment variable ``REGIONFLOW_TPCH_DIR`` (e.g. ``.../sf0.01``; a URI
such as ``hdfs://...`` is passed to Spark as is). The variable is read inside the vertex functions
only, so jobs and DAGs import without it. Scans take their share of a table with ``ctx.share``.

Money stays DECIMAL (exact sums whatever the partitioning); averages are doubles computed as the
exact decimal sum divided by the count (one rounding), so results equal the answers DuckDB ships
(`rfbench.tpch_data.answers`) once formatted with `rfbench.tpch_data.format_row`.

Jobs: ``build_job(query, parallelism, sink, name)``; references ``regionflow.examples.tpch:q1`` (also
q3, q9, q18) build a job with the default parallelism.
"""
from __future__ import annotations

import datetime
import os
from collections.abc import Callable
from typing import Any

from ..core.errors import RegionflowError
from ..core.graph import JobGraph

TPCH_DIR_ENV = "REGIONFLOW_TPCH_DIR"
QUERIES = (1, 3, 9, 18)
DEFAULT_PARALLELISM = 4
SINK_VERTEX = "result"

# the answer's columns, in order
COLUMNS = {
    1: ("l_returnflag", "l_linestatus", "sum_qty", "sum_base_price", "sum_disc_price", "sum_charge", "avg_qty",
        "avg_price", "avg_disc", "count_order"),
    3: ("l_orderkey", "revenue", "o_orderdate", "o_shippriority"),
    9: ("nation", "o_year", "sum_profit"),
    18: ("c_name", "c_custkey", "o_orderkey", "o_orderdate", "o_totalprice", "sum"),
}
# each query's ORDER BY: (column, descending)
ORDER_BY = {
    1: (("l_returnflag", False), ("l_linestatus", False)),
    3: (("revenue", True), ("o_orderdate", False)),
    9: (("nation", False), ("o_year", True)),
    18: (("o_totalprice", True), ("o_orderdate", False)),
}
LIMIT = {3: 10, 18: 100}


class TpchDataError(RegionflowError):
    """The TPC-H input directory is not configured or not there."""


def tpch_dir() -> str:
    """The directory holding the TPC-H tables, from ``REGIONFLOW_TPCH_DIR``."""
    path = os.environ.get(TPCH_DIR_ENV, "").strip()
    hint = ("generate the tables with `python benchmarks/rfbench/tpch_data.py --sf 0.01 --out DIR` (in a checkout; "
            f"or `python -m rfbench.tpch_data` from benchmarks/) and set {TPCH_DIR_ENV} to the directory it prints")
    if not path:
        raise TpchDataError(f"{TPCH_DIR_ENV} is not set: {hint}")
    if "://" not in path and not os.path.isdir(path):
        raise TpchDataError(f"{TPCH_DIR_ENV}={path} is not a directory: {hint}")
    return path


def read_table(spark, table: str, ctx, key: str, *columns: str):
    """This call's share (by `key`) of a TPC-H table, with `columns` only when given."""
    path = tpch_dir()
    table_path = f"{path.rstrip('/')}/{table}"
    if "://" not in table_path and not os.path.isdir(table_path):
        raise TpchDataError(f"{TPCH_DIR_ENV}={path} has no table {table!r} ({table_path} is missing)")
    frame = ctx.share(spark.read.parquet(table_path), key)
    return frame.select(*columns) if columns else frame


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


# ---- jobs ----------------------------------------------------------------------------------------------

# per query: vertices (name, function, parallelism or None for the job's) and edges (src, dst, keys or
# a distribution name); the last vertex is the sink
_Vertices = list[tuple[str, Callable[..., Any], "int | None"]]
_Edges = list[tuple[str, str, "tuple[str, ...] | str"]]
_JOBS: dict[int, tuple[_Vertices, _Edges]] = {
    1: ([("lineitem", q1_lineitem, None), ("aggregate", q1_aggregate, None), (SINK_VERTEX, q1_result, 1)],
        [("lineitem", "aggregate", ("l_returnflag", "l_linestatus")), ("aggregate", SINK_VERTEX, "rebalance")]),
    3: ([("customer", q3_customer, None), ("customer_orders", q3_customer_orders, None),
         ("order_lines", q3_order_lines, None), ("revenue", q3_revenue, None), (SINK_VERTEX, q3_result, 1)],
        [("customer", "customer_orders", "broadcast"), ("customer_orders", "order_lines", "broadcast"),
         ("order_lines", "revenue", ("l_orderkey",)), ("revenue", SINK_VERTEX, "rebalance")]),
    9: ([("part", q9_part, None), ("partsupp", q9_partsupp, None),
         ("supplier", q9_supplier, None), ("nation", q9_nation, 1), ("orders", q9_orders, None),
         ("green_lines", q9_green_lines, None), ("costed_lines", q9_costed_lines, None),
         ("dated_lines", q9_dated_lines, None), ("profit", q9_profit, None), (SINK_VERTEX, q9_result, 1)],
        [("part", "green_lines", "broadcast"),
         ("green_lines", "costed_lines", ("l_partkey", "l_suppkey")),
         ("partsupp", "costed_lines", ("ps_partkey", "ps_suppkey")),
         ("supplier", "costed_lines", "broadcast"), ("nation", "costed_lines", "broadcast"),
         ("costed_lines", "dated_lines", ("l_orderkey",)), ("orders", "dated_lines", ("o_orderkey",)),
         ("dated_lines", "profit", ("nation", "o_year")), ("profit", SINK_VERTEX, "rebalance")]),
    18: ([("lineitem", q18_lineitem, None), ("orders", q18_orders, None), ("customer", q18_customer, None),
          ("large_orders", q18_large_orders, None), ("large_order_rows", q18_large_order_rows, None),
          ("customer_orders", q18_customer_orders, None), ("order_lines", q18_order_lines, None),
          ("quantity", q18_quantity, None), (SINK_VERTEX, q18_result, 1)],
         [("lineitem", "large_orders", ("l_orderkey",)),
          ("orders", "large_order_rows", ("o_orderkey",)), ("large_orders", "large_order_rows", ("l_orderkey",)),
          ("large_order_rows", "customer_orders", ("o_custkey",)), ("customer", "customer_orders", ("c_custkey",)),
          ("customer_orders", "order_lines", ("o_orderkey",)), ("lineitem", "order_lines", ("l_orderkey",)),
          ("order_lines", "quantity", ("o_orderkey",)), ("quantity", SINK_VERTEX, "rebalance")]),
}


def build_job(query: int, parallelism: int = DEFAULT_PARALLELISM, sink: str | None = None,
              name: str | None = None) -> JobGraph:
    """TPC-H query `query` (one of `QUERIES`) as a job: every vertex but the small dimension tables and
    the final one runs with `parallelism`; the final vertex ``result`` writes to `sink` (default
    ``tpch/q<query>``, under the run's data dir); the job is named `name` (default ``tpch_q<query>``)."""
    if query not in _JOBS:
        raise ValueError(f"TPC-H query {query!r} is not a regionflow job; choose one of {QUERIES}")
    vertices, edges = _JOBS[query]
    graph = JobGraph(name or f"tpch_q{query}")
    for vertex, fn, fixed in vertices:
        graph.add_vertex(vertex, fixed or parallelism, fn=fn,
                         sink=(sink or f"tpch/q{query}") if vertex == SINK_VERTEX else None)
    for src, dst, how in edges:
        if isinstance(how, tuple):
            graph.connect(src, dst, "hash", keys=list(how))
        else:
            graph.connect(src, dst, how)
    return graph.validate()


def q1() -> JobGraph:
    """TPC-H Q1 with the default parallelism."""
    return build_job(1)


def q3() -> JobGraph:
    """TPC-H Q3 with the default parallelism."""
    return build_job(3)


def q9() -> JobGraph:
    """TPC-H Q9 with the default parallelism."""
    return build_job(9)


def q18() -> JobGraph:
    """TPC-H Q18 with the default parallelism."""
    return build_job(18)
