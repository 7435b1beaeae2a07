"""Two schedulers, one slot pool (tests/airflow/test_ha_postgres.py): each run of `rf_ha` has three
plain tasks asking the RegionExecutor for 1, 2 and 3 of the cluster's 4 slots (through its contract),
so twenty runs compete for the pool whichever scheduler queues them."""
from __future__ import annotations

import time
from datetime import datetime

from airflow.providers.standard.operators.python import PythonOperator
from airflow.sdk import DAG


def nap(seconds: str) -> None:
    time.sleep(float(seconds))


def slots(count: int, label: str) -> dict:
    return {"regionflow": {"requests": [[{"unknown": True}] * count], "labels": [label]}}


with DAG("rf_ha", start_date=datetime(2026, 1, 1), schedule=None, catchup=False, max_active_runs=20):
    for name, count in (("one", 1), ("two", 2), ("three", 3)):
        PythonOperator(task_id=name, python_callable=nap,
                       op_args=["{{ dag_run.conf.get('sleep', 0.2) }}"], executor_config=slots(count, name))
