"""The example job with speculation on: 4 shards per source region, totals with 4 subtasks (sink)."""
from datetime import datetime

from airflow.sdk import DAG

import regionflow
from regionflow.examples import orders as job
from regionflow.operators import SparkVertexOperator, broadcast, forward, hash_by, rescale

with DAG("orders_speculation", schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as orders_speculation:
    orders = SparkVertexOperator(task_id="orders", parallelism=4, fn=job.generate_orders)
    products = SparkVertexOperator(task_id="products", parallelism=1, fn=job.generate_products)
    clean = SparkVertexOperator(task_id="clean", parallelism=4, fn=job.clean_orders)
    enrich = SparkVertexOperator(task_id="enrich", parallelism=2, fn=job.enrich_orders)
    totals = SparkVertexOperator(task_id="totals", parallelism=4, fn=job.total_by_customer,
                                 sink="e2e/orders_speculation/totals")
    orders >> forward() >> clean >> rescale() >> enrich >> hash_by("customer_id") >> totals
    products >> broadcast() >> enrich
regionflow.transform(orders_speculation, mode="forward-pipelined-only", max_shards=4, speculation=True,
                     speculation_config={"quantile": 0.25, "multiplier": 1.8, "min_runtime": 5, "interval": 1})
