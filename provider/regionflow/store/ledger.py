"""RegionflowStore: regionflow's own state, shared by the executor, task processes and the UI.

It owns the rules over the rows of `models.py`: which grant and attempt state transitions are
legal, that no slot is held by two live grants, that the first commit of a unit wins, that a
blocklist entry only ever extends. Every public method is one short transaction in its own
session and returns frozen records (`records.py`). Write transactions lock before they read
(BEGIN IMMEDIATE on SQLite, SELECT ... FOR UPDATE elsewhere), so a check and the write it guards
are atomic across processes. Tested on SQLite and PostgreSQL. This module opens the store (its schema
and sessions); the store's parts are mixed in: grants and admissions (`grant_ledger.py`), attempts and
commits (`attempt_ledger.py`), the shared pool's decisions and the schedulers' membership
(`coordination.py`), blocklist and metrics (`signal_ledger.py`), copy requests (`copy_ledger.py`), per-run decisions
(`decision_ledger.py`).
"""
from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy.exc import IntegrityError, OperationalError, ProgrammingError
from sqlalchemy.orm import Session

from .attempt_ledger import AttemptLedger
from .base import Clock, once_more_on
from .coordination import PoolCoordination
from .copy_ledger import CopyLedger
from .decision_ledger import DecisionLedger
from .engine import DEFAULT_BUSY_TIMEOUT_S, WRITE_OPTION, build_engine, default_url, mask_url, parse_url
from .errors import StoreError
from .grant_ledger import GrantLedger
from .migrate import check_schema, open_schema, read_schema
from .models import SCHEMA_VERSION
from .retry import StoreRetry, retried
from .signal_ledger import SignalLedger


class RegionflowStore(GrantLedger, AttemptLedger, PoolCoordination, SignalLedger, CopyLedger, DecisionLedger):
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



__all__ = ["RegionflowStore"]
