"""`RegionExecutor`: Airflow's LocalExecutor gated by regionflow's FIFO bulk slot pool.

Queued task instances are not started when Airflow hands them over: each becomes a bulk in the
`SlotPool` (a region task asks for the slots in its ``executor_config["regionflow"]``, any other task
for one slot) and starts only when the whole bulk is granted, oldest first across all DAG runs. A bulk
the cluster can never satisfy fails its task instance at once, with the pool's message written to the
task log. When a task ends, its slots go back to the pool and the next bulks start.

Airflow facts this relies on (3.3, measured): held workloads stay QUEUED in the database (so pools,
``max_active_tasks`` and ``[core] parallelism`` must not gate first: the executor warns at start when
they are smaller than the cluster); a workload's token expires after ``task_queued_timeout``, so it is
re-minted when the workload is released; LocalExecutor never fills ``self.running``, so this executor
tracks its own running work. Grants live in regionflow's store: after a scheduler restart the ledger
is rebuilt from it (slots of task instances still running stay taken until they end), so no slot is
granted twice. Task logs are read from local files; the worker log server (0.0.0.0:8793) is off.
"""
from __future__ import annotations

import os
import time
from typing import Any, Sequence

from airflow.executors.local_executor import LocalExecutor
from airflow.executors.workloads import ExecuteTask
from airflow.utils.state import TaskInstanceState

from ..config import RegionflowConfig
from ..core.resources import UNKNOWN, ResourceProfile
from ..operators.region import bulk_id_for
from ..scheduling.capacity import SlotRef
from ..scheduling.errors import SchedulingError, UnfulfillableBulk
from ..scheduling.pool import Bulk, Grant, SlotPool
from ..store import RegionflowStore
from ..transformer import EXECUTOR_CONFIG_KEY

FINISHED_STATES = {TaskInstanceState.SUCCESS, TaskInstanceState.FAILED, TaskInstanceState.UPSTREAM_FAILED,
                   TaskInstanceState.SKIPPED, TaskInstanceState.REMOVED}
ADOPTED_CHECK_INTERVAL_S = 5.0


