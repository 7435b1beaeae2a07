"""The store's grants: the pool's bulks and task instance tries' admissions, from waiting to released (a
part of `RegionflowStore`, see `base.py`). The grant state rules and row helpers are in `grant_rows.py`."""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import ColumnElement, Select, and_, func, or_, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from .base import LedgerBase, filtered, once_more_on
from .errors import StateTransitionError, UnknownRecordError
from .grant_rows import (
    bump_pool_version,
    check_grant_transition,
    grant_record,
    grant_row,
    joined,
    live_grants_query,
    live_holders,
    normalized_slots,
    plain_request,
    release_row,
    waiting_grants_query,
)
from .models import GrantRow
from .records import GrantRecord, GrantState, admission_of, bulk_id_for, job_id_for
from .retry import retried


class GrantLedger(LedgerBase):
    """Grants of the shared pool's slots to bulks, and the admissions of task instance tries."""

    # ----------------------------------------------------------------------------- grants

    @retried
    def record_waiting(self, bulk_id: str, *, dag_id: str, run_id: str, task_id: str, try_number: int,
                       label: str, requests: Sequence[Mapping[str, Any]], map_index: int = -1,
                       job_id: str | None = None, owner: str | None = None) -> GrantRecord:
        """A bulk entered the pool's queue. Re-recording a waiting bulk is a no-op (re-queue).
        `owner`: the scheduler that holds the bulk's work (`register_scheduler`)."""
        row = GrantRow(
            bulk_id=bulk_id, dag_id=dag_id, run_id=run_id, task_id=task_id, map_index=int(map_index),
            try_number=int(try_number), job_id=job_id or job_id_for(dag_id, run_id), label=label,
            requests=[plain_request(request) for request in requests], state=GrantState.WAITING.value,
            host=None, slots=[], message=None, submitted_at=self._clock(), granted_at=None, released_at=None,
            owner=owner,
        )

        def insert() -> GrantRecord:
            with self._write() as session:
                version = bump_pool_version(session)
                existing = _locked_grant(session, bulk_id)
                if existing is None:
                    session.add(row)
                    return grant_record(row, version)
                _check_requeue(existing)
                return grant_record(existing, version)

        return once_more_on(insert, IntegrityError)

    @retried
    def record_granted(self, bulk_id: str, slots: Iterable[Sequence[Any]]) -> GrantRecord:
        """All slots of the bulk were given at once; `slots` are (host, index) pairs, first host first."""
        pairs = normalized_slots(bulk_id, slots)
        with self._write() as session:
            version = bump_pool_version(session)
            row = _existing_grant(session, bulk_id)
            grant_row(row, pairs, live_holders(session), self._clock())
            return grant_record(row, version)

    @retried
    def record_released(self, bulk_id: str, message: str | None = None) -> GrantRecord:
        """The bulk's slots went back to the pool (or a waiting bulk was withdrawn); `message` says
        why when it is not the plain end of the run (withdrawn, revoked, stale).

        Releasing a lost grant only stamps `released_at`: it stays "lost", so the UI still shows why.
        """
        with self._write() as session:
            version = bump_pool_version(session)
            row = _existing_grant(session, bulk_id)
            release_row(row, message, self._clock())
            return grant_record(row, version)

    @retried
    def admit(self, ti_id: Any, try_number: int, *, dag_id: str, run_id: str, task_id: str, label: str,
              requests: Sequence[Mapping[str, Any]], map_index: int = -1,
              job_id: str | None = None, owner: str | None = None) -> GrantRecord:
        """Admit one task instance try to the pool's queue; returns the admission's grant row.

        A try can be queued by Airflow several times (resume after a deferral, each reschedule poke, a
        re-queue after a scheduler restart). If the try's newest admission is still waiting or granted,
        that row is returned and nothing is written (the caller decides to keep its place or reuse its
        live grant); otherwise (none yet, or released, rejected, lost) a new admission is recorded as
        ``bulk_id_for(ti_id, try_number, n)``, so every admission keeps its own history row.
        `owner` is the admitting scheduler (`register_scheduler`).
        """

        def insert() -> GrantRecord:
            with self._write() as session:
                version = bump_pool_version(session)
                newest = _admissions_query(ti_id, try_number).order_by(GrantRow.id.desc()).limit(1)
                existing = session.scalar(newest.with_for_update())
                if existing is not None and existing.state in (GrantState.WAITING, GrantState.GRANTED):
                    return grant_record(existing, version)
                admission = 1 if existing is None else admission_of(existing.bulk_id) + 1
                row = GrantRow(
                    bulk_id=bulk_id_for(ti_id, try_number, admission), dag_id=dag_id, run_id=run_id,
                    task_id=task_id, map_index=int(map_index), try_number=int(try_number),
                    job_id=job_id or job_id_for(dag_id, run_id), label=label,
                    requests=[plain_request(request) for request in requests], state=GrantState.WAITING.value,
                    host=None, slots=[], message=None, submitted_at=self._clock(), granted_at=None,
                    released_at=None, owner=owner,
                )
                session.add(row)
                return grant_record(row, version)

        return once_more_on(insert, IntegrityError)

    @retried
    def record_reused(self, bulk_id: str, note: str) -> GrantRecord:
        """A live grant serves one more run of its try (Airflow queued the try again before the end
        of its previous run was read); `note` is added to the row's message as history."""
        with self._write() as session:
            row = _existing_grant(session, bulk_id)
            if row.state != GrantState.GRANTED:
                raise StateTransitionError(
                    f"grant '{bulk_id}' (region '{row.label}') is {row.state}, not granted; only a live grant "
                    f"can serve another run of its try")
            row.message = joined(row.message, note)
            return grant_record(row)

    @retried
    def admissions(self, ti_id: Any, try_number: int) -> list[GrantRecord]:
        """Every admission of one task instance try, first first (the try's history in the pool)."""
        with self._read() as session:
            rows = session.scalars(_admissions_query(ti_id, try_number).order_by(GrantRow.id))
            return [grant_record(row) for row in rows]

    @retried
    def current_grant(self, ti_id: Any, try_number: int) -> GrantRecord | None:
        """The newest admission of a task instance try (what its running task process was granted)."""
        with self._read() as session:
            row = session.scalar(_admissions_query(ti_id, try_number).order_by(GrantRow.id.desc()).limit(1))
            return None if row is None else grant_record(row)

    @retried
    def record_rejected(self, bulk_id: str, message: str) -> GrantRecord:
        """No cluster state can ever satisfy the bulk; `message` says why."""
        with self._write() as session:
            version = bump_pool_version(session)
            row = _existing_grant(session, bulk_id)
            check_grant_transition(row, GrantState.REJECTED)
            row.state = GrantState.REJECTED.value
            row.message = message
            return grant_record(row, version)

    @retried
    def mark_lost(self, host: str) -> list[GrantRecord]:
        """Every live grant holding a slot on `host` becomes lost; returns them."""
        with self._write() as session:
            version = bump_pool_version(session)
            live = session.scalars(live_grants_query().with_for_update()).all()
            lost = [row for row in live if any(slot_host == host for slot_host, _ in row.slots)]
            for row in lost:
                row.state = GrantState.LOST.value
                row.message = f"host '{host}' was lost while this grant held slots on it"
            return [grant_record(row, version) for row in lost]

    @retried
    def grant_for(self, bulk_id: str) -> GrantRecord | None:
        with self._read() as session:
            row = session.scalar(select(GrantRow).where(GrantRow.bulk_id == bulk_id))
            return None if row is None else grant_record(row)

    @retried
    def live_grants(self) -> list[GrantRecord]:
        """Granted bulks, oldest grant first: what a restarted executor must take back."""
        with self._read() as session:
            return [grant_record(row) for row in session.scalars(live_grants_query())]

    @retried
    def waiting_grants(self) -> list[GrantRecord]:
        """Waiting bulks in FIFO order (order of first record_waiting)."""
        with self._read() as session:
            return [grant_record(row) for row in session.scalars(waiting_grants_query())]

    @retried
    def grants(self, dag_id: str | None = None, run_id: str | None = None) -> list[GrantRecord]:
        query = filtered(select(GrantRow), GrantRow, dag_id=dag_id, run_id=run_id).order_by(GrantRow.id)
        with self._read() as session:
            return [grant_record(row) for row in session.scalars(query)]

    @retried
    def grants_active_between(self, since: float, until: float) -> list[GrantRecord]:
        """Grants whose [submitted_at, end] overlaps [since, until], by id (end: `grant_end`)."""
        query = select(GrantRow).where(GrantRow.submitted_at <= float(until), _ends_at_or_after(float(since)))
        with self._read() as session:
            return [grant_record(row) for row in session.scalars(query.order_by(GrantRow.id))]


