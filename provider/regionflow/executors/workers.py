"""Where the RegionExecutor's granted workloads run, and what its admission gate asks of Airflow.

`TaskWorkers` is where a workload goes once its slots are granted: `LocalWorkers`, LocalExecutor's own
worker processes, started by ``LocalExecutor.start`` (the hand-off is Airflow's private one, see
`regionflow.airflow_internals`); tests put a list there (`composition.Seams.workers`).

`AirflowOperations` is the gate's `WorkerOperations` done with Airflow: a handed-over workload gets a
fresh token (it may have waited longer than a token lives), has its queued time stamped and counts as
running before it goes to the workers; a failed one is reported as LocalExecutor reports a worker's
failure, with the reason in its task log.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from airflow.executors.local_executor import LocalExecutor
from airflow.utils.state import TaskInstanceState

from ..airflow_internals import hand_to_local_workers
from .guard import guarded
from .guest import append_task_log

if TYPE_CHECKING:
    from .region_executor import RegionExecutor


class TaskWorkers(Protocol):
    """The workers that run granted workloads."""

    def hand_over(self, workload: Any) -> None:
        """Start `workload` on a worker."""

    def read_results(self) -> None:
        """Report the ends of workloads whose worker finished (through the executor's ``change_state``)."""


class LocalWorkers:
    """LocalExecutor's worker processes, of a started executor."""

    def __init__(self, executor: LocalExecutor) -> None:
        self.executor = executor

    def hand_over(self, workload: Any) -> None:
        hand_to_local_workers(self.executor, workload)

    def read_results(self) -> None:
        LocalExecutor.sync(self.executor)  # reads the result queue, reaps and spawns worker processes


class AirflowOperations:
    """The admission gate's `WorkerOperations`, done with the executor's workers and Airflow's task logs."""

    def __init__(self, executor: RegionExecutor) -> None:
        self.executor = executor

    def hand_over(self, workload: Any) -> None:
        executor = self.executor
        workload.token = workload.generate_token(str(workload.ti.id), executor.jwt_generator)
        guarded(executor.log, f"renewing the queued time of {workload.key}", executor.queued_stamps.handed,
                str(workload.ti.id))
        executor.running.add(workload.key)
        executor.task_workers.hand_over(workload)

    def fail(self, workload: Any, message: str) -> None:
        append_task_log(workload, message)
        try:  # LocalExecutor's own report: the gate has already settled the try's slots
            LocalExecutor.change_state(self.executor, workload.key, TaskInstanceState.FAILED, message)
        except Exception:  # noqa: BLE001
            self.executor.log.exception("RegionExecutor: cannot report %s as failed", workload.key)

    def note(self, workload: Any, message: str) -> None:
        append_task_log(workload, message, level="info")


__all__ = ["AirflowOperations", "LocalWorkers", "TaskWorkers"]
