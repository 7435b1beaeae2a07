"""The TPC-H tables the example jobs read (`tpch`) and the shape of each query's answer: where the tables
are (``REGIONFLOW_TPCH_DIR``), a call's share of one, and each answer's columns, order and limit (also read
by `rfbench.tpch_data`, which checks the answers)."""
from __future__ import annotations

import os

from ..core.errors import RegionflowError

TPCH_DIR_ENV = "REGIONFLOW_TPCH_DIR"

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


__all__ = ["COLUMNS", "LIMIT", "ORDER_BY", "TPCH_DIR_ENV", "TpchDataError", "read_table", "tpch_dir"]