class RegionExecutor(LocalExecutor):
    serve_logs = False  # keep every server on loopback: logs are read from local files

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.rf_config = RegionflowConfig.from_airflow()
        self.pool = SlotPool(self.rf_config.cluster, blocklist_expiry_s=self.rf_config.blocklist_expiry,
                             resource_wait_timeout_s=self.rf_config.resource_wait_timeout)
        self.store = RegionflowStore.from_config(self.rf_config.store_url)
        self.held: dict[str, ExecuteTask] = {}  # bulk id -> workload waiting for its grant
        self.granted: dict[Any, str] = {}  # task instance key -> bulk id of its running grant
        self.adopted: dict[str, str] = {}  # bulk id -> task instance id, granted before a restart
        self._noticed_jobs: set[str] = set()
        self._adopted_checked = 0.0

    # ---- lifecycle ------------------------------------------------------------------------------

    def start(self) -> None:
        super().start()
        self._rebuild_ledger()
        self._warn_about_airflow_limits()
        self.log.info("RegionExecutor: %s", self.rf_config.cluster.describe_capacity())

    def end(self) -> None:
        # held workloads stay QUEUED in the database; the next scheduler queues them again
        if self.held:
            self.log.info("RegionExecutor: leaving %d waiting task instance(s) queued", len(self.held))
        for bulk_id in list(self.held):
            self.pool.cancel(bulk_id)
        self.held.clear()
        super().end()

    # ---- workloads ------------------------------------------------------------------------------

    def _process_workloads(self, workload_list: Sequence[Any]) -> None:
        others = []
        for workload in workload_list:
            if isinstance(workload, ExecuteTask):
                self.queued_tasks.pop(workload.key, None)
                self._admit(workload)
            else:
                others.append(workload)
        if others:
            super()._process_workloads(others)

    def _admit(self, workload: ExecuteTask) -> None:
        bulk = self._bulk_for(workload)
        self.store.record_waiting(**_grant_fields(workload, bulk))
        try:
            grants = self.pool.submit(bulk)
        except UnfulfillableBulk as rejection:
            self._reject(workload, bulk, str(rejection))
            return
        self.held[bulk.bulk_id] = workload
        self._start(grants)

    def _bulk_for(self, workload: ExecuteTask) -> Bulk:
        ti = workload.ti
        settings = (ti.executor_config or {}).get(EXECUTOR_CONFIG_KEY)
        job_id = f"{ti.dag_id}/{ti.run_id}"
        bulk_id = bulk_id_for(ti.id, ti.try_number)
        if not settings:
            return Bulk(bulk_id, job_id, f"{ti.dag_id}.{ti.task_id}", (UNKNOWN,))
        shard = max(ti.map_index, 0)
        requests = tuple(ResourceProfile.from_dict(p) for p in settings["requests"][shard])
        label = f"{ti.dag_id}.{ti.task_id}[{shard}] ({settings['labels'][shard]})"
        return Bulk(bulk_id, job_id, label, requests)

    def _start(self, grants: list[Grant]) -> None:
        """Hand granted workloads to LocalExecutor's workers."""
        started = 0
        for grant in grants:
            workload = self.held.pop(grant.bulk_id, None)
            if workload is None:
                continue
            self.store.record_granted(grant.bulk_id, [[slot.host, slot.index] for slot in grant.slots])
            workload.token = workload.generate_token(str(workload.ti.id), self.jwt_generator)
            self.granted[workload.key] = grant.bulk_id
            self.activity_queue.put(workload)
            started += 1
        if started:
            with self._unread_messages:
                self._unread_messages.value += started
            self._check_workers()

    def _reject(self, workload: ExecuteTask, bulk: Bulk, message: str) -> None:
        self.log.error("RegionExecutor rejects %s: %s", bulk.label, message)
        self.store.record_rejected(bulk.bulk_id, message)
        _append_task_log(workload, f"regionflow: this task can never get its slots: {message}")
        self.fail(workload.key, info=message)

    # ---- results ----------------------------------------------------------------------------------

    def change_state(self, key: Any, state: Any, info: Any = None, remove_running: bool = True) -> None:
        super().change_state(key, state, info, remove_running)
        if state in FINISHED_STATES and key in self.granted:
            self._release(self.granted.pop(key))

    def _release(self, bulk_id: str) -> None:
        self.store.record_released(bulk_id)
        self._start(self.pool.release(bulk_id))

    def sync(self) -> None:
        super().sync()
        self._start(self.pool.poll())  # blocklist entries that expired
        self._notice_starving_jobs()
        self._check_adopted()

    def _notice_starving_jobs(self) -> None:
        for notice in self.pool.overdue_jobs():
            if notice.job_id not in self._noticed_jobs:
                self._noticed_jobs.add(notice.job_id)
                self.log.warning("RegionExecutor: not enough resources: %s", notice.message)

    # ---- restart --------------------------------------------------------------------------------

    def _rebuild_ledger(self) -> None:
        """Re-take the slots of grants a previous scheduler made for task instances that still run."""
        for record in self.store.live_grants():
            bulk = Bulk(record.bulk_id, record.job_id, record.label,
                        tuple(ResourceProfile.from_dict(p) for p in record.requests) or (UNKNOWN,))
            try:
                self.pool.restore(bulk, [SlotRef(host, index) for host, index in record.slots])
            except SchedulingError as error:
                self.log.error("RegionExecutor: cannot restore grant %s: %s", record.bulk_id, error)
                continue
            self.adopted[record.bulk_id] = record.bulk_id.partition(":")[0]
        if self.adopted:
            self.log.info("RegionExecutor: restored %d grant(s) of running task instances", len(self.adopted))
        for record in self.store.waiting_grants():
            self.store.record_released(record.bulk_id)  # its task instance is queued again by the scheduler

    def _check_adopted(self) -> None:
        """Release restored grants once their task instances ended (they have no worker here)."""
        now = time.monotonic()
        if not self.adopted or now - self._adopted_checked < ADOPTED_CHECK_INTERVAL_S:
            return
        self._adopted_checked = now
        for bulk_id, ti_id in list(self.adopted.items()):
            if _task_instance_finished(ti_id):
                del self.adopted[bulk_id]
                self._release(bulk_id)

    def _warn_about_airflow_limits(self) -> None:
        from airflow.configuration import conf

        slots = self.rf_config.cluster.total_slots
        limits = {
            "[core] parallelism": self.parallelism,
            "[core] max_active_tasks_per_dag": conf.getint("core", "max_active_tasks_per_dag", fallback=16),
            "default_pool slots": conf.getint("core", "default_pool_task_slot_count", fallback=128),
        }
        for name, value in limits.items():
            if value < slots:
                self.log.warning("RegionExecutor: %s = %d is smaller than the cluster's %d slots; Airflow, not the "
                                 "slot pool, will gate tasks (raise it to at least %d)", name, value, slots, slots)


def _grant_fields(workload: ExecuteTask, bulk: Bulk) -> dict[str, Any]:
    ti = workload.ti
    return {"bulk_id": bulk.bulk_id, "dag_id": ti.dag_id, "run_id": ti.run_id, "task_id": ti.task_id,
            "map_index": ti.map_index, "try_number": ti.try_number, "job_id": bulk.job_id, "label": bulk.label,
            "requests": [p.to_dict() for p in bulk.requests]}


def _append_task_log(workload: ExecuteTask, message: str) -> None:
    """Write `message` where Airflow reads this try's log, so the UI shows why it failed."""
    from airflow.configuration import conf

    if not workload.log_path:
        return
    path = os.path.join(conf.get("logging", "base_log_folder"), str(workload.log_path))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(f'{{"timestamp": "{time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}", "level": "error", '
                     f'"event": {_json_string(message)}}}\n')


def _json_string(text: str) -> str:
    import json

    return json.dumps(text)


def _task_instance_finished(ti_id: str) -> bool:
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session

    with create_session() as session:
        ti = session.get(TaskInstance, ti_id)
        return ti is None or ti.state in FINISHED_STATES
