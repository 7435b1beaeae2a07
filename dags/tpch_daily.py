"""Example DAG: TPC-H Q3 (shipping priority) on Spark, scheduled by regionflow.

    customer(4) -BROADCAST-> customer_orders(4, scans orders) -BROADCAST-> order_lines(4, scans lineitem)
    order_lines -HASH(l_orderkey)-> revenue(4) -REBALANCE-> result(1, sink tpch_daily/q3)

The vertex functions are those of `regionflow.examples.tpch`; they read the Parquet tables under
``REGIONFLOW_TPCH_DIR`` when they run (generate them with ``python benchmarks/rfbench/tpch_data.py
--sf 0.1 --out DIR`` and set the variable to the directory it prints, in the environment of the
processes that run the regions). The DAG file itself does not need the variable.
"""
import os
from datetime import datetime

from airflow.sdk import DAG

import regionflow
from regionflow.examples import tpch
from regionflow.operators import SparkVertexOperator, broadcast, hash_by, rebalance

MODE = os.environ.get("REGIONFLOW_EXAMPLE_MODE", "all-blocking")
PARALLELISM = 4

with DAG("tpch_daily", schedule=None, start_date=datetime(2026, 1, 1), catchup=False,
         tags=["regionflow", "example", "tpch"]) as dag:
    customer = SparkVertexOperator(task_id="customer", parallelism=PARALLELISM, fn=tpch.q3_customer)
    customer_orders = SparkVertexOperator(task_id="customer_orders", parallelism=PARALLELISM,
                                          fn=tpch.q3_customer_orders)
    order_lines = SparkVertexOperator(task_id="order_lines", parallelism=PARALLELISM, fn=tpch.q3_order_lines)
    revenue = SparkVertexOperator(task_id="revenue", parallelism=PARALLELISM, fn=tpch.q3_revenue)
    result = SparkVertexOperator(task_id=tpch.SINK_VERTEX, parallelism=1, fn=tpch.q3_result,
                                 sink="tpch_daily/q3")

    customer >> broadcast() >> customer_orders
    customer_orders >> broadcast() >> order_lines
    order_lines >> hash_by("l_orderkey") >> revenue
    revenue >> rebalance() >> result

regionflow.transform(dag, mode=MODE)
