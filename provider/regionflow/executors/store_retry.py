"""The executor waits out a short outage of regionflow's store instead of failing tasks.

A store on a database server can be away for a few seconds: a restart, a fail-over, a network blip. Pooled
connections that died with it are replaced before use (``pool_pre_ping``, `regionflow.store.engine`); a
store call of the executor that still fails on a *connection* error (`is_connection_error`) is run again,
with exponential back-off, until the store has been unreachable for `OUTAGE_RETRY_S` seconds, counted
from the first failure of the outage, across all calls. So an outage of a few seconds delays scheduling
(the scheduler's loop waits in the store call) and fails nothing. Past the bound, calls fail as they did
before this module: the try concerned fails, a release is recorded again at the next sync, a sync step is
logged and skipped; each later call tries once, and the first that succeeds ends the outage. The executor
lowers the bound to half its ``[scheduler] scheduler_health_check_threshold``, so that a scheduler waiting
for the store is never taken for stopped by the others.

Errors that are not connection errors are raised at once, as before: a constraint violation, a rule of
the store (`StateTransitionError`, ...), an error a database trigger raises. SQLite has no connection to
lose; its "database is locked" has its own short retry (`regionflow.store.engine.retry_when_locked`).

Each store call is one transaction (`RegionflowStore`), so a retried call never half-applies. A connection
lost during a COMMIT may leave the write done; the store's writes are safe to repeat or fail in a way the
executor already handles: an admission returns the open row, a grant decision finds the pool version moved
and rebuilds, a repeated release is refused and found recorded at the next sync.
"""
from __future__ import annotations

import functools
import inspect
import logging
import sqlite3
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import tenacity
from sqlalchemy.exc import DBAPIError

from ..store import RegionflowStore

OUTAGE_RETRY_S = 20.0  # how long store calls wait for an unreachable store; below Airflow's default 30 s
#                        scheduler_health_check_threshold, since the scheduler's loop (and heartbeat) waits too
FIRST_WAIT_S = 0.1  # the first back-off; doubled after each failed try, with jitter, up to MAX_WAIT_S
MAX_WAIT_S = 2.0
# SQLSTATEs of errors that mean the server went away or is not there yet: class 08 (connection exception),
# and operator intervention: admin shutdown, crash shutdown, "the database system is starting up"
_CONNECTION_SQLSTATES = ("08", "57P01", "57P02", "57P03")
_SHUTDOWN_ERRORS = ("AdminShutdown", "CrashShutdown", "CannotConnectNow")  # their classes (57P01-57P03)
T = TypeVar("T")


def is_connection_error(error: BaseException) -> bool:
    """Whether `error`, or an error it was raised from, says the connection to the store's database server
    was lost or could not be made (so the same call may succeed once the server is back).

    True for a SQLAlchemy error that invalidated its connection (the dialect recognised a disconnect), and
    for a PostgreSQL driver's (psycopg2, psycopg) OperationalError that is the client library's own
    (connection refused, server closed the connection: no SQLSTATE) or has a connection SQLSTATE. False
    for SQLite and for every error the server answered (constraints, deadlocks, timeouts, a trigger's RAISE)."""
    for seen in _chain(error):
        if isinstance(seen, DBAPIError) and seen.connection_invalidated:
            return True
        if isinstance(seen, sqlite3.Error):
            return False
        lost = _lost_connection(seen)
        if lost is not None:
            return lost
    return False


def _lost_connection(error: BaseException) -> bool | None:
    """For an OperationalError of a PostgreSQL driver: whether it is a connection error; else None."""
    if not any(klass.__name__ == "OperationalError" and klass.__module__.split(".")[0] in ("psycopg2", "psycopg")
               for klass in type(error).__mro__):
        return None
    code = getattr(error, "pgcode", None) or getattr(error, "sqlstate", None)
    if code:
        return str(code).startswith(_CONNECTION_SQLSTATES)
    return type(error).__name__ in ("OperationalError", *_SHUTDOWN_ERRORS)


def _chain(error: BaseException) -> list[BaseException]:
    """`error` and what it was raised from: ``__cause__`` and a SQLAlchemy error's DBAPI error (``orig``)."""
    found: list[BaseException] = []
    seen: BaseException | None = error
    while seen is not None and seen not in found:
        found.append(seen)
        orig = getattr(seen, "orig", None)
        seen = seen.__cause__ or (orig if isinstance(orig, BaseException) else None)
    return found


