"""Long-lived Spark per host: one Spark Connect server per host of the cluster (the session backend's
TaskManager), started, checked and stopped here.

A server is ``spark-submit --class org.apache.spark.sql.connect.service.SparkConnectServer
spark-internal`` from the installed pyspark (which ships ``spark-connect_2.13-<version>.jar``), on the
host's master (``local[<slots>]`` for a local host, pinned to its cores like a submission; a standalone
master URL otherwise), sized from the host like a Flink TaskManager (`sizing.sized_conf` of all its
slots of its slot profile: one JVM of slots x slot memory on local, one executor per slot on
standalone), with its gRPC endpoint bound to 127.0.0.1 on a port per host and Spark's UI off.
Every server of a cluster runs in a process group of its own and is described by a small JSON state
file (pid, port, master, log) in a state directory, so ``regionflow session status`` from another
process finds it and ``stop`` ends the whole group. Its output goes to ``<state dir>/<host>.log``.
Every start gives the server a new random token, kept in ``<state dir>/<host>.token`` (0600) and given
to the server in its environment; a client session presents it (`auth`, `ConnectServer.token`).

A server that cannot start (the port is taken, no Java, a bad master) is reported *down* with the
cause read from its log, at once when its process exits, never by waiting out the timeout.
"""
from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

from ...core.errors import RegionflowError
from ...localfiles import exclusive_lock, tail, write_json_atomically, write_text_atomically
from ...processes import terminate_process_group, wait_until
from ...scheduling.hosts import Host
from ..launch.sizing import sized_conf
from ..launch.submit import pinned_cpus
from ..launch.submit_args import (
    LOOPBACK,
    SubmitConfigError,
    driver_address,
    driver_conf,
    sized_master,
    spark_submit_binary,
)
from ..launch.targets import spark_target
from .auth import TOKEN_VARIABLE, checked_properties_file, new_secret, read_secret, remote_session, write_secret
from .client_env import classic_spark_env, no_client_marks
from .reachability import DEFAULT_HANDSHAKE_TIMEOUT_S, answers, connect_server_serves
from .server_log import EXIT_ON_OOM, log_cause

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
DEFAULT_BASE_PORT = 15002  # Spark Connect's own default port; host i of a cluster gets base + i
# A bound for a server whose process lives but never serves, not an expected time: one whose process
# exits fails its start at once. A server is up in 6-20 s on a quiet 2-core box and took 3-16 min on a
# throttled one, where a 180 s bound failed servers that were only slow.
DEFAULT_START_TIMEOUT_S = 600.0
IDLE_STOP_WAIT_S = 30.0  # how long a start waits for an idle stop's old server to let its port go
_LOG_TAIL = 30
# Spark Connect has no way to put a session's jobs in a pool of its own (the server sets no
# ``spark.scheduler.pool`` from a session; SPARK-48040 was never merged), so every attempt's jobs land
# in the ``default`` pool, which is FIFO unless an allocation file says otherwise. FIFO there lets the
# first attempt's stage take every core of the host until it runs out of tasks, so a second attempt
# granted the other slots waits for it. FAIR in the default pool gives the next free core to the stage
# with the fewest running tasks: an attempt holding more than its share gives cores back task by task.
FAIR_DEFAULT_POOL = """<?xml version="1.0"?>
<allocations>
  <pool name="default">
    <schedulingMode>FAIR</schedulingMode>
    <weight>1</weight>
    <minShare>0</minShare>
  </pool>
</allocations>
"""


IDLE = "for being idle"
MASTER_LOST = "because its master went away (its application of it would never get an executor again)"


class SessionServerError(RegionflowError):
    """A Spark Connect server could not be started or reached."""


@dataclass(frozen=True)
class ServerState:
    """What a state file records about one running server."""

    host: str
    pid: int
    port: int
    master: str
    log_path: str
    started_at: float


@dataclass(frozen=True)
class ServerStatus:
    """`up` (the port answers), `starting` (its process lives, the port does not answer yet) or
    `down` (no process; `cause` says why when known); `ConnectServer.checked_status` also tells
    `silent`: the process lives and holds the port but answers no HTTP/2 handshake (stopped or hung)."""

    host: str
    state: str
    url: str
    pid: int | None = None
    cause: str | None = None

    @property
    def up(self) -> bool:
        return self.state == "up"


