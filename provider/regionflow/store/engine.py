"""Opening regionflow's store: URL defaults, masking, and engines safe for many processes.

The store is shared by the scheduler's executor, every task process and the API server. On SQLite
that means: WAL (readers never block the writer), a busy timeout on every connection (a writer
waits for the lock instead of failing with "database is locked"), and write transactions that take
the write lock up front (BEGIN IMMEDIATE), so the busy timeout covers them; a deferred transaction
that reads first and writes later can fail at once with SQLITE_BUSY, whatever the timeout.

Every engine keeps a small pool. On SQLite that is for speed: closing the last connection to a WAL
database checkpoints and deletes the WAL, which made each operation ~15x slower without a pool.
A forked child (LocalExecutor-style task processes) drops the pool it inherited and opens its
own connections, so no connection is ever used by two processes.
"""
from __future__ import annotations

import os
import re
import sqlite3
import time
import weakref
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError

from .errors import StoreError

DEFAULT_FILENAME = "regionflow.db"
DEFAULT_BUSY_TIMEOUT_S = 30.0
WRITE_OPTION = "regionflow_write"
STORE_URL_VARIABLE = "AIRFLOW__REGIONFLOW__STORE_URL"  # [regionflow] store_url, as the CLI reads it
_WAL_RETRY_S = 0.01
CONNECT_TIMEOUT_S = 10  # PostgreSQL (libpq): seconds a connection attempt waits for a silent server

_PASSWORD_IN_URL = re.compile(r"(://[^:/@]*:)[^@]*@")


def default_url(airflow_home: str | None = None) -> str:
    """`sqlite:///<airflow_home>/regionflow.db`, next to Airflow's own SQLite database."""
    home = airflow_home or os.environ.get("AIRFLOW_HOME") or os.path.join(os.path.expanduser("~"), "airflow")
    return f"sqlite:///{os.path.join(os.path.abspath(home), DEFAULT_FILENAME)}"


def mask_url(url: str | URL) -> str:
    """The URL as it may appear in logs and errors: any password replaced by ***."""
    if isinstance(url, URL):
        return url.render_as_string(hide_password=True)
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return _PASSWORD_IN_URL.sub(r"\1***@", url)


def parse_url(url: str) -> URL:
    try:
        return make_url(url)
    except ArgumentError as error:
        raise StoreError(
            f"regionflow's store URL {mask_url(url)!r} is not a SQLAlchemy URL ({error}); "
            f"use e.g. 'sqlite:////abs/path/regionflow.db' or 'postgresql://user:pass@host/db'"
        ) from None


def store_exists(url: str) -> bool:
    """False for a SQLite store whose file does not exist yet (opening it would create it); True for
    any other URL. Read-only callers check it so that a mistyped URL creates nothing."""
    parsed = parse_url(url)
    if parsed.get_backend_name() != "sqlite" or parsed.query.get("uri"):
        return True
    database = parsed.database or ""
    return database not in ("", ":memory:") and os.path.exists(database)


def build_engine(url: URL, busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S) -> Engine:
    """An engine for `url`; SQLite files get the multi-process settings described above."""
    try:
        if url.get_backend_name() == "sqlite":
            _check_sqlite_path(url)
            engine = create_engine(url, pool_size=2, max_overflow=8, connect_args={"timeout": busy_timeout_s})
            _configure_sqlite(engine, busy_timeout_s)
        else:  # pre-ping: a pooled connection that died with a server restart is replaced before use
            engine = create_engine(url, pool_size=2, max_overflow=8, pool_pre_ping=True, pool_recycle=1800,
                                   connect_args=_connect_args(url))
        _drop_pool_in_forked_children(engine)
    except (ArgumentError, NoSuchModuleError, ImportError) as error:
        raise StoreError(
            f"cannot open regionflow's store at {mask_url(url)!r}: {error}; install the database "
            f"driver the URL names or fix the URL"
        ) from None
    return engine


def _connect_args(url: URL) -> dict[str, Any]:
    """PostgreSQL through libpq (psycopg2, psycopg): a connection attempt to a server that does not answer
    gives up after `CONNECT_TIMEOUT_S` unless the URL says otherwise (libpq's default waits as long as TCP
    does, minutes), so a caller that retries while the store is away keeps to its own bound."""
    if url.get_backend_name() == "postgresql" and url.get_driver_name() in ("psycopg2", "psycopg") \
            and "connect_timeout" not in url.query:
        return {"connect_timeout": CONNECT_TIMEOUT_S}
    return {}


def _check_sqlite_path(url: URL) -> None:
    database = url.database or ""
    if database in ("", ":memory:") or url.query.get("mode") == "memory":
        raise StoreError(
            f"regionflow's store at {mask_url(url)!r} is an in-memory SQLite database, which other "
            f"processes cannot see; use a file, e.g. 'sqlite:////abs/path/regionflow.db'"
        )
    if url.query.get("uri"):
        return  # a file: URI; SQLite resolves it, errors surface on connect
    folder = os.path.dirname(os.path.abspath(database))
    if not os.path.isdir(folder):
        raise StoreError(
            f"cannot open regionflow's store at {mask_url(url)!r}: directory {folder!r} does not "
            f"exist; create it, or point regionflow at another store URL"
        )


def _configure_sqlite(engine: Engine, busy_timeout_s: float) -> None:
    busy_timeout_ms = int(busy_timeout_s * 1000)

    @event.listens_for(engine, "connect")
    def on_connect(dbapi_connection, _record) -> None:  # type: ignore[no-untyped-def]
        # Take BEGIN away from pysqlite so on_begin below decides DEFERRED vs IMMEDIATE.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout = {busy_timeout_ms}")
            _ensure_wal(cursor, deadline=time.monotonic() + busy_timeout_s)
            # NORMAL is corruption-safe under WAL; only a power cut can drop the latest commits.
            cursor.execute("PRAGMA synchronous = NORMAL")
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def on_begin(connection) -> None:  # type: ignore[no-untyped-def]
        mode = "IMMEDIATE" if connection.get_execution_options().get(WRITE_OPTION) else "DEFERRED"
        connection.exec_driver_sql(f"BEGIN {mode}")


def _ensure_wal(cursor: sqlite3.Cursor, deadline: float) -> None:
    """Switch the file to WAL (persistent: once per file). The switch needs an exclusive lock and
    SQLite reports "database is locked" at once, ignoring busy_timeout, when several processes open
    a fresh file together: waited for here, up to the busy timeout, as the connection is made (a store
    call that still finds the database locked is retried by the store's policy, `retry.StoreRetry`)."""
    while True:
        try:
            mode = cursor.execute("PRAGMA journal_mode = WAL").fetchone()[0].lower()
        except sqlite3.OperationalError as error:
            if "locked" not in str(error):
                raise
            mode = "locked"
        if mode == "wal":
            return
        if time.monotonic() > deadline:
            raise sqlite3.OperationalError(f"cannot switch the database to WAL journal mode (it stays {mode})")
        time.sleep(_WAL_RETRY_S)


def _drop_pool_in_forked_children(engine: Engine) -> None:
    # dispose(close=False): forget the parent's connections without closing them under its feet.
    ref = weakref.ref(engine)

    def reset() -> None:
        alive = ref()
        if alive is not None:
            alive.dispose(close=False)

    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=reset)


__all__ = ["DEFAULT_BUSY_TIMEOUT_S", "STORE_URL_VARIABLE", "WRITE_OPTION", "build_engine", "default_url",
           "mask_url", "parse_url"]
