"""The store's one retry policy: which failed store calls are run again, how often and how long apart.

Every public call of `RegionflowStore` runs through its store's `StoreRetry` (`retried`). Each try is a whole
transaction, so a retried call never half-applies. Two kinds of error are tried again, any other is raised at
once (a constraint violation, a rule of the store such as `StateTransitionError`, a deadlock, an error a
database trigger raises):

- SQLite's "database is locked" (`is_locked_error`), for every store: a few tries (`LOCKED_TRIES`) with a short
  exponential back-off (~3 s of sleeping in all). The busy timeout already makes a writer wait for the lock;
  this covers the cases where SQLite answers SQLITE_BUSY at once (a WAL checkpoint or recovery in another
  process, a lock upgrade), which with many task processes and Airflow's own writes on one machine do happen.
- A lost or refused connection to a database server (`is_connection_error`), for a store given an outage bound
  (the executor's: `OUTAGE_RETRY_S`, lowered to half its ``[scheduler] scheduler_health_check_threshold``, so a
  scheduler waiting for the store is never taken for stopped by the others). Pooled connections that died with
  a restart are replaced before use (``pool_pre_ping``, `engine`); a call that still fails is run again, with
  exponential back-off, until the store has been unreachable for the bound, counted from the first failure of
  the outage across all calls of that policy (an outage is the store's, not one call's). So an outage of a few
  seconds delays scheduling (the scheduler's loop waits in the store call) and fails nothing. Past the bound,
  calls fail: each later call tries once, and the first that succeeds ends the outage. Other stores (task
  processes, the CLI, the UI) have no bound and fail at once. A connection lost during a COMMIT may leave the
  write done; the store's writes are safe to repeat or fail in a way the executor already handles (an
  admission returns the open row, a grant decision finds the pool version moved, a repeated release is
  refused and found recorded at the next sync).

A call made inside another retried call of the same thread runs once: the outer call's tries cover it.
"""
from __future__ import annotations

import functools
import logging
import random
import sqlite3
import threading
import time
from collections.abc import Callable
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

import tenacity
from sqlalchemy.exc import DBAPIError

OUTAGE_RETRY_S = 20.0  # how long the executor's store calls wait for an unreachable store; below Airflow's default
#                        30 s scheduler_health_check_threshold, since the scheduler's loop (and heartbeat) waits too
FIRST_WAIT_S = 0.1  # the first back-off of an outage; doubled after each failed try, with jitter, up to MAX_WAIT_S
MAX_WAIT_S = 2.0
LOCKED_TRIES = 6  # tries of one store call that SQLite answers "database is locked" (or busy)
LOCKED_FIRST_WAIT_S = 0.05  # doubled after each try, with jitter: at most ~3 s of sleeping in all
# SQLSTATEs of errors that mean the server went away or is not there yet: class 08 (connection exception),
# and operator intervention: admin shutdown, crash shutdown, "the database system is starting up"
_CONNECTION_SQLSTATES = ("08", "57P01", "57P02", "57P03")
_SHUTDOWN_ERRORS = ("AdminShutdown", "CrashShutdown", "CannotConnectNow")  # their classes (57P01-57P03)
_LOCKED = ("database is locked", "database is busy", "database table is locked")
P = ParamSpec("P")
T = TypeVar("T")


