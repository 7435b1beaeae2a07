"""`UnitRunService`: one unit's run once it may start: placed on its grant, run as one attempt, settled.

Settling: a lost host is blocklisted for every run (`block_lost_host`); an attempt that did not commit
waits while a speculative copy of the shard is open, and the shard succeeds if a copy commits; the first
commit is recorded as the unit's output, copies not yet running are cancelled, and the inputs whose every
consumer has committed are released (``[regionflow] partition_retention = 0``). The RegionOperator keeps
only Airflow's part (context, deferral, logging, ``on_kill``).
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..config import RegionflowConfig
from ..core.attempts import AttemptState
from ..core.errors import RegionflowError
from ..scheduling.blocklist import EVERY_JOB
from ..scheduling.hosts import Host
from ..spark.launch.attempt import Attempt, AttemptOutcome, Backend
from ..spark.launch.cluster_managers import excluded_nodes
from ..spark.launch.submission import grant_target
from ..spark.launch.watch import DEFAULT_WATCH_INTERVAL_S, Settlement
from ..store import GrantState, RegionflowStore, job_id_for
from ..store.recorder import StoreRecorder
from .attempts import attempt_on_config, new_attempt
from .opened import OpenedUnit


class UnitFailed(RegionflowError):
    """The unit's attempt failed and no speculative copy of it committed."""


@dataclass(frozen=True)
class TryRef:
    """The Airflow task instance try that runs a unit (its identity in regionflow's store)."""

    dag_id: str
    run_id: str
    task_id: str
    map_index: int
    ti_id: Any
    try_number: int


@dataclass(frozen=True)
class Placement:
    """Where the attempt runs: `host` with `slots` slots, under the executor's bulk `bulk_id` (None when
    no RegionExecutor granted this try)."""

    bulk_id: str | None
    host: Host
    slots: int


@dataclass(frozen=True)
class UnitResult:
    unit: str
    attempt: str
    winner: str
    winner_host: str
    sinks: dict[str, Any]
    parallelism: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"unit": self.unit, "attempt": self.attempt, "winner": self.winner, "winner_host": self.winner_host,
                "sinks": self.sinks, "parallelism": self.parallelism}


