"""`RegionExecutor`: Airflow's LocalExecutor gated by regionflow's FIFO bulk slot pool.

Queued task instances are not started when Airflow hands them over: each becomes a bulk in the
`SlotPool` (a region task asks for the slots in its ``executor_config["regionflow"]``, any other task
for one slot) and starts only when the whole bulk is granted, oldest first across all DAG runs. A bulk
the cluster can never satisfy fails its task instance at once, with the pool's message written to the
task log. When a task ends, its slots go back to the pool and the next bulks start: as soon as Airflow's
database shows it done (`_check_granted`, as an Airflow pool frees slots when the state is written), or when
its worker reports the end, whichever comes first.

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
are mirrored into the pool every sync (the slow host is blocked for the whole DAG run), and so are the
entries of lost hosts, for every run, which `lost_hosts.LostHostWatch` probes: lifted when the host answers
again, extended while it is silent. Sensor tasks
ask for no slot (`regionflow.contract.NoSlots` in their ``executor_config``) and go straight to the
workers.

The executor builds none of its collaborators: `composition.build_parts` makes them from ``[regionflow]``,
and what they meet outside the scheduler's memory (clocks, Airflow's database, the store, Spark, the
workers) can be given instead through `composition.Seams` (tests do). Granted workloads go to
`workers.LocalWorkers`, through the gate's `workers.AirflowOperations`.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.executors.local_executor import LocalExecutor
from airflow.executors.workloads import ExecuteTask
from airflow.utils.state import TaskInstanceState

from ..config import RegionflowConfig
from ..contract import ContractError, from_executor_config
from ..core.errors import RegionflowError
from ..store import GrantState
from .admission import Try
from .composition import Seams, build_parts
from .guard import Every, guarded
from .guest import DONE_STATES, FINISHED_STATES, STILL_LIVE, STILL_QUEUED, RegionflowConfigError
from .preload import preload_task_modules
from .queued_stamps import STARTING_FRACTION
from .workers import AirflowOperations, LocalWorkers

IDLE_CHECK_INTERVAL_S = 5.0  # how often hosts are checked against [regionflow] slot_idle_timeout
HELD_CHECK_INTERVAL_S = 2.0  # how often waiting task instances are checked against Airflow's database
GRANTED_CHECK_INTERVAL_S = 0.5  # how often granted task instances are checked against Airflow's database
UNHEARD_END_GRACE_S = 120.0  # a try ended in Airflow's database this long without a worker's report: released


class RegionExecutor(LocalExecutor):
    serve_logs = False  # keep every server on loopback: logs are read from local files

    def __init__(self, *args: Any, seams: Seams | None = None, **kwargs: Any) -> None:
        """Airflow's arguments, and `seams`: what to use instead of the real outside world (tests: see
        `composition.Seams`); the collaborators are built by `composition.build_parts`."""
        super().__init__(*args, **kwargs)
        self.rf_config = _read_config(self.log)
        seams = seams or Seams()
        self.task_workers = seams.workers if seams.workers is not None else LocalWorkers(self)
        parts = build_parts(self.rf_config, self.log, AirflowOperations(self), seams)
        self.pool, self.store, self.gate = parts.pool, parts.store, parts.gate
        self.copies, self.recovery, self.blocklist = parts.copies, parts.recovery, parts.blocklist
        self.leftovers, self.metrics, self.notices = parts.leftovers, parts.metrics, parts.notices
        self.lost_hosts, self.idle_reaper = parts.lost_hosts, parts.idle_reaper
        # Airflow takes a try QUEUED this long for stuck; waiting tries are kept from counting (see `revoke_task`)
        self.queued_timeout_s, self.queued_stamps = parts.queued_timeout_s, parts.queued_stamps
        self.clock, self.task_states = parts.clock, parts.task_states
        self._held_check = Every(HELD_CHECK_INTERVAL_S)
        self._granted_check = Every(GRANTED_CHECK_INTERVAL_S)
        self._idle_check = Every(IDLE_CHECK_INTERVAL_S)

    # ---- lifecycle ------------------------------------------------------------------------------
    # Every entry point the scheduler calls is guarded: an executor is a guest in the scheduler's
    # loop, and an exception of ours must fail at most the task it concerns, never the scheduler.

    def start(self) -> None:
        # before LocalExecutor forks its workers, so every task process inherits the Connect client's modules
        guarded(self.log, "preloading the region tasks' modules", preload_task_modules, self.rf_config.backend,
                self.is_mp_using_fork, self.log)
        super().start()
        guarded(self.log, "joining the shared slot pool", self.recovery.start, _job_id(self.job_id))
        guarded(self.log, "reading the shared slot pool", self.gate.refresh)
        guarded(self.log, "checking Airflow's limits", self._warn_about_airflow_limits)
        if self.lost_hosts is not None:
            guarded(self.log, "probing lost hosts", self.lost_hosts.start)
        self.log.info("RegionExecutor: %s", self.rf_config.cluster.describe_capacity())

    def end(self) -> None:
        guarded(self.log, "leaving waiting task instances queued", self.gate.leave_waiting)
        guarded(self.log, "leaving the shared slot pool", self.recovery.end)
        if self.lost_hosts is not None:
            guarded(self.log, "stopping the lost-host probes", self.lost_hosts.stop)
        guarded(self.log, "ending LocalExecutor's workers", super().end)

    def terminate(self) -> None:
        guarded(self.log, "terminating", super().terminate)

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
        """Airflow's scheduler revokes task instances QUEUED for longer than ``[scheduler]
        task_queued_timeout``, then queues them again (at most twice) or fails them.

        A try that waits for its slot bulk is not stuck: as in Flink, only a request no cluster state can
        satisfy fails (at once, see `AdmissionGate.admit`), and a long wait gets a not-enough-resources
        notice (``[regionflow] resource_wait_timeout``). So the executor keeps such a try's queued time fresh
        in Airflow's database (`QueuedStamps`, every sync), and the scheduler's stuck check never selects
        it; a try handed to the workers is stamped then. What Airflow revokes is therefore stuck (its worker
        never started it): its slots are released and it is forgotten, never declined. A
        ``NotImplementedError`` here would end Airflow's loop over this executor's stuck tries, leaving
        every stuck try behind it in place.

        Should the stamps have failed to reach the database (the scheduler's stuck check came first): a try
        still waiting is withdrawn from the queue (Airflow queues it again); a try handed to the workers
        less than half the timeout ago keeps its slots, since its workload cannot be taken back from
        LocalExecutor's queue (its worker's report releases them).
        """
        self._revoke(ti.key)

    def _revoke(self, key: Any) -> bool:
        """Revoke try `key`; False when it was handed to the workers moments ago and keeps its slots."""
        not_stuck = self.gate.not_stuck(key, self.clock(), self.queued_timeout_s * STARTING_FRACTION)
        if not_stuck is not None:
            self.log.warning("RegionExecutor: Airflow took %s for stuck, but the executor %s (its queued time "
                             "could not be renewed in time)", key, not_stuck)
            if key not in self.gate.waiting:
                return False
        guarded(self.log, f"revoking {key}", self.gate.revoke, key)
        self.running.discard(key)
        self.queued_tasks.pop(key, None)
        return True

    def cleanup_stuck_queued_tasks(self, tis: list[Any]) -> list[str]:
        """Airflow's older name for `revoke_task`, on a list: revokes what can be revoked."""
        return [repr(ti) for ti in tis if self._revoke(ti.key)]

    def try_adopt_task_instances(self, tis: Sequence[Any]) -> Sequence[Any]:
        """Task instances of a scheduler that stopped. A RUNNING one keeps running (its task process
        reports to Airflow's API server, not to a scheduler): its grant becomes this scheduler's and is
        released when it ends; nothing restarts. A QUEUED one has its row released and is returned for
        Airflow to reset and schedule again (its try waited for slots, or its worker went with the
        scheduler)."""
        not_adopted = []
        for ti in tis:
            adopted = guarded(self.log, f"adopting {ti.key}", self._adopt, ti)
            if not adopted:
                not_adopted.append(ti)
        return not_adopted

    def _adopt(self, ti: Any) -> bool:
        record = self.store.current_grant(str(ti.id), ti.try_number)
        if ti.state == TaskInstanceState.RUNNING:
            if record is not None and record.state is GrantState.GRANTED:
                self.recovery.adopt(record.bulk_id, str(ti.id))  # the next sync's refresh reads the change
            return True
        if record is not None and record.state in (GrantState.WAITING, GrantState.GRANTED):
            self.recovery.adopted.pop(record.bulk_id, None)  # taken over already: its task will not run
            self.gate.release(record.bulk_id)
        return False

    # ---- workloads ------------------------------------------------------------------------------

    def _process_workloads(self, workload_list: Sequence[Any]) -> None:
        others = []
        for workload in workload_list:
            if isinstance(workload, ExecuteTask):
                self.queued_tasks.pop(workload.key, None)
                try:
                    self.gate.admit(workload, _try_of(workload))
                except ContractError as error:  # a DAG serialized by another regionflow, say: fail the task
                    self.gate.fail(workload, workload.key, f"regionflow: {error}")
                except Exception as error:  # noqa: BLE001 - fail the task, not the scheduler
                    self._fail_unexpected(workload, "admitting it to the slot pool", error)
            else:
                others.append(workload)
        if others:
            guarded(self.log, "handing callbacks to the workers", super()._process_workloads, others)

    def _release_adopted(self, bulk_id: str) -> None:
        """An adopted try (of a stopped scheduler) ended: settle what its task process left running first."""
        guarded(self.log, f"settling what {bulk_id} left running", self.leftovers.settle, bulk_id)
        self.gate.release(bulk_id)

    def _fail_unexpected(self, workload: ExecuteTask, doing: str, error: BaseException) -> None:
        self.gate.fail_unexpected(workload, workload.key, doing, error)

    # ---- results ----------------------------------------------------------------------------------

    def change_state(self, key: Any, state: Any, info: Any = None, remove_running: bool = True) -> None:
        finished = state in FINISHED_STATES
        if finished and not self.gate.end_of_run(key, str(state)):
            return
        super().change_state(key, state, info, remove_running)
        if finished:
            bulk_id = self.gate.granted.get(key)
            if bulk_id is not None:  # before its slots go back: Spark work a killed task process left behind
                guarded(self.log, f"settling what {key} left running", self.leftovers.settle, bulk_id)
            self.gate.after_end(key, str(state))

    def sync(self) -> None:
        guarded(self.log, "reading the workers' results", self.task_workers.read_results)
        for what, step in (("finishing speculative copies", self.copies.finish_ended),
                           ("mirroring the blocklist", self.blocklist.mirror),
                           ("taking copy requests", self.copies.take_requests),
                           ("polling the slot pool", self._poll_pool),
                           ("noticing starving jobs", self.notices.tell),
                           ("heartbeat and taking over stopped schedulers",
                            lambda: self.recovery.tick(self._release_adopted)),
                           ("reading the shared slot pool", self.gate.refresh),
                           ("starting an elastic region with fewer slots",
                            lambda: self.gate.start_elastic(self.rf_config.elastic_wait, self.clock())),
                           ("checking waiting task instances", self._check_held),
                           ("renewing the queued time of waiting task instances", self._renew_queued_times),
                           ("checking granted task instances", self._check_granted),
                           ("stopping idle Spark Connect servers", self._stop_idle_servers),
                           ("reporting the pool's metrics", lambda: self.metrics.gauges(self.pool))):
            guarded(self.log, what, step)

    def _stop_idle_servers(self) -> None:
        if self.idle_reaper is None or not self._idle_check.due(self.clock()):
            return
        for host in self.idle_reaper.tick(self.pool.busy_hosts()):
            self.log.info("RegionExecutor: host %s idle for %.0f s: its Spark Connect server is stopped "
                          "(slot_idle_timeout); the next region on it starts it again", host,
                          self.idle_reaper.timeout)

    def _poll_pool(self) -> None:
        self.gate.start(self.pool.poll())  # blocklist entries that expired

    def _check_held(self) -> None:
        """Withdraw waiting workloads whose task instance changed outside the executor: marked success
        or failed in the UI, cleared (a new try), deleted. Airflow's own metadata says so; LocalExecutor
        would have started them and had the execution API refuse them, we just stop waiting."""
        if not self.gate.held or not self._held_check.due(self.clock()):
            return
        states = self.task_states([held.attempt.ti_id for held in self.gate.held.values()])
        self.gate.withdraw_changed(states, STILL_QUEUED)

    def _renew_queued_times(self) -> None:
        """Keep Airflow's stuck-in-queued check off the tries that wait for slots (`QueuedStamps`)."""
        self.queued_stamps.tick(held.attempt.ti_id for held in self.gate.held.values())

    def _check_granted(self) -> None:
        """Give back the slots of granted tries that ended in Airflow's database, from one read of their states:

        - done for good (success, failed, up for retry, another try, deleted; `AdmissionGate.ended_in_database`):
          at once, without waiting for the worker's report, which comes once the task process has exited, up to
          seconds after the state is written (the morning benchmark measured 0.5 s median, 2.6 s at most),
          while an Airflow pool frees its slots when the state is written;
        - ended otherwise (deferred, up for reschedule) with no worker's report for `UNHEARD_END_GRACE_S`
          (`AdmissionGate.unheard_ends`: LocalExecutor loses the report of a worker process that dies).

        Spark work a try left running is stopped first, as for any ended try."""
        now = self.clock()
        if not self.gate.granted or not self._granted_check.due(now):
            return
        states = self.task_states(self.gate.granted_ti_ids())
        for key, note in self.gate.ended_in_database(states, DONE_STATES):
            guarded(self.log, f"settling what {key} left running", self.leftovers.settle, self.gate.granted[key])
            self.gate.end_early(key, note)
        for key, now_is in self.gate.unheard_ends(states, STILL_LIVE, now, UNHEARD_END_GRACE_S):
            guarded(self.log, f"settling what {key} left running", self.leftovers.settle, self.gate.granted[key])
            self.running.discard(key)
            self.gate.end_unheard(key, now_is)

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


def _job_id(job_id: Any) -> int | None:
    return job_id if isinstance(job_id, int) else None


def _try_of(workload: ExecuteTask) -> Try:
    """What the admission gate needs of a workload; its contract is read (and checked) here."""
    ti = workload.ti
    contract = from_executor_config(ti.executor_config, f"{ti.dag_id}.{ti.task_id}")
    return Try(workload.key, str(ti.id), ti.try_number, ti.dag_id, ti.run_id, ti.task_id, ti.map_index, contract)


def _read_config(log: Any) -> RegionflowConfig:
    """``[regionflow]``, checked before the executor does anything; a bad option is logged as one error line
    in the scheduler's log and raised as `RegionflowConfigError` with the same line (the scheduler exits)."""
    try:
        return RegionflowConfig.from_airflow()
    except RegionflowError as error:
        message = f"RegionExecutor cannot start: {error}"
        log.error("%s", message)
        raise RegionflowConfigError(message) from None