class ConnectServer:
    """The Spark Connect server of one host."""

    def __init__(self, host: Host, port: int, state_dir: str, conf: Mapping[str, str] | None = None,
                 bind_address: str = LOOPBACK) -> None:
        """`bind_address`: this machine's address (``[regionflow] bind_address``) that the driver binds when
        the host's master is on another machine; the gRPC endpoint is on 127.0.0.1 whatever it is (the
        server's clients, region task processes, run on this machine)."""
        if not 1 <= int(port) <= 65535:
            raise SubmitConfigError(f"host {host.name!r}: Spark Connect port {port} is not a TCP port (1-65535)")
        self.host = host
        self.target = spark_target(host)
        self.port = int(port)
        self.state_dir = os.path.abspath(state_dir)
        self.conf = dict(conf or {})
        # what its driver binds and advertises: 127.0.0.1 for a master here, bind_address for one elsewhere
        self.driver_address = driver_address(self.target.parsed, bind_address)

    @property
    def url(self) -> str:
        """The client URL, ``sc://127.0.0.1:<port>``."""
        return f"sc://{LOOPBACK}:{self.port}"

    @property
    def state_path(self) -> str:
        return os.path.join(self.state_dir, f"{_file_name(self.host.name)}.json")

    @property
    def log_path(self) -> str:
        return os.path.join(self.state_dir, f"{_file_name(self.host.name)}.log")

    @property
    def token_path(self) -> str:
        """The file (0600) of the token the running server requires of its clients."""
        return os.path.join(self.state_dir, f"{_file_name(self.host.name)}.token")

    @property
    def token(self) -> str | None:
        """The token a client session of this server presents (`auth.remote_session`); None when the
        server was started without one."""
        return read_secret(self.token_path)

    @property
    def idle_mark_path(self) -> str:
        return os.path.join(self.state_dir, f"{_file_name(self.host.name)}.idle")

    @property
    def keeper_lock_path(self) -> str:
        """The lock under which one attempt decides to start this server (`keeper.ServerKeeper`)."""
        return os.path.join(self.state_dir, f"{_file_name(self.host.name)}.keeper.lock")

    @property
    def restarts_path(self) -> str:
        """When the server was started again after it exited (`keeper.ServerKeeper`'s crash-loop count)."""
        return os.path.join(self.state_dir, f"{_file_name(self.host.name)}.restarts.json")

    @property
    def stopped_idle(self) -> bool:
        """The server was stopped for being idle (`stop_idle`): the next attempt starts it again."""
        return os.path.exists(self.idle_mark_path)

    @property
    def allocation_path(self) -> str:
        return os.path.join(self.state_dir, f"{_file_name(self.host.name)}.fairscheduler.xml")

    def command(self) -> list[str]:
        """The spark-submit command line of this host's server."""
        master = sized_master(self.target.master, self.host.slots)
        conf = {
            "spark.connect.grpc.binding.address": LOOPBACK,
            "spark.connect.grpc.binding.port": str(self.port),
            "spark.ui.enabled": "false",
            "spark.app.name": f"regionflow session {self.host.name}",
            # attempts share the server's cores: their stages share them fairly, not first come first served
            "spark.scheduler.mode": "FAIR",
            "spark.scheduler.allocation.file": self.allocation_path,
            # a cancelled attempt's Python tasks: their workers are killed 0.1 s after Spark notices the
            # interruption (Spark waits 2 s by default), so the attempt's cores are free within ~2 s
            "spark.python.task.killTimeout": "100ms",
        }
        conf.update(driver_conf(self.driver_address))
        # sized like a TaskManager from its host: all the host's slots of its slot profile
        sized = sized_conf(master, self.host.slots, self.host.slot_profile)
        conf.update({**sized.proposed, **sized.owned})
        conf.update(self.conf)
        # any OutOfMemoryError ends the JVM (as Spark's executors do): a JVM that lost a thread to it may
        # keep its port and answer nothing, a half-dead host; an ended one is seen as lost and its cause read
        options = conf.get("spark.driver.extraJavaOptions", "")
        if EXIT_ON_OOM not in options:
            conf["spark.driver.extraJavaOptions"] = f"{options} {EXIT_ON_OOM}".strip()
        args = [spark_submit_binary(), "--class", SERVER_CLASS, "--master", master.url]
        if self.target.properties_file is not None:  # the host's secret, read by spark-submit, not on argv
            args += ["--properties-file", checked_properties_file(self.target.properties_file, master.url)]
        for key, value in conf.items():
            args += ["--conf", f"{key}={value}"]
        return args + ["spark-internal"]

    # ---- lifecycle ------------------------------------------------------------------------------

    def start(self, timeout: float = DEFAULT_START_TIMEOUT_S) -> ServerStatus:
        """Start the server unless it is up already; return once its port answers.

        Raises `SessionServerError` with the cause when the process exits first (port taken, no Java)
        or the port does not answer within `timeout` seconds (the process is then stopped)."""
        os.makedirs(self.state_dir, mode=0o700, exist_ok=True)
        with exclusive_lock(os.path.join(self.state_dir, f"{_file_name(self.host.name)}.lock")):
            status = self._start_locked(timeout)
        try:
            os.remove(self.idle_mark_path)
        except FileNotFoundError:
            pass
        return status

    def _start_locked(self, timeout: float) -> ServerStatus:
        """`start` under the host's lock file: one process starts a host's server, the others wait."""
        current = self.status()
        if current.state in ("up", "starting") and current.pid is not None:
            return current if current.up else self._wait_ready(current.pid, timeout)
        if self.stopped_idle:  # an idle stop may still be ending the old server: let its port go
            wait_until(lambda: not _port_answers(self.port), IDLE_STOP_WAIT_S, poll_seconds=0.2)
        if _port_answers(self.port):
            raise SessionServerError(
                f"host {self.host.name!r}: port {self.port} on {LOOPBACK} is already in use by another "
                f"program; free it or give this host another Spark Connect port")
        os.makedirs(self.state_dir, mode=0o700, exist_ok=True)
        write_text_atomically(self.allocation_path, FAIR_DEFAULT_POOL)
        env = classic_spark_env(self.driver_address)
        # a new token per start, in its own 0600 file and the server's environment, never on its argv
        env[TOKEN_VARIABLE] = new_secret()
        write_secret(self.token_path, env[TOKEN_VARIABLE])
        with open(self.log_path, "ab") as log, pinned_cpus(self.target.cpu_affinity):
            try:
                process = subprocess.Popen(self.command(), stdin=subprocess.DEVNULL, stdout=log,
                                           stderr=subprocess.STDOUT, env=env, start_new_session=True)
            except OSError as error:
                raise SessionServerError(f"host {self.host.name!r}: cannot start spark-submit: {error}") from error
        state = ServerState(self.host.name, process.pid, self.port, self.target.master, self.log_path,
                            time.time())
        _write_json(self.state_path, asdict(state))
        return self._wait_ready(process.pid, timeout, process)

    def _wait_ready(self, pid: int, timeout: float, process: subprocess.Popen | None = None) -> ServerStatus:
        deadline = time.monotonic() + timeout
        while True:
            exited = process.poll() if process is not None else (None if _alive(pid) else -1)
            if exited is not None:
                self._forget()
                raise SessionServerError(
                    f"host {self.host.name!r}: the Spark Connect server exited (code {exited}) before its port "
                    f"{self.port} answered; its log ({self.log_path}) ends with:\n{tail(self.log_path, _LOG_TAIL)}")
            if _port_answers(self.port) and self._answers_a_session():
                return ServerStatus(self.host.name, "up", self.url, pid)
            if time.monotonic() >= deadline:
                self.stop()
                raise SessionServerError(
                    f"host {self.host.name!r}: the Spark Connect server did not answer on port {self.port} within "
                    f"{timeout:.0f} s; it was stopped. Its log ({self.log_path}) ends with:\n"
                    f"{tail(self.log_path, _LOG_TAIL)}")
            time.sleep(0.2)

    def _answers_a_session(self) -> bool:
        """A client session runs a one-row job (the port opens before the server can serve). The
        probe leaves no Connect-client marks in this process's environment: a classic Spark program
        started from here later (spark-submit inherits the environment) would become a Connect client."""
        with no_client_marks():
            try:
                session = remote_session(self.url, self.token)
                try:
                    return session.range(1).count() == 1
                finally:
                    session.stop()
            except Exception:  # noqa: BLE001 - not ready yet; the caller keeps waiting
                return False

    def exit_cause(self) -> str | None:
        """Why this host's server is gone, when its process exited (None while it runs or when it was not
        started): the error its log ends with, an OutOfMemoryError first. What is left of its process group
        (Python workers) is stopped, so nothing of it lingers half alive."""
        state = self._state()
        if state is None or _alive(state.pid):
            return None
        terminate_process_group(state.pid, 2.0)
        with contextlib.suppress(ChildProcessError):  # started by this process: reap it, no zombie is left
            os.waitpid(state.pid, os.WNOHANG)
        return f"its Spark Connect server (pid {state.pid}) exited: {log_cause(self.log_path)} (log: {self.log_path})"

    def reachable(self) -> bool:
        """True when something accepts connections on this host's Spark Connect port (a server process
        is there to stop or to ask), even if it is stopped or hung; see `serving`."""
        return _port_answers(self.port)

    def serving(self, timeout: float = DEFAULT_HANDSHAKE_TIMEOUT_S) -> bool:
        """True when this host's Spark Connect server answers an HTTP/2 handshake within `timeout` seconds: its
        process runs and serves, which is what a client needs (`reachable` also holds for a stopped or hung one)."""
        return connect_server_serves(self.url, timeout)

    def status(self) -> ServerStatus:
        """Whether this host's server is up, starting or down (read from its state file and port)."""
        state = self._state()
        if state is None:
            return ServerStatus(self.host.name, "down", self.url, cause="not started")
        if not _alive(state.pid):
            return ServerStatus(self.host.name, "down", self.url, cause=f"process {state.pid} is gone")
        return ServerStatus(self.host.name, "up" if _port_answers(self.port) else "starting", self.url, state.pid)

    def checked_status(self) -> ServerStatus:
        """`status`, and for a server whose port answers, whether it serves: `silent` when it does not
        (what an operator asks; `status` alone stays cheap for the start logic)."""
        current = self.status()
        if current.up and not self.serving():
            return replace(current, state="silent", cause=(
                f"process {current.pid} holds the port but answers no HTTP/2 handshake (stopped or hung); "
                f"stop it and start it again"))
        return current

    def stop_idle(self, grace_seconds: float = 10.0, why: str = IDLE) -> bool:
        """Stop the server to be started again by the next attempt (`why`: for being idle, or because its
        master went away): marked first, so an attempt arriving meanwhile starts it again (after the old one
        let its port go) instead of counting the host as lost or the stop as a crash."""
        os.makedirs(self.state_dir, mode=0o700, exist_ok=True)
        _write_json(self.idle_mark_path, {"host": self.host.name, "stopped_at": time.time(), "why": why})
        return self.stop(grace_seconds)

    @property
    def stop_reason(self) -> str:
        """Why `stop_idle` stopped it (`IDLE` or `MASTER_LOST`)."""
        try:
            with open(self.idle_mark_path, encoding="utf-8") as handle:
                return str(json.load(handle).get("why") or IDLE)
        except (OSError, ValueError, AttributeError):
            return IDLE

    def stop(self, grace_seconds: float = 10.0) -> bool:
        """Stop the server's whole process group; True when one was running."""
        state = self._state()
        self._forget()
        if state is None:
            return False
        return terminate_process_group(state.pid, grace_seconds)

    def _state(self) -> ServerState | None:
        try:
            with open(self.state_path, encoding="utf-8") as handle:
                data = json.load(handle)
            return ServerState(**data)
        except (OSError, ValueError, TypeError):
            return None

    def _forget(self) -> None:
        try:
            os.remove(self.state_path)
        except FileNotFoundError:
            pass


def _file_name(host: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in host) or "host"


def _port_answers(port: int) -> bool:
    return answers(LOOPBACK, port, timeout=0.5)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def _write_json(path: str, data: Mapping[str, Any]) -> None:
    write_json_atomically(path, dict(data))


__all__ = ["IDLE", "MASTER_LOST", "ConnectServer", "DEFAULT_START_TIMEOUT_S", "ServerState", "ServerStatus",
           "SessionServerError"]
