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
q3, q9, q18) build a job with the default parallelism. The vertex functions are in `tpch_queries`, the
tables' location and the answers' shape in `tpch_tables` (both importable from here too).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..core.graph import JobGraph
from .tpch_queries import (
    q1_aggregate,
    q1_lineitem,
    q1_result,
    q3_customer,
    q3_customer_orders,
    q3_order_lines,
    q3_result,
    q3_revenue,
    q9_costed_lines,
    q9_dated_lines,
    q9_green_lines,
    q9_nation,
    q9_orders,
    q9_part,
    q9_partsupp,
    q9_profit,
    q9_result,
    q9_supplier,
    q18_customer,
    q18_customer_orders,
    q18_large_order_rows,
    q18_large_orders,
    q18_lineitem,
    q18_order_lines,
    q18_orders,
    q18_quantity,
    q18_result,
)
from .tpch_tables import ORDER_BY, TPCH_DIR_ENV, TpchDataError, tpch_dir

QUERIES = (1, 3, 9, 18)
DEFAULT_PARALLELISM = 4
SINK_VERTEX = "result"


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


__all__ = [
    "DEFAULT_PARALLELISM", "ORDER_BY", "QUERIES", "SINK_VERTEX", "TPCH_DIR_ENV", "TpchDataError",
    "build_job", "q1", "q3", "q9", "q18", "tpch_dir", "q1_lineitem", "q1_aggregate", "q1_result",
    "q3_customer", "q3_customer_orders", "q3_order_lines", "q3_revenue", "q3_result", "q9_part", "q9_partsupp",
    "q9_supplier", "q9_nation", "q9_orders", "q9_green_lines", "q9_costed_lines", "q9_dated_lines", "q9_profit",
    "q9_result", "q18_lineitem", "q18_orders", "q18_customer", "q18_large_orders", "q18_large_order_rows",
    "q18_customer_orders", "q18_order_lines", "q18_quantity", "q18_result"
]