class UnitRunService:
    """Runs opened units of Airflow task instance tries; `log` is a logging.Logger (the task log)."""

    def __init__(self, config: RegionflowConfig, store: RegionflowStore, log: Any, *,
                 sleep: Callable[[float], None] = time.sleep, backend: Backend | None = None) -> None:
        self.config, self.store, self.log, self.sleep = config, store, log, sleep
        self.backend = backend  # None: the one ``[regionflow] backend`` names (tests pass a recording double)

    def place(self, opened: OpenedUnit, ref: TryRef) -> Placement:
        """The grant of the try's newest admission, or, without one (not run by the RegionExecutor, e.g.
        ``airflow tasks test``), the first host with as many slots as the unit asks for."""
        grant = self.store.current_grant(ref.ti_id, ref.try_number)
        if grant is not None and grant.host and grant.state is GrantState.GRANTED:
            target = grant_target([host for host, _ in grant.slots], self.config.cluster.host,
                                  pool_masters=self.config.backend != "session")
            if target.note:
                self.log.warning("%s", target.note)
            return Placement(grant.bulk_id, target.host, target.slots)
        layout, unit = opened.layout, opened.unit
        host = next(iter(self.config.cluster))
        slots = min(host.slots, len(layout.requests(unit, layout.width(unit, host.slots))))
        self.log.warning("no live slot grant recorded for try %d of %s (not run by RegionExecutor?): using host %s "
                         "with %d slot(s)", ref.try_number, ref.ti_id, host.name, slots)
        return Placement(None, host, slots)

    def run(self, opened: OpenedUnit, ref: TryRef, attempt_id: str, *, placement: Placement | None = None,
            on_line: Callable[[str], None] | None = None, watch_interval: float = DEFAULT_WATCH_INTERVAL_S,
            parent_pid: int | None = None, started: Callable[[Attempt], None] = lambda attempt: None) -> UnitResult:
        """Place, run one attempt, settle; raises `UnitFailed` when neither it nor a copy committed.
        `started` gets the attempt before it runs (so the caller can cancel it)."""
        placement = placement or self.place(opened, ref)
        host, slots = placement.host, placement.slots
        opened.claim_sinks()
        job_id = job_id_for(ref.dag_id, ref.run_id)
        built = opened.unit_task(slots=slots, host=host.name, attempt_id=attempt_id, excluded_nodes=excluded_nodes(
            host, self.config.cluster.hosts, lambda: [e.host for e in self.store.active_blocks(job_id=job_id)]))
        task = built.task
        recorder = StoreRecorder(self.store, ref.dag_id, ref.run_id, ref.task_id, ref.map_index,
                                 bulk_id=placement.bulk_id)
        watch: dict[str, Any] = {"recorder": recorder, "on_line": on_line, "watch_interval": watch_interval,
                                 "parent_pid": parent_pid}
        task_path = opened.task_path(attempt_id)
        attempt = (new_attempt(task, task_path, host, slots, self.backend, opened.partitions, **watch)
                   if self.backend is not None else
                   attempt_on_config(self.config, task, task_path, host, slots, opened.partitions,
                                     job_conf=self.config.spark_conf, py_files=lambda: opened.py_files(task), **watch))
        started(attempt)
        self.log.info("unit %s: %d region(s) on host %s with %d slot(s), attempt %s (%s backend)", task.unit_name,
                      len(task.regions), host.name, slots, attempt_id, attempt.backend.name)
        if built.decision.values:
            self.log.info("unit %s: adaptive parallelism %s", task.unit_name, built.decision.reason)
        outcome = attempt.run()
        return self._settle(opened, ref, attempt_id, host.name, outcome, watch_interval)

    def _settle(self, opened: OpenedUnit, ref: TryRef, attempt_id: str, host: str, outcome: AttemptOutcome,
                watch_interval: float) -> UnitResult:
        if outcome.host_lost:
            self.log.error("unit %s on host %s: %s", opened.name, host, outcome.host_lost)
            self.block_lost_host(host, outcome.host_lost)
        settlement = outcome.settlement
        if not outcome.unit_done:
            settlement = self._wait_for_copies(opened, ref, settlement, watch_interval)
        if not settlement.unit_done:
            raise UnitFailed(f"unit {opened.name} failed: {outcome.reason}")
        committed = settlement.winner
        assert committed is not None, "a done unit has a commit"
        winner = self.store.record_commit(ref.dag_id, ref.run_id, opened.key, committed.attempt_id)
        self.store.cancel_copies(ref.dag_id, ref.run_id, ref.task_id, ref.map_index)
        self._release_inputs(opened)
        if winner == attempt_id:
            self.log.info("unit %s committed by attempt %s on host %s", opened.name, winner, host)
        else:
            self.log.info("unit %s: attempt %s on host %s committed first and wins; this attempt %s on host %s "
                          "was %s", opened.name, winner, settlement.winner_host, attempt_id, host,
                          "cancelled" if outcome.state is AttemptState.LOST_COMMIT else outcome.state.value)
        return UnitResult(opened.name, attempt_id, winner, settlement.winner_host,
                          committed.manifest.get("sinks", {}), committed.manifest.get("parallelism", {}))

    def _wait_for_copies(self, opened: OpenedUnit, ref: TryRef, failed: Settlement,
                         watch_interval: float) -> Settlement:
        """This attempt failed: while a speculative copy of the shard is still open (pending, granted or
        running), wait for it; the shard succeeds if the copy commits."""
        announced = False
        while True:
            committed = opened.partitions.committed(opened.key)
            if committed is not None:
                return Settlement(AttemptState.LOST_COMMIT, committed)
            open_copies = [r for r in self.store.copy_requests(ref.dag_id, ref.run_id, ref.task_id, ref.map_index)
                           if r.is_open]
            if not open_copies:
                committed = opened.partitions.committed(opened.key)  # a copy may have won just now
                return failed if committed is None else Settlement(AttemptState.LOST_COMMIT, committed)
            if not announced:
                self.log.warning("unit %s: this attempt %s; waiting for speculative copy request(s) %s",
                                 opened.name, failed.state, [r.request_id for r in open_copies])
                announced = True
            self.sleep(watch_interval)

    def block_lost_host(self, host: str, why: str) -> None:
        """Keep every DAG run's next regions, this task's retry among them, off a lost host for
        ``blocklist_expiry`` seconds: an entry for `EVERY_JOB`, which the executor mirrors from the store
        into its slot pool (a host whose server is down fails whichever run is sent there, not only this
        one), and probes until the host answers again (`executors.lost_hosts`). Not when
        `RegionflowConfig.blocks_lost_hosts` says no (one host, or no blocklist)."""
        config = self.config
        if not config.blocks_lost_hosts:
            return
        try:
            reason = why if why.startswith(f"host {host} lost") else f"host {host} lost: {why}"
            self.store.block(EVERY_JOB, host, time.time() + config.blocklist_expiry, reason=reason[:500])
            self.log.info("host %s blocklisted for every DAG run for %g s", host, config.blocklist_expiry)
        except Exception as error:  # noqa: BLE001 - the task fails with the host loss either way
            self.log.warning("could not blocklist lost host %s: %s", host, error)

    def _release_inputs(self, opened: OpenedUnit) -> None:
        """Delete the partitions this unit read whose every consumer has committed (``[regionflow]
        partition_retention = 0``); a failure is logged, never fails the committed unit."""
        if self.config.partition_retention > 0:
            return
        try:
            datasets, freed = opened.release_inputs()
        except Exception as error:  # noqa: BLE001 - `regionflow gc` removes what is left
            self.log.warning("unit %s: could not release its inputs' partitions: %s", opened.name, error)
            return
        if datasets:
            self.log.info("unit %s: released %d partition dataset(s), %d bytes: every consumer has committed",
                          opened.name, datasets, freed)


__all__ = ["Placement", "TryRef", "UnitFailed", "UnitResult", "UnitRunService"]
