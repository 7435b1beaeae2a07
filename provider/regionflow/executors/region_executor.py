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

Speculative copies (see `regionflow.sensors.speculation`) run in `copies.CopyRunner`: the sensor writes
a copy request into the store, `sync()` has the runner take pending requests as bulks ``copy:<id>`` in
the same FIFO pool, and a granted copy runs in a thread as an `Attempt`. The store's blocklist entries
are mirrored into the pool every sync (the slow host is blocked for the whole DAG run). Sensor tasks
ask for no slot (`regionflow.contract.NoSlots` in their ``executor_config``) and go straight to the
workers.
"""
from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from airflow.executors.local_executor import LocalExecutor
from airflow.executors.workloads import ExecuteTask
from airflow.utils.state import TaskInstanceState

from ..airflow_internals import hand_to_local_workers
from ..config import RegionflowConfig
from ..contract import ContractError, NoSlots, RegionSlots, TaskContract, from_executor_config
from ..core.errors import RegionflowError
from ..core.resources import UNKNOWN
from ..scheduling.errors import UnfulfillableBulk
from ..scheduling.pool import Bulk, Grant, SlotPool
from ..spark.backends import configured_servers
from ..spark.idle import IdleServerReaper
from ..store import (
    GrantState,
    RegionflowStore,
    SlotConflictError,
    bulk_id_for,
)
from .copies import CopyRunner
from .guest import (
    FINISHED_STATES,
    STILL_QUEUED,
    RegionflowConfigError,
    append_task_log,
    guarded,
    task_instance_finished,
    task_instance_states,
)
from .metrics import PoolMetrics
from .recovery import BlocklistMirror, GrantRecovery

IDLE_CHECK_INTERVAL_S = 5.0  # how often hosts are checked against [regionflow] session_idle_timeout
HELD_CHECK_INTERVAL_S = 2.0  # how often waiting task instances are checked against Airflow's database


class RegionExecutor(LocalExecutor):
    serve_logs = False  # keep every server on loopback: logs are read from local files

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.rf_config = _read_config(self.log)
        self.pool = SlotPool(self.rf_config.cluster, blocklist_expiry_s=self.rf_config.blocklist_expiry,
                             resource_wait_timeout_s=self.rf_config.resource_wait_timeout)
        self.store = RegionflowStore.from_config(self.rf_config.store_url)
        self.metrics = PoolMetrics()
        self.held: dict[str, ExecuteTask] = {}  # bulk id -> workload waiting for its grant
        self.waiting: dict[Any, str] = {}  # task instance key -> bulk id of its waiting admission
        self.granted: dict[Any, str] = {}  # task instance key -> bulk id of its live grant
        self.runs: dict[Any, int] = {}  # task instance key -> runs handed to the workers, end not yet read
        self._noticed_jobs: set[str] = set()
        self._held_checked = 0.0
        self.copies = CopyRunner(self.pool, self.store, self.rf_config, self.log, start=self._start,
                                 release=self._release)  # speculative copies
        self.recovery = GrantRecovery(self.store, self.pool, self.copies, self.log, task_instance_finished)
        self.blocklist = BlocklistMirror(self.store, self.pool, self.log)
        self.idle_reaper = _idle_reaper(self.rf_config)  # session backend: stops servers of idle hosts
        self._idle_checked = 0.0

    # ---- lifecycle ------------------------------------------------------------------------------
    # Every entry point the scheduler calls is guarded: an executor is a guest in the scheduler's
    # loop, and an exception of ours must fail at most the task it concerns, never the scheduler.

    def start(self) -> None:
        super().start()
        guarded(self.log, "restoring the grants of a previous scheduler", self.recovery.rebuild)
        guarded(self.log, "checking Airflow's limits", self._warn_about_airflow_limits)
        self.log.info("RegionExecutor: %s", self.rf_config.cluster.describe_capacity())

    def end(self) -> None:
        guarded(self.log, "leaving waiting task instances queued", self._leave_waiting)
        guarded(self.log, "ending LocalExecutor's workers", super().end)

    def terminate(self) -> None:
        guarded(self.log, "terminating", super().terminate)

    def _leave_waiting(self) -> None:
        # held workloads stay QUEUED in the database; the next scheduler queues them again
        if self.held:
            self.log.info("RegionExecutor: leaving %d waiting task instance(s) queued", len(self.held))
        for bulk_id in list(self.held):
            self.pool.cancel(bulk_id)
        self.held.clear()
        self.waiting.clear()

    def heartbeat(self) -> None:
        guarded(self.log, "heartbeat", super().heartbeat)

    def queue_workload(self, workload: Any, session: Any) -> None:
        try:
            super().queue_workload(workload, session)
        except Exception as error:  # noqa: BLE001 - a workload we cannot take fails, the scheduler goes on
            if isinstance(workload, ExecuteTask):
                self._fail_unexpected(workload, "queueing it", error)
            else:
                self.log.exception("RegionExecutor: cannot queue %r", workload)

    def revoke_task(self, *, ti: Any) -> None:
        """Declined, as LocalExecutor does (Airflow's scheduler then leaves the task queued).

        The scheduler revokes task instances QUEUED for longer than ``[scheduler] task_queued_timeout``,
        re-queues them at most twice and then fails them. Under this executor a QUEUED task instance
        waits for its slot bulk in FIFO order, and waiting for busy slots is not being stuck: as in
        Flink, only a request no cluster state can satisfy fails (at once, see `_reject`), and a long
        wait gets a not-enough-resources notice (``[regionflow] resource_wait_timeout``). Revoking would
        throw the task to the back of the queue and fail big regions on a busy cluster.
        """
        raise NotImplementedError(
            "RegionExecutor keeps task instances that wait for slots in FIFO order; it does not revoke them")

    # ---- workloads ------------------------------------------------------------------------------

    def _process_workloads(self, workload_list: Sequence[Any]) -> None:
        others = []
        for workload in workload_list:
            if isinstance(workload, ExecuteTask):
                self.queued_tasks.pop(workload.key, None)
                try:
                    self._admit(workload)
                except ContractError as error:  # a DAG serialized by another regionflow, say: fail the task
                    self._fail_task(workload, f"regionflow: {error}")
                except Exception as error:  # noqa: BLE001 - fail the task, not the scheduler
                    self._fail_unexpected(workload, "admitting it to the slot pool", error)
            else:
                others.append(workload)
        if others:
            guarded(self.log, "handing callbacks to the workers", super()._process_workloads, others)

    def _admit(self, workload: ExecuteTask) -> None:
        """One workload from the scheduler: a new try, or the same try queued again (see README)."""
        key = workload.key
        if self._runs_without_slots(workload):  # speculation sensors: a few store reads per poke
            self._hand_over(workload)
            return
        live = self.granted.get(key)
        if live is not None:
            # The scheduler queued this try again (resume, reschedule poke) before we read the end of its
            # previous run: that run has left the slots (Airflow queues a try again only once its process
            # reported), so the live grant serves the new run and the late end is not reported.
            self.store.record_reused(live, f"re-queued at {_now()} while granted: the live grant was reused")
            self._hand_over(workload)
            return
        if key in self.waiting:  # queued twice while waiting: it keeps its place, with the newest token
            self.held[self.waiting[key]] = workload
            return
        ti = workload.ti
        bulk = self._bulk_for(workload)
        record = self.store.admit(ti.id, ti.try_number, dag_id=ti.dag_id, run_id=ti.run_id, task_id=ti.task_id,
                                  map_index=ti.map_index, job_id=bulk.job_id, label=bulk.label,
                                  requests=[p.to_dict() for p in bulk.requests])
        if record.state is GrantState.GRANTED:
            if self.recovery.adopted.pop(record.bulk_id, None) is not None:  # granted before a scheduler restart
                self.granted[key] = record.bulk_id
                self.store.record_reused(record.bulk_id, f"re-queued at {_now()} after a scheduler restart: "
                                                         f"the restored grant was reused")
                self._hand_over(workload)
                return
            self.store.record_released(record.bulk_id, "stale: no scheduler holds this grant any more")
            record = self.store.admit(ti.id, ti.try_number, dag_id=ti.dag_id, run_id=ti.run_id, task_id=ti.task_id,
                                      map_index=ti.map_index, job_id=bulk.job_id, label=bulk.label,
                                      requests=[p.to_dict() for p in bulk.requests])
        bulk = replace(bulk, bulk_id=record.bulk_id)
        try:
            grants = self.pool.submit(bulk)
        except UnfulfillableBulk as rejection:
            self._reject(workload, bulk, str(rejection))
            return
        self.held[bulk.bulk_id] = workload
        self.waiting[key] = bulk.bulk_id
        self._start(grants)

    @staticmethod
    def _contract(workload: ExecuteTask) -> TaskContract | None:
        """What the task carries for regionflow (`regionflow.contract`); a `ContractError` names the fix."""
        ti = workload.ti
        return from_executor_config(ti.executor_config, f"{ti.dag_id}.{ti.task_id}")

    def _runs_without_slots(self, workload: ExecuteTask) -> bool:
        return isinstance(self._contract(workload), NoSlots)

    def _bulk_for(self, workload: ExecuteTask) -> Bulk:
        """The slot bulk the workload asks for; its id is set by the store's admission."""
        ti = workload.ti
        contract = self._contract(workload)
        job_id = f"{ti.dag_id}/{ti.run_id}"
        bulk_id = bulk_id_for(ti.id, ti.try_number)
        if not isinstance(contract, RegionSlots):
            return Bulk(bulk_id, job_id, f"{ti.dag_id}.{ti.task_id}", (UNKNOWN,))
        requests, label = contract.shard(ti.map_index)
        return Bulk(bulk_id, job_id, f"{ti.dag_id}.{ti.task_id}[{max(ti.map_index, 0)}] ({label})", requests)

    def _start(self, grants: list[Grant]) -> None:
        """Hand granted workloads to LocalExecutor's workers (copies to their runner)."""
        for grant in grants:
            if self.copies.owns(grant.bulk_id):
                guarded(self.log, f"launching speculative copy {grant.bulk_id}", self.copies.launch, grant)
                continue
            workload = self.held.pop(grant.bulk_id, None)
            if workload is None:
                continue
            self.waiting.pop(workload.key, None)
            self.granted[workload.key] = grant.bulk_id
            try:
                self._record_granted(grant)
            except Exception as error:  # noqa: BLE001 - the task could not learn its slots: fail it
                self._fail_unexpected(workload, "recording its grant", error)
                continue
            self._hand_over(workload)

    def _record_granted(self, grant: Grant) -> None:
        slots = [[slot.host, slot.index] for slot in grant.slots]
        try:
            record = self.store.record_granted(grant.bulk_id, slots)
        except SlotConflictError:
            # This process's pool is the truth about its slots: a live row it does not hold is stale
            # (recording its release failed earlier); release such rows and record the grant again.
            if not self._release_stale_rows():
                raise
            record = self.store.record_granted(grant.bulk_id, slots)
        waited = None if record.granted_at is None else record.granted_at - record.submitted_at
        guarded(self.log, "counting a grant", self.metrics.granted, waited)

    def _release_stale_rows(self) -> int:
        stale = [record.bulk_id for record in self.store.live_grants()
                 if self.pool.grant_of(record.bulk_id) is None and record.bulk_id not in self.copies.running
                 and record.bulk_id not in self.recovery.adopted]
        for bulk_id in stale:
            self.store.record_released(bulk_id, "stale: its release had not been recorded")
            self.log.warning("RegionExecutor: released the stale ledger row of %s", bulk_id)
        return len(stale)

    def _hand_over(self, workload: ExecuteTask) -> None:
        """Give a workload to LocalExecutor's workers, with a fresh token (it may have waited long)."""
        key = workload.key
        workload.token = workload.generate_token(str(workload.ti.id), self.jwt_generator)
        self.runs[key] = self.runs.get(key, 0) + 1
        self.running.add(key)
        hand_to_local_workers(self, workload)

    def _reject(self, workload: ExecuteTask, bulk: Bulk, message: str) -> None:
        self.log.error("RegionExecutor rejects %s: %s", bulk.label, message)
        guarded(self.log, "recording a rejection", self.store.record_rejected, bulk.bulk_id, message)
        guarded(self.log, "counting a rejection", self.metrics.rejected)
        append_task_log(workload, f"regionflow: this task can never get its slots: {message}")
        self.fail(workload.key, info=message)

    def _fail_unexpected(self, workload: ExecuteTask, doing: str, error: BaseException) -> None:
        """An error of ours while handling `workload`: fail that task (its log says why), go on."""
        message = f"regionflow: unexpected error while {doing}: {type(error).__name__}: {error}"
        self.log.error("RegionExecutor: %s failed for %s; the task instance fails", doing, workload.key,
                       exc_info=error)
        self._fail_task(workload, message)

    def _fail_task(self, workload: ExecuteTask, message: str) -> None:
        """Fail `workload`'s task instance with `message` (in its log and the scheduler's), freeing any
        slots it waits for or holds."""
        self.log.error("RegionExecutor: %s fails: %s", workload.key, message)
        key = workload.key
        bulk_id = self.waiting.pop(key, None) or self.granted.pop(key, None)
        if bulk_id is not None:
            self.held.pop(bulk_id, None)
            guarded(self.log, "freeing its slots", self._free_in_pool, bulk_id, message)
        append_task_log(workload, message)
        self.runs.pop(key, None)
        try:
            super().change_state(key, TaskInstanceState.FAILED, message)
        except Exception:  # noqa: BLE001
            self.log.exception("RegionExecutor: cannot report %s as failed", key)

    def _free_in_pool(self, bulk_id: str, message: str | None = None) -> None:
        if self.pool.is_waiting(bulk_id):
            grants = self.pool.cancel(bulk_id)
        elif self.pool.grant_of(bulk_id) is not None:
            grants = self.pool.release(bulk_id)
        else:
            grants = []
        guarded(self.log, f"recording the release of {bulk_id}", self._record_released, bulk_id, message)
        self._start(grants)

    def _record_released(self, bulk_id: str, message: str | None) -> None:
        record = self.store.grant_for(bulk_id)
        if record is not None and record.state in (GrantState.WAITING, GrantState.GRANTED, GrantState.LOST):
            self.store.record_released(bulk_id, message)

    # ---- results ----------------------------------------------------------------------------------

    def change_state(self, key: Any, state: Any, info: Any = None, remove_running: bool = True) -> None:
        if state in FINISHED_STATES:
            left = self.runs.get(key, 0) - 1
            if left > 0:
                # The end of an earlier run of this try (a reschedule poke, a run before a deferral) read
                # after the scheduler queued the try again: reported now, Airflow would take it for the
                # new run's end and fail a QUEUED task instance ("state changed externally").
                self.runs[key] = left
                self.log.info("RegionExecutor: late %s of an earlier run of %s not reported", state, key)
                return
            self.runs.pop(key, None)
        super().change_state(key, state, info, remove_running)
        if state not in FINISHED_STATES:
            return
        if key in self.granted:
            guarded(self.log, f"releasing the slots of {key}", self._release, self.granted.pop(key))
        elif key in self.waiting:  # failed by the scheduler while it waited for slots
            guarded(self.log, f"withdrawing {key}", self._withdraw, self.waiting[key],
                    f"withdrawn: the scheduler reported it {state} while it waited for slots")

    def _release(self, bulk_id: str) -> None:
        self._free_in_pool(bulk_id)

    def _withdraw(self, bulk_id: str, why: str) -> None:
        """Take a waiting workload out of the queue (its task instance no longer wants to run)."""
        workload = self.held.pop(bulk_id, None)
        if workload is not None:
            self.waiting.pop(workload.key, None)
            append_task_log(workload, f"regionflow: {why}", level="info")
        self.log.info("RegionExecutor: %s %s", bulk_id, why)
        self._free_in_pool(bulk_id, why)

    def sync(self) -> None:
        guarded(self.log, "reading the workers' results", super().sync)
        for what, step in (("finishing speculative copies", self.copies.finish_ended),
                           ("mirroring the blocklist", self.blocklist.mirror),
                           ("taking copy requests", self.copies.take_requests),
                           ("polling the slot pool", self._poll_pool),
                           ("noticing starving jobs", self._notice_starving_jobs),
                           ("checking restored grants", lambda: self.recovery.release_ended(self._release)),
                           ("checking waiting task instances", self._check_held),
                           ("stopping idle Spark Connect servers", self._stop_idle_servers),
                           ("reporting the pool's metrics", lambda: self.metrics.gauges(self.pool))):
            guarded(self.log, what, step)

    def _stop_idle_servers(self) -> None:
        now = time.monotonic()
        if self.idle_reaper is None or now - self._idle_checked < IDLE_CHECK_INTERVAL_S:
            return
        self._idle_checked = now
        for host in self.idle_reaper.tick(self.pool.busy_hosts()):
            self.log.info("RegionExecutor: host %s idle for %.0f s: its Spark Connect server is stopped "
                          "(session_idle_timeout); the next region on it starts it again", host,
                          self.idle_reaper.timeout)

    def _poll_pool(self) -> None:
        self._start(self.pool.poll())  # blocklist entries that expired

    def _check_held(self) -> None:
        """Withdraw waiting workloads whose task instance changed outside the executor: marked success
        or failed in the UI, cleared (a new try), deleted. Airflow's own metadata says so; LocalExecutor
        would have started them and had the execution API refuse them, we just stop waiting."""
        now = time.monotonic()
        if not self.held or now - self._held_checked < HELD_CHECK_INTERVAL_S:
            return
        self._held_checked = now
        found = task_instance_states([str(w.ti.id) for w in self.held.values()])
        for bulk_id, workload in list(self.held.items()):
            state, try_number = found.get(str(workload.ti.id), (None, None))
            if try_number == workload.ti.try_number and state in STILL_QUEUED:
                continue
            now_is = "deleted" if try_number is None else f"{state or 'cleared'} (try {try_number})"
            self._withdraw(bulk_id, f"withdrawn from the slot queue: the task instance is {now_is} now")

    def _notice_starving_jobs(self) -> None:
        for notice in self.pool.overdue_jobs():
            if notice.job_id not in self._noticed_jobs:
                self._noticed_jobs.add(notice.job_id)
                self.log.warning("RegionExecutor: not enough resources: %s", notice.message)

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


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _read_config(log: Any) -> RegionflowConfig:
    """``[regionflow]``, checked before the executor does anything; a bad option is logged as one error line
    in the scheduler's log and raised as `RegionflowConfigError` with the same line (the scheduler exits)."""
    try:
        return RegionflowConfig.from_airflow()
    except RegionflowError as error:
        message = f"RegionExecutor cannot start: {error}"
        log.error("%s", message)
        raise RegionflowConfigError(message) from None


def _idle_reaper(config: RegionflowConfig) -> IdleServerReaper | None:
    """The idle-server reaper of the session backend; None with submit or a timeout of 0."""
    if config.backend != "session" or config.session_idle_timeout <= 0:
        return None
    return IdleServerReaper(configured_servers(config), config.session_idle_timeout)
