"""The session backend: a unit attempt runs on its host's long-lived Spark Connect server.

`SessionSubmission` keeps `RegionSubmission`'s contract (``run() -> SubmissionResult``, ``kill()``
from any thread, ``pid``, ``master``), so a runner can use either backend. The region program's
orchestration (`program.run_unit`: regions in schedule order, partition reads and writes, the commit)
runs in the calling process against a Spark Connect client session of its own, so a new attempt costs
a session (~0.2 s on a warm server) instead of a JVM and a Spark application (6-25 s). The session is
tagged with the attempt id; `kill()` interrupts every operation of the session (``interruptAll``: the
program's region threads share it) and closes it, so the attempt ends as killed.

Per-attempt Spark conf: runtime SQL settings (``spark.sql.*``, e.g. the shuffle partitions sized to
the grant) are set on the session; settings that size a Spark application (memory, cores) belong to
the server and are logged as not applied. How attempts share the server's cores (FAIR inside Spark's
default pool; Spark Connect cannot choose a pool per session) is in `connect.FAIR_DEFAULT_POOL`.
"""
from __future__ import annotations

import threading
import time
import traceback
from collections.abc import Callable, Mapping
from typing import Any

from ..data.task import UnitTask
from ..driver.program import EXIT_VERTEX_FAILED, VertexFailure, run_unit
from ..servers.auth import remote_session
from ..servers.reachability import LOSS_HANDSHAKE_TIMEOUT_S, connect_server_serves
from .orphans import attempt_session_url
from .submission import default_conf
from .submit import SESSION_COMMAND_PREFIX, SubmissionResult

EXIT_FAILED = 1


class SessionSubmission:
    """One attempt of a unit on a Spark Connect server at `url` (presenting its `token`, if it has one),
    run in the calling thread."""

    def __init__(self, task: UnitTask, url: str, slots: int, job_conf: Mapping[str, str] | None = None, *,
                 on_line: Callable[[str], None] | None = None, token: str | None = None,
                 exit_cause: Callable[[], str | None] | None = None,
                 serving: Callable[[], bool] | None = None, master: str | None = None,
                 on_master_lost: Callable[[], object] | None = None) -> None:
        """`master`: the host's standalone master, watched with the server (a server's driver waits for the
        executors of a vanished master forever); `on_master_lost`: what drops the server's application of it."""
        self.task = task
        self.url = url
        self._master = master
        self._on_master_lost = on_master_lost
        self._token = token
        self._exit_cause = exit_cause  # why the server is gone, if its process exited (`ConnectServer.exit_cause`)
        self._serving = serving or (lambda: connect_server_serves(url, LOSS_HANDSHAKE_TIMEOUT_S))
        self.slots = slots
        self.conf = default_conf(slots, dict(job_conf or {}))
        self._on_line = on_line or (lambda line: None)
        self._lock = threading.Lock()
        self._spark: Any = None
        self._killed = threading.Event()
        self._done = threading.Event()
        self.result: SubmissionResult | None = None

    @property
    def pid(self) -> int | None:
        return None  # the attempt runs in a server's JVM shared with other attempts

    @property
    def master(self) -> str | None:
        return self._master

    def master_lost(self) -> None:
        """The host's master went silent: its server's application of it is gone for good (outside Spark's
        HA mode a driver never registers with a master again), so the server is stopped for the next attempt
        to start a fresh one."""
        if self._on_master_lost is not None:
            self._on_master_lost()

    @property
    def server_url(self) -> str:
        """The Spark Connect server the attempt runs on (the host watch asks it)."""
        return self.url

    @property
    def tag(self) -> str:
        return f"regionflow-{self.task.attempt_id}"

    def run(self) -> SubmissionResult:
        started = time.monotonic()
        lines: list[str] = []

        def note(line: str) -> None:
            lines.append(line)
            self._on_line(line)

        returncode, error, lost = 0, None, False
        try:
            if self._killed.is_set():
                raise InterruptedError("killed before it started")
            spark = self._connect(note)
            run_unit(spark, self.task.plan(), self.task)
            note(f"attempt {self.task.attempt_id} of {self.task.unit_name} finished")
        except VertexFailure as failure:
            returncode = EXIT_VERTEX_FAILED
            trace = traceback.format_exc().splitlines()
            try:
                note(f"regionflow: error: {failure}")
            except BaseException as unheard:  # noqa: BLE001 - the log is gone (its supervisor died, say)
                # the attempt still ends with a result, or it would end unrecorded: killed (the parent watch
                # interrupted the session, which failed the vertex) or failed for why its log is gone
                if not self._killed.is_set():
                    returncode, error = EXIT_FAILED, f"{type(unheard).__name__}: {unheard}"
            lines.extend(trace)
        except BaseException as failure:  # noqa: BLE001 - turned into the result, like a failed process
            returncode = EXIT_FAILED
            if not self._killed.is_set():
                error = f"{type(failure).__name__}: {failure}"
                if not self._serving():
                    lost = True
                    error = (f"host {self.task.host or '?'} lost: its Spark Connect server at {self.url} stopped "
                             f"answering; {error}")
                lines.extend(traceback.format_exc().splitlines())
        finally:
            self._disconnect()
            self._done.set()
        cause = self._exit_cause() if returncode != 0 and self._exit_cause is not None else None
        if cause is not None:  # the server died under the attempt: say why, from its log
            lost = True
            error = f"host {self.task.host or '?'} lost: {cause}" + (f"; {error}" if error else "")
        self.result = SubmissionResult(
            returncode=returncode, seconds=time.monotonic() - started, log_tail=tuple(lines[-200:]),
            killed=self._killed.is_set() and returncode != 0,
            command=f"{SESSION_COMMAND_PREFIX}{self.url} tag {self.tag}", error=error, host_lost=lost)
        return self.result

    def kill(self, *, wait: bool = True, timeout: float = 60.0) -> None:
        """Interrupt every operation of the attempt's session; with `wait`, until `run()` returned."""
        self._killed.set()
        with self._lock:
            spark = self._spark
        if spark is not None and not _finishes_within(KILL_RPC_WAIT_S, _interrupt_and_stop, spark):
            # the server does not answer (hung, stopped): cutting the connection fails the calls the
            # attempt waits in, which a silent server would otherwise never end
            _finishes_within(KILL_RPC_WAIT_S + CLIENT_CLOSE_WAIT_S, spark.client.close)
        if wait:
            self._done.wait(timeout)

    def _connect(self, note: Callable[[str], None]) -> Any:
        # the session's id is derived from the attempt's, so it can be interrupted if this process dies
        # creating the session calls nothing on the server; it is known to kill() before the first call
        # (the conf below), which a hung server would never answer
        spark = remote_session(attempt_session_url(self.url, self.task.attempt_id), self._token)
        with self._lock:
            self._spark = spark
        fail_fast_on_a_lost_server(spark)
        spark.addTag(self.tag)
        apply_session_conf(spark, self.conf, note)
        if self._killed.is_set():  # killed while connecting
            spark.interruptAll()
            raise InterruptedError("killed while connecting")
        note(f"attempt {self.task.attempt_id} of {self.task.unit_name} on {self.url} with {self.slots} slot(s)")
        return spark

    def _disconnect(self) -> None:
        with self._lock:
            spark, self._spark = self._spark, None
        if spark is not None:
            try:
                spark.stop()
            except Exception:  # noqa: BLE001 - closing a session of a server that went away
                pass


