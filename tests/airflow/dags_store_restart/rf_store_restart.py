"""regionflow's store restarts mid-run (tests/airflow/test_store_restart.py): each run of `rf_store_restart`
has a task asking for the whole 4-slot cluster, then two one-slot tasks, so with several runs triggered at
once one `whole` runs while the others wait for slots, and the one-slot tasks are queued as runs go on."""
from __future__ import annotations

import time
from datetime import datetime

from airflow.providers.standard.operators.python import PythonOperator
from airflow.sdk import DAG


def nap(seconds: str) -> None:
    time.sleep(float(seconds))


def slots(count: int, label: str) -> dict:
    return {"regionflow": {"requests": [[{"unknown": True}] * count], "labels": [label]}}


with DAG("rf_store_restart", start_date=datetime(2026, 1, 1), schedule=None, catchup=False, max_active_runs=8):
    whole = PythonOperator(task_id="whole", python_callable=nap, op_args=["{{ dag_run.conf.get('whole', 4) }}"],
                           executor_config=slots(4, "whole"))
    for name in ("left", "right"):
        whole >> PythonOperator(task_id=name, python_callable=nap, op_args=["{{ dag_run.conf.get('one', 1) }}"],
                                executor_config=slots(1, name))
