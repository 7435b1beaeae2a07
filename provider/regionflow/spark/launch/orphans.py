"""Spark work an attempt leaves behind when the process that ran it dies (kill -9 of a task process).

An attempt runs in an Airflow task process: the session backend drives a Spark Connect session from it,
the submit backend starts spark-submit from it in a process group of its own. When that process is killed
without a chance to clean up, neither dies with it:

* **session**: the server keeps the session's running operations going, reattachable, until Spark
  Connect's detached timeout (``spark.connect.execute.manager.detachedTimeout``) removes
  them, using the host's cores while the task's retry runs;
* **submit**: spark-submit, the driver JVM and its Python workers go on to the end of the program.

Neither can commit a second time (first commit wins, and a session attempt's commit is made by the dead
client), but both take cores the pool has given to someone else. So each attempt's Spark work is
findable from its attempt id alone, by whoever learns that its process ended:

* a session attempt uses a Connect session whose id is derived from its attempt id
  (`attempt_session_id`), so another client can attach to that session and interrupt what runs in it;
* a submit attempt's spark-submit carries ``REGIONFLOW_ATTEMPT_ID=<attempt id>`` in its environment, which
  every process it starts inherits, so its process groups are found in ``/proc`` (this machine only:
  a driver on another machine is out of reach, as is a cluster-mode driver) and ended.

`OrphanStopper.stop` does it for one attempt and says what it found.
"""
from __future__ import annotations

import uuid
from typing import Any, Protocol

from ...processes import tagged_processes, terminate_process_group
from ..servers.auth import remote_session
from ..servers.client_env import no_client_marks
from ..servers.connect import SessionServerError
from ..servers.session_servers import SessionServers

ATTEMPT_VARIABLE = "REGIONFLOW_ATTEMPT_ID"
_SESSION_NAMESPACE = uuid.UUID("6f1c2b0e-5a52-4a8e-9a57-0c6f2f7e4d11")  # regionflow's, for session ids


def attempt_session_id(attempt_id: str) -> str:
    """The Spark Connect session id of an attempt: a UUID (version 4 in form, as Connect expects one)
    derived from the attempt id alone."""
    return str(uuid.UUID(bytes=uuid.uuid5(_SESSION_NAMESPACE, attempt_id).bytes, version=4))


def attempt_session_url(url: str, attempt_id: str) -> str:
    """`url` (``sc://host:port``, maybe with ``/;param=value`` parameters) with the attempt's session id."""
    parameter = f"session_id={attempt_session_id(attempt_id)}"
    if "/;" in url:
        return f"{url};{parameter}"
    return f"{url.rstrip('/')}/;{parameter}"


class OrphanStopper(Protocol):
    """Ends the Spark work of an attempt whose process died; returns what it did, for the record."""

    def stop(self, attempt_id: str, host: str) -> str: ...


class SessionOrphans:
    """Session backend: attach to the attempt's session on its host's server and interrupt it."""

    def __init__(self, servers: SessionServers) -> None:
        self.servers = servers

    def stop(self, attempt_id: str, host: str) -> str:
        try:
            server = self.servers.server(host)
        except SessionServerError as error:  # a host no longer configured has no server to ask
            return f"no Spark Connect server for host {host} ({error})"
        if not server.reachable():
            return f"the Spark Connect server of host {host} is down: nothing of it runs there"
        interrupted = interrupt_attempt_session(server.url, attempt_id, server.token)
        if interrupted is None:
            return "its Spark Connect session had already ended"
        return f"{interrupted} Spark Connect operation(s) of its session interrupted on host {host}"


def interrupt_attempt_session(url: str, attempt_id: str, token: str | None = None) -> int | None:
    """Interrupt every operation of the attempt's session on the server at `url` (presenting `token`) and
    release the session. Returns how many operations were interrupted, or None when the session had
    already been closed."""
    from .session_backend import fail_fast_on_a_lost_server

    with no_client_marks():
        spark: Any = remote_session(attempt_session_url(url, attempt_id), token)
        try:
            fail_fast_on_a_lost_server(spark)
            interrupted = spark.interruptAll()
        except Exception as error:  # noqa: BLE001 - pyspark raises its own error classes
            if "SESSION_CLOSED" in str(error):  # the attempt's client released it: nothing of it runs
                return None
            raise
        finally:
            try:
                spark.stop()
            except Exception:  # noqa: BLE001 - the session is ending either way
                pass
    return len(interrupted or ())


class ProcessOrphans:
    """Submit backend: end the process groups on this machine tagged with the attempt id."""

    def stop(self, attempt_id: str, host: str) -> str:
        table = tagged_processes(ATTEMPT_VARIABLE, attempt_id)
        groups = sorted({info.pgid for info in table.values() if info.tagged})
        ended = [pgid for pgid in groups if terminate_process_group(pgid)]
        if not ended:
            return "no process of it was left on this machine"
        return f"{len(ended)} process group(s) of its spark-submit ended ({', '.join(map(str, ended))})"


__all__ = ["ATTEMPT_VARIABLE", "OrphanStopper", "ProcessOrphans", "SessionOrphans", "attempt_session_id",
           "attempt_session_url", "interrupt_attempt_session"]
