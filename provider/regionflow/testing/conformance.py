"""Airflow's own bundled example DAGs as a conformance check of an executor on an embedded stack.

The same chosen examples run under the RegionExecutor and under LocalExecutor (the scheduler restarted
in between) must end with the same state for every task instance. Used by
``tests/airflow/test_conformance.py`` and ``benchmarks/conformance.py``.
"""
from __future__ import annotations

import os
import shutil
import time
from typing import Any

import airflow

REGION_EXECUTOR = "regionflow.executors.RegionExecutor"
LOCAL_EXECUTOR = "LocalExecutor"

# Bundled examples by file (relative to the airflow package) and what each one exercises. Left out:
# example_retry_policy (calls an HTTP API on the internet), example_sensors (time sensors that wait an
# hour), example_branch_operator and its decorator twin (branches chosen at random, so two runs differ
# whatever the executor), tutorial (its templates use ``ds``, which a manual run without a logical date
# lacks, so a task fails and waits 5 min for its retry), examples of EmptyOperators only (they never
# reach an executor), examples that need external systems or a virtualenv build (Kubernetes, object
# storage, virtualenv, HITL).
BUNDLED_EXAMPLES = {
    "example_dags/example_time_delta_sensor_async.py": "deferrable sensor (triggerer)",
    "providers/standard/example_dags/example_sensor_decorator.py": "reschedule-mode sensor",
    "example_dags/example_dynamic_task_mapping.py": "dynamic task mapping (3 DAGs)",
    "example_dags/example_nested_branch_dag.py": "branching, trigger rules",
    "example_dags/example_setup_teardown.py": "setup / teardown",
    "example_dags/tutorial_dag.py": "retries (default_args), PythonOperators passing XCom",
    "example_dags/example_task_group.py": "task groups",
    "example_dags/example_xcom.py": "XCom",
    "providers/standard/example_dags/example_short_circuit_operator.py": "short-circuit",
    "example_dags/example_skip_dag.py": "skips, trigger rules",
    "example_dags/example_failed_dag.py": "a failing task",
}
EXAMPLE_DAG_IDS = (
    "example_time_delta_sensor_async", "example_sensor_decorator", "example_dynamic_task_mapping",
    "example_task_mapping_second_order", "example_task_group_mapping", "example_nested_branch_dag",
    "example_setup_teardown", "tutorial_dag", "example_task_group", "example_xcom", "example_short_circuit_operator",
    "example_skip_dag", "example_failed_dag",
)
# Runs only when triggered: no catch-up runs of the examples' schedules when they are unpaused.
STACK_CONFIG = {"scheduler": {"use_job_schedule": "False"}}

Outcome = dict[str, tuple[str, dict[tuple[str, int], str]]]


def copy_examples(dags_folder: str) -> None:
    """Copy the chosen bundled example files into `dags_folder`."""
    root = os.path.dirname(airflow.__file__)
    os.makedirs(dags_folder, exist_ok=True)
    for relative in BUNDLED_EXAMPLES:
        shutil.copy(os.path.join(root, relative), os.path.join(dags_folder, os.path.basename(relative)))


def run_examples(stack: Any, timeout: float = 600.0) -> tuple[Outcome, float]:
    """Trigger every example DAG once and wait for all runs; returns ({dag_id: (run state,
    {(task_id, map_index): state})}, seconds from the first trigger to the last run's end)."""
    for dag_id in EXAMPLE_DAG_IDS:
        stack.wait_for_dag(dag_id)
        stack.unpause(dag_id)
    started = time.monotonic()
    runs = {dag_id: stack.trigger(dag_id) for dag_id in EXAMPLE_DAG_IDS}
    outcome: Outcome = {}
    for dag_id, run_id in runs.items():
        state = stack.wait_for_run(dag_id, run_id, timeout=timeout)
        outcome[dag_id] = (state, {(ti["task_id"], ti["map_index"]): ti["state"]
                                   for ti in stack.task_instances(dag_id, run_id)})
    return outcome, time.monotonic() - started


def differences(first: Outcome, second: Outcome) -> list[str]:
    """Every DAG run or task instance whose final state differs between two outcomes."""
    found = []
    for dag_id in sorted(set(first) | set(second)):
        run_a, tis_a = first.get(dag_id, ("missing", {}))
        run_b, tis_b = second.get(dag_id, ("missing", {}))
        if run_a != run_b:
            found.append(f"{dag_id}: run {run_a} vs {run_b}")
        for key in sorted(set(tis_a) | set(tis_b)):
            if tis_a.get(key) != tis_b.get(key):
                found.append(f"{dag_id}.{key[0]}[{key[1]}]: {tis_a.get(key)} vs {tis_b.get(key)}")
    return found


__all__ = ["BUNDLED_EXAMPLES", "EXAMPLE_DAG_IDS", "LOCAL_EXECUTOR", "REGION_EXECUTOR", "STACK_CONFIG",
           "copy_examples", "differences", "run_examples"]