class StoreRetry:
    """Runs store calls, waiting out connection errors for at most `bound_s` per outage (see the module).
    Shared by every thread of the executor (the scheduler's, the copies', the lost-host probes'): an outage
    is the store's, not one call's. `sleep` and `clock` (monotonic) are injected by tests."""

    def __init__(self, bound_s: float = OUTAGE_RETRY_S, *, log: Any = None,
                 first_wait_s: float = FIRST_WAIT_S, max_wait_s: float = MAX_WAIT_S,
                 sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic) -> None:
        self.bound_s = bound_s
        self.log = log or logging.getLogger(__name__)
        self._sleep, self._clock = sleep, clock
        self._backoff = (tenacity.wait_exponential(multiplier=first_wait_s, max=max_wait_s)
                         + tenacity.wait_random(0, first_wait_s))
        self._lock = threading.Lock()
        self._down_since: float | None = None  # when the outage began (monotonic); None: the store answers
        self._gave_up = False  # this outage outlasted the bound: calls try once each

    @property
    def outage_s(self) -> float:
        """How long the store has been unreachable (0 when it answers)."""
        down_since = self._down_since
        return 0.0 if down_since is None else self._clock() - down_since

    def call(self, action: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """`action(*args, **kwargs)`, run again after a connection error while the outage is shorter than the
        bound; any other error, or the last connection error, is raised."""
        retrying = tenacity.Retrying(retry=tenacity.retry_if_exception(self._worth_waiting), wait=self._wait,
                                     stop=self._stop, sleep=self._sleep, before_sleep=self._waiting, reraise=True)
        result = retrying(action, *args, **kwargs)
        self._answered()
        return result

    # ---- tenacity's hooks ---------------------------------------------------------------------------

    def _worth_waiting(self, error: BaseException) -> bool:
        if not is_connection_error(error):
            self._answered()  # the server answered: it is there
            return False
        with self._lock:
            if self._down_since is None:
                self._down_since = self._clock()
        return True

    def _remaining_s(self) -> float:
        return self.bound_s - self.outage_s

    def _wait(self, state: tenacity.RetryCallState) -> float:
        return max(0.0, min(self._backoff(state), self._remaining_s()))

    def _stop(self, state: tenacity.RetryCallState) -> bool:
        if self._remaining_s() > 0:
            return False
        with self._lock:
            told, self._gave_up = self._gave_up, True
        if not told:
            self.log.warning("RegionExecutor: regionflow's store has been unreachable for %.0f s; store calls fail "
                             "until it answers again (a try admitted meanwhile fails, a release is recorded again "
                             "at the next sync)", self.outage_s)
        return True

    def _waiting(self, state: tenacity.RetryCallState) -> None:
        outcome = state.outcome
        error = outcome.exception() if outcome is not None else None
        level = logging.WARNING if state.attempt_number == 1 else logging.DEBUG
        self.log.log(level, "RegionExecutor: regionflow's store is unreachable (%s: %s); waiting %.2f s and trying "
                            "again, for at most %.0f s in all", type(error).__name__, _first_line(error),
                     state.upcoming_sleep, self._remaining_s())

    def _answered(self) -> None:
        if self._down_since is None:  # the usual case: no outage to end
            return
        with self._lock:
            down_since, self._down_since, self._gave_up = self._down_since, None, False
        if down_since is not None:
            self.log.info("RegionExecutor: regionflow's store answers again after %.1f s unreachable",
                          self._clock() - down_since)


def _first_line(error: BaseException | None) -> str:
    return str(error).strip().splitlines()[0] if error is not None and str(error).strip() else ""


def _waits_out_outages(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def wrapper(self: RetryingStore, *args: Any, **kwargs: Any) -> Any:
        return self.retry.call(method, self, *args, **kwargs)

    return wrapper


_RUN_INSIDE_CALLS = ("create_all", "dispose")  # the store runs create_all at the start of every call


class RetryingStore(RegionflowStore):
    """The executor's `RegionflowStore`: every public call goes through `retry` (`StoreRetry`)."""

    def __init__(self, url: str, *, retry: StoreRetry | None = None, **options: Any) -> None:
        super().__init__(url, **options)
        self.retry = retry or StoreRetry()


for _name, _member in inspect.getmembers(RegionflowStore, inspect.isfunction):
    if not _name.startswith("_") and _name not in _RUN_INSIDE_CALLS:
        setattr(RetryingStore, _name, _waits_out_outages(_member))


__all__ = ["FIRST_WAIT_S", "MAX_WAIT_S", "OUTAGE_RETRY_S", "RetryingStore", "StoreRetry", "is_connection_error"]
