"""The store's Spark attempts and the units' commits (first commit wins) (a part of `RegionflowStore`, see
`base.py`)."""
from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from .base import LedgerBase, filtered
from .errors import StateTransitionError, StoreError, UnknownRecordError
from .models import AttemptRow, Commit
from .records import ATTEMPT_END_STATES, AttemptRecord, AttemptState, CommitRecord
from .retry import retried


class AttemptLedger(LedgerBase):
    """Attempts (one Spark submission of a unit on a host each) and the units' commits."""

    # ----------------------------------------------------------------------------- attempts

    @retried
    def start_attempt(self, attempt_id: str, *, dag_id: str, run_id: str, task_id: str, unit_key: str,
                      host: str, map_index: int = -1, bulk_id: str | None = None, speculative: bool = False,
                      input_bytes: int | None = None) -> AttemptRecord:
        """A Spark submission of `unit_key` started on `host`; attempt ids are never reused."""
        row = AttemptRow(
            attempt_id=attempt_id, bulk_id=bulk_id, dag_id=dag_id, run_id=run_id, task_id=task_id,
            map_index=int(map_index), unit_key=unit_key, host=host, speculative=bool(speculative),
            state=AttemptState.RUNNING.value, started_at=self._clock(), ended_at=None,
            input_bytes=input_bytes, message=None,
        )
        with self._write() as session:
            existing = _attempt_row(session, attempt_id)
            if existing is not None:
                raise StoreError(
                    f"attempt '{attempt_id}' of unit '{existing.unit_key}' was already started on host "
                    f"'{existing.host}' (now {existing.state}); every Spark submission needs a fresh attempt id"
                )
            session.add(row)
            return _attempt_record(row)

    @retried
    def end_attempt(self, attempt_id: str, state: str, message: str | None = None, *,
                    input_bytes: int | None = None) -> AttemptRecord:
        """A running attempt ended as `state` (succeeded, failed, killed or lost_commit)."""
        target = _attempt_end_state(attempt_id, state)
        with self._write() as session:
            row = _attempt_row(session, attempt_id, lock=True)
            if row is None:
                raise UnknownRecordError(
                    f"no attempt '{attempt_id}' in regionflow's store; start_attempt must come before end_attempt"
                )
            if row.state != AttemptState.RUNNING:
                raise StateTransitionError(
                    f"attempt '{attempt_id}' of unit '{row.unit_key}' cannot go from {row.state} to "
                    f"{target.value}: it already ended"
                )
            row.state = target.value
            row.ended_at = self._clock()
            row.message = message
            if input_bytes is not None:
                row.input_bytes = input_bytes
            return _attempt_record(row)

    @retried
    def attempt(self, attempt_id: str) -> AttemptRecord | None:
        with self._read() as session:
            row = _attempt_row(session, attempt_id)
            return None if row is None else _attempt_record(row)

    @retried
    def attempts(self, dag_id: str, run_id: str, task_id: str | None = None) -> list[AttemptRecord]:
        query = filtered(select(AttemptRow), AttemptRow, dag_id=dag_id, run_id=run_id, task_id=task_id)
        with self._read() as session:
            return [_attempt_record(row) for row in session.scalars(query.order_by(AttemptRow.id))]

    @retried
    def live_attempts(self, unit_key: str, *, dag_id: str | None = None,
                      run_id: str | None = None) -> list[AttemptRecord]:
        """Running attempts of a unit. Unit keys repeat across DAG runs: pass dag_id and run_id."""
        query = filtered(select(AttemptRow), AttemptRow, dag_id=dag_id, run_id=run_id).where(
            AttemptRow.unit_key == unit_key, AttemptRow.state == AttemptState.RUNNING.value)
        with self._read() as session:
            return [_attempt_record(row) for row in session.scalars(query.order_by(AttemptRow.id))]

    # ----------------------------------------------------------------------------- commits

    @retried
    def record_commit(self, dag_id: str, run_id: str, unit_key: str, attempt_id: str) -> str:
        """Try to make `attempt_id` the unit's output; returns the winner (the first to commit)."""
        try:
            with self._write() as session:
                session.add(Commit(dag_id=dag_id, run_id=run_id, unit_key=unit_key,
                                   winner_attempt=attempt_id, committed_at=self._clock()))
            return attempt_id
        except IntegrityError:  # the primary key says someone committed first
            winner = self.commit_for(dag_id, run_id, unit_key)
            assert winner is not None, "a commit row vanished; commits are never deleted"
            return winner.winner_attempt

    @retried
    def commit_for(self, dag_id: str, run_id: str, unit_key: str) -> CommitRecord | None:
        with self._read() as session:
            row = session.get(Commit, (dag_id, run_id, unit_key))
            return None if row is None else _commit_record(row)

    @retried
    def commits(self, dag_id: str, run_id: str) -> list[CommitRecord]:
        query = filtered(select(Commit), Commit, dag_id=dag_id, run_id=run_id).order_by(
            Commit.committed_at, Commit.unit_key)
        with self._read() as session:
            return [_commit_record(row) for row in session.scalars(query)]


# --------------------------------------------------------------------------------- rules and records


def _attempt_end_state(attempt_id: str, state: str) -> AttemptState:
    try:
        target = AttemptState(state)
    except ValueError:
        target = None
    if target not in ATTEMPT_END_STATES:
        valid = ", ".join(sorted(ATTEMPT_END_STATES))
        raise StoreError(f"attempt '{attempt_id}' cannot end as {state!r}; an attempt ends as one of: {valid}")
    return target


def _attempt_row(session: Session, attempt_id: str, lock: bool = False) -> AttemptRow | None:
    query = select(AttemptRow).where(AttemptRow.attempt_id == attempt_id)
    return session.scalar(query.with_for_update() if lock else query)


def _attempt_record(row: AttemptRow) -> AttemptRecord:
    return AttemptRecord(
        attempt_id=row.attempt_id, bulk_id=row.bulk_id, dag_id=row.dag_id, run_id=row.run_id,
        task_id=row.task_id, map_index=row.map_index, unit_key=row.unit_key, host=row.host,
        speculative=bool(row.speculative), state=AttemptState(row.state), started_at=row.started_at,
        ended_at=row.ended_at, input_bytes=row.input_bytes, message=row.message,
    )


def _commit_record(row: Commit) -> CommitRecord:
    return CommitRecord(dag_id=row.dag_id, run_id=row.run_id, unit_key=row.unit_key,
                        winner_attempt=row.winner_attempt, committed_at=row.committed_at)


__all__ = ["AttemptLedger"]
