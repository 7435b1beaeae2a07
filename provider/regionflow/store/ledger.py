"""RegionflowStore: regionflow's own state, shared by the executor, task processes and the UI.

It owns the rules over the rows of `models.py`: which grant and attempt state transitions are
legal, that no slot is held by two live grants, that the first commit of a unit wins, that a
blocklist entry only ever extends. Every public method is one short transaction in its own
session and returns frozen records (`records.py`). Write transactions lock before they read
(BEGIN IMMEDIATE on SQLite, SELECT ... FOR UPDATE elsewhere), so a check and the write it guards
are atomic across processes. Tested on SQLite and PostgreSQL. The shared pool's decisions and the
schedulers' membership are in `coordination.py` (mixed in).
"""
from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Select, select
from sqlalchemy.exc import IntegrityError, OperationalError, ProgrammingError
from sqlalchemy.orm import Session

from .base import Clock, filtered, once_more_on
from .coordination import PoolCoordination
from .copy_ledger import CopyLedger
from .engine import DEFAULT_BUSY_TIMEOUT_S, WRITE_OPTION, build_engine, default_url, mask_url, parse_url
from .errors import StateTransitionError, StoreError, UnknownRecordError
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
)
from .migrate import check_schema, open_schema, read_schema
from .models import SCHEMA_VERSION, AttemptRow, Commit, GrantRow
from .records import (
    ATTEMPT_END_STATES,
    AttemptRecord,
    AttemptState,
    CommitRecord,
    GrantRecord,
    GrantState,
    admission_of,
    bulk_id_for,
    job_id_for,
)
from .retry import StoreRetry, retried
from .signal_ledger import SignalLedger


class RegionflowStore(PoolCoordination, SignalLedger, CopyLedger):
    """regionflow's store at one SQLAlchemy URL; cheap to create, safe to share between threads.
    `retry`: the policy every public call runs through (`retry.StoreRetry`); by default a locked SQLite
    database is tried again a few times and a lost connection fails at once."""

    def __init__(self, url: str, *, clock: Clock = time.time,
                 busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S, retry: StoreRetry | None = None) -> None:
        self._url = parse_url(url)
        self.url = mask_url(self._url)  # safe to log: the password is masked
        self._clock = clock
        self.retry = retry or StoreRetry(bound_s=0.0)
        self._engine = build_engine(self._url, busy_timeout_s)
        self._write_engine = self._engine.execution_options(**{WRITE_OPTION: True})
        # Reads that must see one snapshot across statements (a pool rebuild): SQLite's transactions
        # already do; server databases read committed per statement unless asked for repeatable read.
        self._snapshot_engine = (self._engine if self._engine.dialect.name == "sqlite"
                                 else self._engine.execution_options(isolation_level="REPEATABLE READ"))
        self._schema_ready = False
        self._schema_lock = threading.Lock()

    @classmethod
    def from_config(cls, url: str | None = None, airflow_home: str | None = None,
                    **options: Any) -> RegionflowStore:
        """The store at `url`, else `sqlite:///<airflow_home>/regionflow.db` ($AIRFLOW_HOME, ~/airflow)."""
        return cls(url or default_url(airflow_home), **options)

    def __repr__(self) -> str:
        return f"RegionflowStore({self.url!r})"

    def dispose(self) -> None:
        """Close idle pooled connections; the store stays usable and reconnects on the next call."""
        self._engine.dispose()

    # ----------------------------------------------------------------------------- schema

    def create_all(self) -> None:
        """Create the store if the database is empty (stamp a current one from before Alembic), or check
        that it is at this regionflow's schema version; runs once per instance."""
        with self._schema_lock:
            if self._schema_ready:
                return
            once_more_on(self._create_schema, (IntegrityError, ProgrammingError))
            self._schema_ready = True

    @retried
    def schema_version(self) -> int:
        """The store's schema version (this regionflow's: the store is not opened at another)."""
        with self._read() as session:
            version = check_schema(read_schema(session.connection()), self.url)
            return SCHEMA_VERSION if version is None else version

    def _create_schema(self) -> None:
        # Most opens find the schema in place: check that under a read lock, so many task processes
        # opening the store at once do not queue for the write lock.
        # Else one write transaction: on SQLite the lock makes concurrent first opens take turns, and a
        # server database that raced us fails here and succeeds on the retry (tables now exist).
        try:
            if self._schema_in_place():
                return
            with Session(self._write_engine) as session, session.begin():
                open_schema(session.connection(), self.url, self._clock())
        except OperationalError as error:
            raise StoreError(
                f"cannot open regionflow's store at {self.url!r}: {error.orig}; check that the "
                f"database exists, is reachable and writable, or point regionflow at another store URL"
            ) from error

    def _schema_in_place(self) -> bool:
        """Whether the store is at this version (else it needs creating or stamping); raises if it is at
        another."""
        with Session(self._engine) as session, session.begin():
            found = read_schema(session.connection())
            return check_schema(found, self.url) is not None and found.revision is not None

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
        query = select(GrantRow).where(GrantRow.state == GrantState.WAITING.value).order_by(GrantRow.id)
        with self._read() as session:
            return [grant_record(row) for row in session.scalars(query)]

    @retried
    def grants(self, dag_id: str | None = None, run_id: str | None = None) -> list[GrantRecord]:
        query = filtered(select(GrantRow), GrantRow, dag_id=dag_id, run_id=run_id).order_by(GrantRow.id)
        with self._read() as session:
            return [grant_record(row) for row in session.scalars(query)]

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

    # ----------------------------------------------------------------------------- sessions

    @contextmanager
    def _write(self) -> Iterator[Session]:
        with self._session(self._write_engine) as session:
            yield session

    @contextmanager
    def _snapshot(self) -> Iterator[Session]:
        with self._session(self._snapshot_engine) as session:
            yield session

    @contextmanager
    def _read(self) -> Iterator[Session]:
        with self._session(self._engine) as session:
            yield session

    @contextmanager
    def _session(self, engine: Any) -> Iterator[Session]:
        self.create_all()
        try:
            with Session(engine, expire_on_commit=False) as session, session.begin():
                yield session
        except OperationalError as error:
            raise StoreError(f"regionflow's store at {self.url!r} failed: {error.orig}; {_advice(error)}") from error


# --------------------------------------------------------------------------------- rules


def _advice(error: OperationalError) -> str:
    if "locked" in str(error.orig):
        return ("another process held the write lock longer than the busy timeout; keep store "
                "transactions short or raise busy_timeout_s")
    return "check that the database is reachable and writable"


def _check_requeue(row: GrantRow) -> None:
    if row.state != GrantState.WAITING:
        raise StateTransitionError(
            f"grant '{row.bulk_id}' (region '{row.label}') cannot go from {row.state} to waiting; "
            f"a new try of the task instance needs a new bulk id (<ti uuid>:<try number>)"
        )


def _attempt_end_state(attempt_id: str, state: str) -> AttemptState:
    try:
        target = AttemptState(state)
    except ValueError:
        target = None
    if target not in ATTEMPT_END_STATES:
        valid = ", ".join(sorted(ATTEMPT_END_STATES))
        raise StoreError(f"attempt '{attempt_id}' cannot end as {state!r}; an attempt ends as one of: {valid}")
    return target


# --------------------------------------------------------------------------------- queries


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


def _attempt_row(session: Session, attempt_id: str, lock: bool = False) -> AttemptRow | None:
    query = select(AttemptRow).where(AttemptRow.attempt_id == attempt_id)
    return session.scalar(query.with_for_update() if lock else query)


# --------------------------------------------------------------------------------- records


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


__all__ = ["RegionflowStore"]