def grant_end(grant: GrantRecord) -> float | None:
    """When a grant stopped waiting or holding slots; None while it still does (waiting or granted).
    A rejected row is never stamped released_at, a lost one only once released: until then both end at
    granted_at, else submitted_at (a rejected bulk never waits forever; a lost grant holds no pool slot)."""
    if grant.released_at is not None:
        return grant.released_at
    if grant.state in (GrantState.WAITING, GrantState.GRANTED):
        return None
    return grant.granted_at if grant.granted_at is not None else grant.submitted_at


# --------------------------------------------------------------------------------- rules and queries


def _ends_at_or_after(since: float) -> ColumnElement[bool]:
    """The SQL form of ``grant_end(row) is None or grant_end(row) >= since``."""
    open_states = (GrantState.WAITING.value, GrantState.GRANTED.value)
    return or_(GrantRow.released_at >= since,
               and_(GrantRow.released_at.is_(None),
                    or_(GrantRow.state.in_(open_states),
                        func.coalesce(GrantRow.granted_at, GrantRow.submitted_at) >= since)))


def _check_requeue(row: GrantRow) -> None:
    if row.state != GrantState.WAITING:
        raise StateTransitionError(
            f"grant '{row.bulk_id}' (region '{row.label}') cannot go from {row.state} to waiting; "
            f"a new try of the task instance needs a new bulk id (<ti uuid>:<try number>)"
        )


def _admissions_query(ti_id: Any, try_number: int) -> Select[tuple[GrantRow]]:
    first = bulk_id_for(ti_id, try_number)
    return select(GrantRow).where((GrantRow.bulk_id == first)
                                  | GrantRow.bulk_id.startswith(f"{first}/", autoescape=True))


def _locked_grant(session: Session, bulk_id: str) -> GrantRow | None:
    return session.scalar(select(GrantRow).where(GrantRow.bulk_id == bulk_id).with_for_update())


def _existing_grant(session: Session, bulk_id: str) -> GrantRow:
    row = _locked_grant(session, bulk_id)
    if row is None:
        raise UnknownRecordError(
            f"no grant '{bulk_id}' in regionflow's store; record_waiting must come first"
        )
    return row


__all__ = ["GrantLedger", "grant_end"]
