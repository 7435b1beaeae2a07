"""A regionflow DAG in the bundle without a team: every user with a role may read it."""
from datetime import datetime

from airflow.sdk import DAG

import regionflow
from regionflow.examples import orders as job
from regionflow.operators import SparkVertexOperator

with DAG("ui_open", schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as ui_open:
    SparkVertexOperator(task_id="source", parallelism=1, fn=job.generate_orders)
regionflow.transform(ui_open)
