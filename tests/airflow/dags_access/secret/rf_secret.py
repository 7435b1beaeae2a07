"""A regionflow DAG in the bundle of team ``finance``: only its members (and admins) may read it."""
from datetime import datetime

from airflow.sdk import DAG

import regionflow
from regionflow.examples import orders as job
from regionflow.operators import SparkVertexOperator

with DAG("ui_secret", schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as ui_secret:
    SparkVertexOperator(task_id="source", parallelism=1, fn=job.generate_orders)
regionflow.transform(ui_secret)