def apply_session_conf(spark: Any, conf: Mapping[str, str], note: Callable[[str], None] = lambda line: None) -> None:
    """Set a submission's runtime SQL conf (``spark.sql.*``) on a Connect session; anything else
    sizes an application, stays the server's, and is noted as not applied."""
    for key, value in conf.items():
        if not key.startswith("spark.sql."):
            note(f"conf {key} sizes an application and stays the server's (session backend)")
            continue
        spark.conf.set(key, value)


LOST_SERVER_RETRIES = 4  # 0.05 + 0.2 + 0.8 + 1 s: a dead server fails the attempt in ~2 s
LOST_SERVER_MAX_BACKOFF_MS = 1000


KILL_RPC_WAIT_S = 5.0  # a live server interrupts and closes a session in well under a second
CLIENT_CLOSE_WAIT_S = 12.0  # pyspark's client.close() waits up to 10 s for pending release calls


def _interrupt_and_stop(spark: Any) -> None:
    """interruptAll ends the running operations; closing the session makes the program's next
    operation fail too (it would otherwise go on with the next region)."""
    for action in (spark.interruptAll, spark.stop):
        try:
            action()
        except Exception:  # noqa: BLE001 - the session may be closing: run() ends on its own
            pass


def _finishes_within(seconds: float, action: Callable[..., Any], *args: Any) -> bool:
    """Run `action(*args)` in a daemon thread; True when it returned (or raised) within `seconds`. A
    call to a hung server never returns: the thread is then left to end with the process."""
    def quietly() -> None:
        try:
            action(*args)
        except Exception:  # noqa: BLE001 - a closing session or channel: nothing more to do
            pass

    thread = threading.Thread(target=quietly, name="session-kill", daemon=True)
    thread.start()
    thread.join(seconds)
    return not thread.is_alive()


def fail_fast_on_a_lost_server(spark: Any) -> None:
    """Make the session give up on an unreachable server after ~2 s instead of pyspark's default
    (retries tolerating at least 10 minutes, measured here: a call on a killed server still waited
    after 90 s), so a killed server is a lost host at once, not a hung attempt. Uses the Connect
    client's public ``set_retry_policies``; the server is on loopback, where a refused connection
    does not heal by waiting."""
    from pyspark.sql.connect.client.retries import DefaultPolicy

    spark.client.set_retry_policies([DefaultPolicy(max_retries=LOST_SERVER_RETRIES, initial_backoff=50,
                                                   max_backoff=LOST_SERVER_MAX_BACKOFF_MS)])


__all__ = ["SessionSubmission", "apply_session_conf"]
