"""Task lifecycles the RegionExecutor must carry like LocalExecutor (tests/airflow/test_conformance.py).

Plain Airflow tasks: a task without regionflow settings asks the slot pool for one slot; `rf_blocker`
asks for the whole 4-slot cluster through the executor's contract, so the tasks triggered behind it
wait for slots while it sleeps.
"""
from __future__ import annotations

import os
import time
from datetime import datetime, timedelta

from airflow.providers.standard.operators.python import PythonOperator
from airflow.providers.standard.sensors.python import PythonSensor
from airflow.providers.standard.triggers.temporal import TimeDeltaTrigger
from airflow.sdk import DAG, BaseOperator

START = datetime(2026, 1, 1)
WHOLE_CLUSTER = {"regionflow": {"requests": [[{"unknown": True}] * 4], "labels": ["blocker"]}}


def marker(name: str, run_id: str) -> str:
    """A file a task writes when it really runs, under the stack's home (the test reads it)."""
    folder = os.path.join(os.environ["AIRFLOW_HOME"], "markers")
    os.makedirs(folder, exist_ok=True)
    return os.path.join(folder, f"{name}--{run_id.replace(':', '_').replace('+', '_')}")


def touch(name: str, run_id: str) -> None:
    with open(marker(name, run_id), "a", encoding="utf-8") as handle:
        handle.write(f"{time.time()}\n")


def third_poke(run_id: str) -> bool:
    touch("poke", run_id)
    with open(marker("poke", run_id), encoding="utf-8") as handle:
        return len(handle.readlines()) >= 3


def fail_first_try(ti, run_id: str) -> None:
    touch("retry", run_id)
    if ti.try_number == 1:
        raise RuntimeError("the first try fails on purpose")


def sleep_for(seconds: float, name: str, run_id: str) -> None:
    touch(name, run_id)
    time.sleep(seconds)


class DeferOnce(BaseOperator):
    """Always defers once (a TimeDeltaSensor returns at once when its moment passed on a busy box)."""

    def execute(self, context):
        touch("deferred", context["run_id"])
        self.defer(trigger=TimeDeltaTrigger(timedelta(seconds=8)), method_name="resume")

    def resume(self, context, event=None):
        touch("resumed", context["run_id"])


with DAG("rf_defer", schedule=None, start_date=START, catchup=False):
    DeferOnce(task_id="wait")

with DAG("rf_reschedule", schedule=None, start_date=START, catchup=False):
    PythonSensor(task_id="poke", mode="reschedule", poke_interval=1, timeout=300, python_callable=third_poke,
                 op_kwargs={"run_id": "{{ run_id }}"})

with DAG("rf_retry", schedule=None, start_date=START, catchup=False):
    PythonOperator(task_id="flaky", python_callable=fail_first_try, op_kwargs={"run_id": "{{ run_id }}"},
                   retries=1, retry_delay=timedelta(seconds=1))

with DAG("rf_blocker", schedule=None, start_date=START, catchup=False):
    PythonOperator(task_id="hold", python_callable=sleep_for, executor_config=WHOLE_CLUSTER,
                   op_kwargs={"seconds": "{{ dag_run.conf.get('seconds', 20) }}", "name": "hold",
                              "run_id": "{{ run_id }}"}, render_template_as_native_obj=True)

with DAG("rf_waiter", schedule=None, start_date=START, catchup=False):
    # waits for slots far longer than its execution_timeout and than [scheduler] task_queued_timeout
    PythonOperator(task_id="short", python_callable=sleep_for, execution_timeout=timedelta(seconds=5),
                   op_kwargs={"seconds": 1, "name": "short", "run_id": "{{ run_id }}"})

with DAG("rf_lost", schedule=None, start_date=START, catchup=False):
    # handed to LocalExecutor's workers while every one of them is paused: no worker starts it
    PythonOperator(task_id="lost", python_callable=touch, op_kwargs={"name": "lost", "run_id": "{{ run_id }}"})

with DAG("rf_behind", schedule=None, start_date=START, catchup=False):
    # asks for the whole cluster, so it waits behind rf_lost's slot far longer than task_queued_timeout
    PythonOperator(task_id="whole", python_callable=touch, executor_config=WHOLE_CLUSTER,
                   op_kwargs={"name": "whole", "run_id": "{{ run_id }}"})

with DAG("rf_marked", schedule=None, start_date=START, catchup=False):
    # marked success while it waits for slots: must never run
    PythonOperator(task_id="never", python_callable=touch, op_kwargs={"name": "never", "run_id": "{{ run_id }}"})

with DAG("rf_mapped", schedule=None, start_date=START, catchup=False):
    PythonOperator.partial(task_id="each", python_callable=sleep_for, max_active_tis_per_dag=1, pool="rf_pool",
                           priority_weight=5).expand(
        op_kwargs=[{"seconds": 0.2, "name": f"each{i}", "run_id": "x"} for i in range(3)])

with DAG("rf_faulty", schedule=None, start_date=START, catchup=False):
    PythonOperator(task_id="refused", python_callable=touch, op_kwargs={"name": "refused", "run_id": "{{ run_id }}"})

with DAG("rf_healthy", schedule=None, start_date=START, catchup=False):
    PythonOperator(task_id="fine", python_callable=touch, op_kwargs={"name": "fine", "run_id": "{{ run_id }}"})
