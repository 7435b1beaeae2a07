"""A throwaway PostgreSQL server for the tests: Debian's ``postgresql`` binaries, ``initdb`` into a
temporary directory, ``pg_ctl`` on 127.0.0.1 and a free port, trust authentication for one user, a
Unix socket in that directory. Run as root (as on CI machines), the server runs as Debian's
``postgres`` user, since PostgreSQL refuses to run as root."""
from __future__ import annotations

import glob
import itertools
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager

USER = "regionflow"


IDLE_IN_TRANSACTION_TIMEOUT = "30s"


def find_bin(name: str) -> str | None:
    """A PostgreSQL program from PATH, else from Debian's /usr/lib/postgresql/<version>/bin."""
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return candidates[-1] if candidates else None


class PostgresServer:
    """One PostgreSQL cluster in `directory`; `url(db)` for SQLAlchemy, `new_database()` per test."""

    def __init__(self, directory: str) -> None:
        initdb, self.pg_ctl = find_bin("initdb"), find_bin("pg_ctl")
        if not initdb or not self.pg_ctl:
            raise RuntimeError("PostgreSQL's initdb/pg_ctl are missing: install Debian's postgresql "
                               "(apt-get install postgresql; .ci/run does)")
        self.directory = directory
        self.data = os.path.join(directory, "data")
        self.port = _free_port()
        self._names = itertools.count(1)
        self._as_user: list[str] = []
        if os.geteuid() == 0:
            account = pwd.getpwnam("postgres")
            os.chown(directory, account.pw_uid, account.pw_gid)
            self._as_user = ["runuser", "-u", "postgres", "--"]
        self._run([initdb, "-D", self.data, "-A", "trust", "-U", USER, "--no-sync", "-E", "UTF8"])
        self._start()

    def _start(self) -> None:
        # idle_in_transaction_session_timeout: a scheduler killed with kill -9 inside a transaction leaves it
        # open, with its row locks (a DAG run's row: the other scheduler skips that run), for as long as a
        # LocalExecutor worker it forked is alive: the worker inherited the connection's socket (see the
        # docs/executor.md, "Several schedulers, one pool"). The timeout ends such a session, as in production.
        self._run([self.pg_ctl, "-D", self.data, "-w", "-t", "60", "-l", os.path.join(self.directory, "server.log"),
                   "-o", f"-h 127.0.0.1 -p {self.port} -k {self.directory} -c fsync=off -c max_connections=200 "
                         f"-c idle_in_transaction_session_timeout={IDLE_IN_TRANSACTION_TIMEOUT}",
                   "start"])

    def restart(self, down_s: float = 0.0) -> None:
        """Stop the server as an operator's restart does (``-m fast``: every session is ended, so pooled
        connections die), keep it down `down_s` seconds, start it again on the same port and data."""
        self._run([self.pg_ctl, "-D", self.data, "-w", "-m", "fast", "stop"])
        time.sleep(down_s)
        self._start()

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg2://{USER}@127.0.0.1:{self.port}/{database}"

    def new_database(self, prefix: str = "rf") -> str:
        """A new empty database; returns its SQLAlchemy URL."""
        from sqlalchemy import create_engine, text

        name = f"{prefix}_{next(self._names)}"
        engine = create_engine(self.url(), isolation_level="AUTOCOMMIT")
        try:
            with engine.connect() as connection:
                connection.execute(text(f'CREATE DATABASE "{name}"'))
        finally:
            engine.dispose()
        return self.url(name)

    def stop(self) -> None:
        self._run([self.pg_ctl, "-D", self.data, "-w", "-m", "immediate", "stop"], check=False)

    def _run(self, command: list[str], check: bool = True) -> None:
        result = subprocess.run(self._as_user + command, capture_output=True, text=True, cwd=self.directory,
                                timeout=120)
        if check and result.returncode != 0:
            raise RuntimeError(f"{' '.join(command[:2])} failed ({result.returncode}): {result.stderr[-2000:]}")


@contextmanager
def throwaway_server(prefix: str = "regionflow-pg-") -> Iterator[PostgresServer]:
    """A `PostgresServer` in a new directory (not under pytest's root-only tmp dirs), stopped and removed
    afterwards."""
    directory = tempfile.mkdtemp(prefix=prefix)
    server = PostgresServer(directory)
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(directory, ignore_errors=True)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
