"""Doubles and helpers of the in-process RegionExecutor tests (test_executor*.py, test_task_log_remote.py):
an executor built by its composition root with a list for its workers, workloads as Airflow's scheduler
hands them, and recording stand-ins for the metrics and the backend's stopper. The fixtures they share
(`settings`, `logs`, the copies' `store` and `partitions`) are in tests/airflow/conftest.py."""
from __future__ import annotations

import uuid

from airflow.executors.workloads import ExecuteTask
from airflow.executors.workloads.base import BundleInfo
from airflow.executors.workloads.task import TaskInstanceDTO

from regionflow.executors import RegionExecutor
from regionflow.executors.composition import Seams


class Workers(list):
    """Stands in for LocalExecutor's worker processes (`Seams.workers`): what was handed to them, in order."""

    def hand_over(self, workload):
        self.append(workload)

    def read_results(self):
        """No worker reports here: the tests report each end with change_state."""


class RecordingStats:
    """Stands in for Airflow's Stats (`Seams.stats`): what the pool's metrics sent, in order."""

    def __init__(self):
        self.sent = []

    def gauge(self, name, value, **tags):
        self.sent.append((name, value))

    def incr(self, name, count=1, **tags):
        self.sent.append((name, count))

    def timing(self, name, value, **tags):
        self.sent.append((name, value))


def executor(**seams):
    """A RegionExecutor built by its composition root, its workers a `Workers` list (``ex.task_workers``);
    `seams`: further `Seams` fields (doubles of the clock, Airflow's database, Spark, ...)."""
    return RegionExecutor(parallelism=8, seams=Seams(**{"workers": Workers(), **seams}))


def workload(slots=None, dag_id="d", run_id="r1", task_id="t", map_index=-1):
    config = {"regionflow": {"requests": [[{"unknown": True}] * slots], "labels": [task_id]}} if slots else None
    ti = TaskInstanceDTO(id=uuid.uuid4(), task_id=task_id, dag_id=dag_id, run_id=run_id, try_number=1,
                         dag_version_id=uuid.uuid4(), map_index=map_index, pool_slots=1, priority_weight=1,
                         executor_config=config)
    return ExecuteTask(ti=ti, dag_rel_path="d.py", token="old", log_path=f"dag_id={dag_id}/{task_id}.log",
                       bundle_info=BundleInfo(name="dags-folder"))


def queue(ex, *workloads):
    for w in workloads:
        ex.queued_tasks[w.key] = w
    ex._process_workloads(list(workloads))


class RecordingStopper:
    """Stands in for the backend's stopper (`Seams.stopper`): records each stop in `calls` (attempt id, host)
    and calls `on_stop` first, if set; says "stopped", or fails."""

    def __init__(self, fails: bool = False) -> None:
        self.calls: list[tuple[str, str]] = []
        self.fails = fails
        self.on_stop = None

    def stop(self, attempt_id: str, host: str) -> str:
        if self.on_stop is not None:
            self.on_stop()
        self.calls.append((attempt_id, host))
        if self.fails:
            raise RuntimeError("server unreachable")
        return "stopped"


def started(store, bulk_id, attempt_id, *, task_id="t", state=None):
    store.start_attempt(attempt_id=attempt_id, dag_id="d", run_id="r1", task_id=task_id, unit_key=f"u-{task_id}",
                        host="a", bulk_id=bulk_id)
    if state is not None:
        store.end_attempt(attempt_id, state)
