"""The example job once per exchange mode (dag id orders_<mode>)."""
from datetime import datetime

from airflow.sdk import DAG

import regionflow
from regionflow.examples import orders as job
from regionflow.operators import SparkVertexOperator, broadcast, forward, hash_by, rescale

for mode in ("all-blocking", "forward-pipelined-only", "pointwise-pipelined-only", "all-pipelined"):
    dag_id = "orders_" + mode.replace("-", "_")
    with DAG(dag_id, schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as dag:
        orders = SparkVertexOperator(task_id="orders", parallelism=4, fn=job.generate_orders)
        products = SparkVertexOperator(task_id="products", parallelism=1, fn=job.generate_products)
        clean = SparkVertexOperator(task_id="clean", parallelism=4, fn=job.clean_orders)
        enrich = SparkVertexOperator(task_id="enrich", parallelism=2, fn=job.enrich_orders)
        totals = SparkVertexOperator(task_id="totals", parallelism=3, fn=job.total_by_customer,
                                     sink=f"e2e/{dag_id}/totals")
        orders >> forward() >> clean >> rescale() >> enrich >> hash_by("customer_id") >> totals
        products >> broadcast() >> enrich
    regionflow.transform(dag, mode=mode)
    globals()[dag_id] = dag
