"""The store as the one truth of the slot pool shared by every scheduler (mixed into `RegionflowStore`).

Each RegionExecutor keeps a `SlotPool` in memory, as a cache of the grant rows at one *pool version*.
Every write to the grants table raises the version in its own transaction (`grant_rows.bump_pool_version`,
under the pool_state row lock: one writer at a time on SQLite, a row lock on server databases). A grant
decision is written by `record_grants(decisions, expected_version)`, which takes the same lock and writes
only if the version is still the one the cache was at when it decided: a compare-and-set. So a decision
is always made on exactly the rows the store holds when it commits, whichever scheduler made the last
write, and the FIFO order is the store's (the grant ids), global across schedulers.

Schedulers register with a heartbeat (`register_scheduler`, `scheduler_heartbeat`). When one stops
(ended, heartbeat too old, or its process is gone from this machine), another takes over its rows
(`take_over`): waiting rows are released, since Airflow queues their task instances again; live grants
become the heir's, which releases them when their task instances end.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from .base import LedgerBase
from .errors import StalePoolError, UnknownRecordError
from .grant_rows import (
    bump_pool_version,
    grant_record,
    grant_row,
    joined,
    live_grants_query,
    live_holders,
    normalized_slots,
    pool_version,
    release_row,
    waiting_grants_query,
)
from .models import GrantRow, SchedulerRow
from .records import GrantRecord, GrantState, PoolSnapshot, SchedulerRecord, Slot, TakeOver
from .retry import retried

SNAPSHOT_TRIES = 5  # server databases: reread when a write lands between the version and the rows
STOPPED_AFTER_S = 30.0  # Airflow's default [scheduler] scheduler_health_check_threshold


class PoolCoordination(LedgerBase):
    """Grant decisions and scheduler membership (a part of `RegionflowStore`, see `base.py`)."""

    # ---- the pool ----------------------------------------------------------------------------------

    @retried
    def pool_version(self) -> int:
        """The pool version: it changes with every write to the grants table."""
        with self._read() as session:
            return pool_version(session)

    @retried
    def pool_snapshot(self) -> PoolSnapshot:
        """Live grants and waiting bulks (FIFO) at one version, to rebuild a pool from."""
        for _ in range(SNAPSHOT_TRIES):
            with self._snapshot() as session:
                version = pool_version(session)
                live = tuple(grant_record(row) for row in session.scalars(live_grants_query()))
                waiting = tuple(grant_record(row) for row in session.scalars(waiting_grants_query()))
                if pool_version(session) == version:  # one snapshot (repeatable read); checked all the same
                    return PoolSnapshot(version, live, waiting)
        raise StalePoolError("the pool changed under every read of it; the store is too busy to rebuild from")

    @retried
    def record_grants(self, decisions: Sequence[tuple[str, Sequence[Slot]]], *,
                      expected_version: int) -> list[GrantRecord]:
        """Grant every (bulk id, slots) decision at once, if the pool is still at `expected_version`.

        Raises `StalePoolError` (and writes nothing) when another write raised the version since: the
        decisions were made on rows that are no longer the store's. Returns the granted records; their
        `pool_version` is the new version."""
        with self._write() as session:
            current = pool_version(session, lock=True)
            if current != expected_version:
                raise StalePoolError(f"the pool is at version {current}, not {expected_version}: "
                                     f"rebuild it from the store and decide again")
            holders = live_holders(session)
            now = self._clock()
            rows = []
            for bulk_id, slots in decisions:
                row = _row(session, bulk_id)
                grant_row(row, normalized_slots(bulk_id, slots), holders, now)
                rows.append(row)
            version = bump_pool_version(session)
            return [grant_record(row, version) for row in rows]

    # ---- schedulers -------------------------------------------------------------------------------

    @retried
    def register_scheduler(self, scheduler_id: str, *, hostname: str, pid: int,
                           airflow_job_id: int | None = None) -> SchedulerRecord:
        """A scheduler joins the pool (or says again that it is there)."""
        now = self._clock()
        with self._write() as session:
            row = session.get(SchedulerRow, scheduler_id, with_for_update=True)
            if row is None:
                row = SchedulerRow(scheduler_id=scheduler_id, hostname=hostname, pid=int(pid),
                                   airflow_job_id=airflow_job_id, started_at=now, heartbeat_at=now, ended_at=None)
                session.add(row)
            row.heartbeat_at, row.airflow_job_id = now, airflow_job_id
            return _scheduler_record(row)

    @retried
    def scheduler_heartbeat(self, scheduler_id: str) -> None:
        """The scheduler is alive (it does not change the pool version)."""
        with self._write() as session:
            row = session.get(SchedulerRow, scheduler_id, with_for_update=True)
            if row is None:
                raise UnknownRecordError(f"no scheduler '{scheduler_id}' in regionflow's store; register it first")
            row.heartbeat_at = self._clock()

    @retried
    def end_scheduler(self, scheduler_id: str, why: str) -> list[GrantRecord]:
        """The scheduler stops cleanly: its waiting rows are released (Airflow queues those task
        instances again); its live grants stay until another scheduler takes them over."""
        with self._write() as session:
            version = bump_pool_version(session)
            row = session.get(SchedulerRow, scheduler_id, with_for_update=True)
            if row is not None:
                row.ended_at = self._clock()
            waiting = session.scalars(waiting_grants_query().where(GrantRow.owner == scheduler_id).with_for_update())
            released = list(waiting)
            for grant in released:
                release_row(grant, why, self._clock())
            return [grant_record(grant, version) for grant in released]

    @retried
    def schedulers(self) -> list[SchedulerRecord]:
        """Every scheduler that ever joined, oldest first."""
        with self._read() as session:
            rows = session.scalars(select(SchedulerRow).order_by(SchedulerRow.started_at))
            return [_scheduler_record(row) for row in rows]

    @retried
    def owners(self) -> set[str | None]:
        """The owners of waiting and live rows (None: rows written before owners existed)."""
        states = (GrantState.WAITING.value, GrantState.GRANTED.value)
        with self._read() as session:
            return set(session.scalars(select(GrantRow.owner).where(GrantRow.state.in_(states)).distinct()))

    @retried
    def take_over(self, stopped: str | None, heir: str, why: str) -> TakeOver:
        """`heir` takes the rows of the stopped scheduler `stopped` (None: rows without an owner).

        Waiting rows are released with `why` (Airflow queues their task instances again); live grants
        become the heir's. Two heirs at once: the second finds nothing left."""
        with self._write() as session:
            version = bump_pool_version(session)
            if stopped is not None:
                row = session.get(SchedulerRow, stopped, with_for_update=True)
                if row is not None and row.ended_at is None:
                    row.ended_at = self._clock()
            owned = select(GrantRow).where(GrantRow.owner.is_(None) if stopped is None else GrantRow.owner == stopped)
            released: list[GrantRecord] = []
            adopted: list[GrantRecord] = []
            for grant in session.scalars(owned.where(GrantRow.state.in_(
                    (GrantState.WAITING.value, GrantState.GRANTED.value))).order_by(GrantRow.id).with_for_update()):
                if grant.state == GrantState.WAITING:
                    release_row(grant, why, self._clock())
                    released.append(grant_record(grant, version))
                else:
                    grant.owner = heir
                    grant.message = joined(grant.message, f"adopted by scheduler {heir}: {why}")
                    adopted.append(grant_record(grant, version))
            return TakeOver(stopped, tuple(released), tuple(adopted))

    @retried
    def adopt_grant(self, bulk_id: str, heir: str) -> GrantRecord:
        """One live grant becomes `heir`'s (Airflow asked it to adopt that task instance)."""
        with self._write() as session:
            version = bump_pool_version(session)
            row = _row(session, bulk_id)
            if row.owner != heir:
                row.message = joined(row.message, f"adopted by scheduler {heir} (Airflow handed its task over)")
            row.owner = heir
            return grant_record(row, version)


def is_stopped(record: SchedulerRecord, *, now: float, timeout_s: float, hostname: str,
               alive: Any = None) -> bool:
    """Whether a scheduler has stopped: it ended, its heartbeat is older than `timeout_s`, or it ran on
    this machine (`hostname`) and `alive(pid)` says its process is gone."""
    if record.ended_at is not None or now - record.heartbeat_at > timeout_s:
        return True
    return alive is not None and record.hostname == hostname and not alive(record.pid)


def _row(session: Session, bulk_id: str) -> GrantRow:
    row = session.scalar(select(GrantRow).where(GrantRow.bulk_id == bulk_id).with_for_update())
    if row is None:
        raise UnknownRecordError(f"no grant '{bulk_id}' in regionflow's store; it must be admitted first")
    return row


def _scheduler_record(row: SchedulerRow) -> SchedulerRecord:
    return SchedulerRecord(scheduler_id=row.scheduler_id, hostname=row.hostname, pid=row.pid,
                           airflow_job_id=row.airflow_job_id, started_at=row.started_at,
                           heartbeat_at=row.heartbeat_at, ended_at=row.ended_at)


__all__ = ["SNAPSHOT_TRIES", "STOPPED_AFTER_S", "PoolCoordination", "is_stopped"]
