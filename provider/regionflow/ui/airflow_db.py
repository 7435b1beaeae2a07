"""The plugin's reads of Airflow's metadata database, in one place.

They go through Airflow's ORM models (`DagRun`, `TaskInstance`, `SerializedDagModel`) with the
api-server's own session (``SessionDep``), not through Airflow's REST API: the plugin's app is mounted
beside the core API, so the core API's dependencies that live on its app's state (its ``DagBagDep``)
are not available to it. The models are Airflow's, not a private module, but their columns are not a
documented contract; if a release changes them, this module is what changes.
"""
from __future__ import annotations

from typing import Any

from ..contract import ContractError, RegionSlots, from_executor_config
from .plan_view import TaskInstanceRow

_plans: dict[tuple[str, str], dict[str, Any] | None] = {}


def run_state(session: Any, dag_id: str, run_id: str) -> str | None:
    """The DAG run's state, or None for an unknown run. regionflow's store cannot say it: between two
    tasks of a running DAG run no grant or attempt of it is live."""
    from airflow.models.dagrun import DagRun
    from sqlalchemy import select

    state = session.scalar(select(DagRun.state).where(DagRun.dag_id == dag_id, DagRun.run_id == run_id))
    return None if state is None else _text(state)


def task_instances(session: Any, dag_id: str, run_id: str) -> list[TaskInstanceRow]:
    """Every task instance of the run (each shard of a mapped task is one), with its state and times."""
    from airflow.models.taskinstance import TaskInstance
    from sqlalchemy import select

    query = select(TaskInstance.task_id, TaskInstance.map_index, TaskInstance.state, TaskInstance.start_date,
                   TaskInstance.end_date).where(TaskInstance.dag_id == dag_id, TaskInstance.run_id == run_id)
    return [TaskInstanceRow(task_id, map_index, None if state is None else _text(state),
                            start.timestamp() if start else None, end.timestamp() if end else None)
            for task_id, map_index, state, start, end in session.execute(query)]


def plan_reference(session: Any, dag_id: str) -> dict[str, Any] | None:
    """The plan reference `regionflow.transform` put in the DAG's first region task (job spec and mode),
    from the DAG's latest serialized version; None when the DAG is unknown or has no regionflow plan.
    Cached per serialized version (its hash): deserializing a DAG on every refresh of a page is waste."""
    from airflow.models.serialized_dag import SerializedDagModel

    row = SerializedDagModel.get(dag_id, session=session)
    if row is None:
        return None
    key = (dag_id, str(row.dag_hash))
    if key not in _plans:
        if len(_plans) > 256:
            _plans.clear()
        _plans[key] = _find_reference(row.dag)
    return _plans[key]


def _find_reference(dag: Any) -> dict[str, Any] | None:
    """The plan reference of the DAG's region task that carries one (`regionflow.contract.RegionSlots`).
    A task whose contract this release cannot read raises `ContractError`, which the app answers with a
    409 naming the task and the fix."""
    for task in dag.tasks:
        contract = from_executor_config(getattr(task, "executor_config", None), f"{dag.dag_id}.{task.task_id}")
        if isinstance(contract, RegionSlots) and contract.plan is not None:
            return dict(contract.plan)
    return None


def _text(state: Any) -> str:
    return str(getattr(state, "value", state))


__all__ = ["ContractError", "plan_reference", "run_state", "task_instances"]