def is_locked_error(error: BaseException) -> bool:
    """True for SQLite's "database is locked" / "database is busy", however wrapped."""
    return any(any(text in str(seen).lower() for text in _LOCKED) for seen in _chain(error))


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
    """Runs store calls, trying a locked SQLite database again a few times and waiting out a lost connection for
    at most `bound_s` per outage (0: not at all; see the module). Shared by every thread of its owner (the
    executor's scheduler loop, copies and lost-host probes). `sleep` and `clock` (monotonic) are injected by
    tests; `log` tells of outages."""

    def __init__(self, bound_s: float = OUTAGE_RETRY_S, *, log: Any = None,
                 first_wait_s: float = FIRST_WAIT_S, max_wait_s: float = MAX_WAIT_S,
                 locked_tries: int = LOCKED_TRIES, locked_first_wait_s: float = LOCKED_FIRST_WAIT_S,
                 sleep: Callable[[float], None] | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.bound_s = bound_s
        self.locked_tries = locked_tries
        self.log = log or logging.getLogger(__name__)
        self._sleep = sleep or _sleep
        self._clock = clock
        self._locked_first_wait_s = locked_first_wait_s
        self._backoff = (tenacity.wait_exponential(multiplier=first_wait_s, max=max_wait_s)
                         + tenacity.wait_random(0, first_wait_s))
        self._lock = threading.Lock()
        self._inside = threading.local()  # whether this thread is in a call already (nested calls run once)
        self._down_since: float | None = None  # when the outage began (monotonic); None: the store answers
        self._gave_up = False  # this outage outlasted the bound: calls try once each

    @property
    def outage_s(self) -> float:
        """How long the store has been unreachable (0 when it answers)."""
        down_since = self._down_since
        return 0.0 if down_since is None else self._clock() - down_since

    def call(self, action: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """`action(*args, **kwargs)`, run again after an error worth retrying (see the module) while its kind's
        bound allows; any other error, or the last retried one, is raised."""
        if getattr(self._inside, "active", False):
            return action(*args, **kwargs)
        retrying = tenacity.Retrying(retry=tenacity.retry_if_exception(self._worth_retrying), wait=self._wait,
                                     stop=self._stop, sleep=self._sleep, before_sleep=self._waiting, reraise=True)
        self._inside.active = True
        try:
            result = retrying(action, *args, **kwargs)
        finally:
            self._inside.active = False
        self._answered()
        return result

    # ---- tenacity's hooks ---------------------------------------------------------------------------

    def _worth_retrying(self, error: BaseException) -> bool:
        if not is_connection_error(error):
            self._answered()  # the database answered: it is there
            return is_locked_error(error)
        if self.bound_s <= 0:
            return False
        with self._lock:
            if self._down_since is None:
                self._down_since = self._clock()
        return True

    def _remaining_s(self) -> float:
        return self.bound_s - self.outage_s

    def _wait(self, state: tenacity.RetryCallState) -> float:
        if _locked(state):
            return float(self._locked_first_wait_s * 2 ** (state.attempt_number - 1) * (0.5 + random.random()))
        return max(0.0, min(self._backoff(state), self._remaining_s()))

    def _stop(self, state: tenacity.RetryCallState) -> bool:
        if _locked(state):
            return state.attempt_number >= self.locked_tries
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
        if _locked(state):
            return  # a busy SQLite database: usual under load, not worth a line each time
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


def _sleep(seconds: float) -> None:
    time.sleep(seconds)  # looked up at each call, so a test may patch the module's time.sleep


def _locked(state: tenacity.RetryCallState) -> bool:
    outcome = state.outcome
    error = outcome.exception() if outcome is not None else None
    return error is not None and is_locked_error(error)


def _first_line(error: BaseException | None) -> str:
    return str(error).strip().splitlines()[0] if error is not None and str(error).strip() else ""


class Retried(Protocol):
    """What `retried` methods belong to: an object with a `StoreRetry` (`RegionflowStore` and its parts)."""

    retry: StoreRetry


S = TypeVar("S", bound=Retried)


def retried(method: Callable[Concatenate[S, P], T]) -> Callable[Concatenate[S, P], T]:
    """A store method whose every call runs through its store's `retry`."""

    @functools.wraps(method)
    def wrapper(self: S, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self.retry.call(method, self, *args, **kwargs)

    return wrapper


__all__ = ["FIRST_WAIT_S", "LOCKED_FIRST_WAIT_S", "LOCKED_TRIES", "MAX_WAIT_S", "OUTAGE_RETRY_S", "StoreRetry",
           "is_connection_error", "is_locked_error", "retried"]
