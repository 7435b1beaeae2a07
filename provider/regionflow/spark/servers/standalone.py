"""A real Spark standalone cluster (one master, n workers) on 127.0.0.1 (or on another address of a
machine, e.g. a network namespace of the multi-machine tests), for tests and for the distributed path of
`regionflow run`.

pyspark's wheel ships ``bin/spark-class`` and ``sbin/spark-daemon.sh`` but no ``start-master.sh``.
`StandaloneCluster` starts ``org.apache.spark.deploy.master.Master`` and
``org.apache.spark.deploy.worker.Worker`` with ``spark-class`` directly, each in a process group of
its own (rather than through spark-daemon.sh, which detaches them and leaves only pid files): the
cluster then owns every pid, and `stop()` ends each group, executors included (a worker starts its
executors in its own group). Everything binds its `address`, 127.0.0.1 by default (``--host``,
``SPARK_LOCAL_IP`` for the web UIs and executors); with `netns` every daemon starts in that Linux network
namespace (``ip netns exec``), a machine of its own. The master's REST server is off, ports are picked
free at start, and logs, pid and work directories live under `work_dir`. `start()` waits until the master's JSON
(``http://127.0.0.1:<webui>/json/``) reports every worker ALIVE.

Every start makes a new random secret (``spark.authenticate``, `auth`): master and workers read it from
the ``spark-defaults.conf`` of their own conf dir (0600), and an application is registered only when
it presents it, which it does by loading `app_properties_path` (0600; ``--properties-file``). A host
on this cluster names that file: `host_fields` is ``master=<url>,properties_file=<path>`` for a host
spec. Neither file's secret is on any process's command line; `stop` removes both files.

Standalone masters run PySpark drivers in client mode only: the driver runs inside spark-submit.
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ...core.errors import RegionflowError
from ...localfiles import tail
from ...processes import kill_process_group, process_group_members, terminate_process_group
from ..launch.submit_args import LOOPBACK, spark_child_env, spark_home
from .auth import authenticate_properties, new_secret, write_properties
from .session_servers import free_port

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
DEFAULT_START_TIMEOUT = 120.0
_LOG_TAIL_LINES = 30
_MEMORY_RE = re.compile(r"^\d+[kmgt]?$", re.IGNORECASE)


class StandaloneClusterError(RegionflowError):
    """The standalone cluster could not start, or was used before it started."""


@dataclass(frozen=True)
class _Daemon:
    """One JVM of the cluster: its role, its process (a group leader) and its log file."""

    role: str
    process: subprocess.Popen
    log_path: str

    def log_tail(self, lines: int = _LOG_TAIL_LINES) -> str:
        return tail(self.log_path, lines)


@dataclass(frozen=True)
class ListeningSocket:
    """A TCP socket in LISTEN state owned by one of the cluster's processes."""

    address: str
    port: int
    pid: int

    @property
    def is_loopback(self) -> bool:
        return self.address.startswith("127.") or self.address in ("::1", "::ffff:127.0.0.1")


class StandaloneCluster:
    """A Spark standalone master and `workers` workers on `address` (127.0.0.1 by default), in network
    namespace `netns` when one is named; a context manager. `master_port` fixes the master's port (a
    cluster started again where hosts already name its URL); by default a free one is picked."""

    def __init__(
        self,
        workers: int = 1,
        cores_per_worker: int = 2,
        memory_per_worker: str = "1g",
        work_dir: str | None = None,
        *,
        start_timeout: float = DEFAULT_START_TIMEOUT,
        daemon_memory: str = "256m",
        address: str = LOOPBACK,
        netns: str | None = None,
        master_port: int | None = None,
    ) -> None:
        _check_sizes(workers, cores_per_worker, memory_per_worker)
        self.workers = workers
        self.cores_per_worker = cores_per_worker
        self.memory_per_worker = memory_per_worker
        self.start_timeout = start_timeout
        self.daemon_memory = daemon_memory
        self.address = address
        self.netns = netns
        self._fixed_master_port = master_port
        self._own_work_dir = work_dir is None
        self.work_dir = os.path.abspath(work_dir or tempfile.mkdtemp(prefix="regionflow-standalone-"))
        self._daemons: list[_Daemon] = []
        self._master_port: int | None = None
        self._webui_port: int | None = None

    # -- lifecycle --

    def start(self) -> StandaloneCluster:
        """Start master and workers; return once every worker is ALIVE, else stop and raise."""
        if self._daemons:
            raise StandaloneClusterError(f"the standalone cluster in {self.work_dir} is already started")
        self._prepare_dirs()
        self._write_secret_files()
        self._master_port, self._webui_port = self._fixed_master_port or free_port(), free_port()
        try:
            self._daemons.append(self._spawn("master", MASTER_CLASS, self._master_args()))
            for index in range(self.workers):
                self._daemons.append(self._spawn(f"worker-{index}", WORKER_CLASS, self._worker_args(index)))
            self._wait_until_alive()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self, grace_seconds: float = 10.0) -> None:
        """Stop workers (and their executors), then the master; no JVM is left behind."""
        for daemon in reversed(self._daemons):
            terminate_process_group(daemon.process.pid, grace_seconds)
            with contextlib.suppress(subprocess.TimeoutExpired):
                daemon.process.wait(timeout=grace_seconds)
        self._daemons = []
        for path in (self.app_properties_path, self._daemon_conf_path):
            with contextlib.suppress(FileNotFoundError):
                os.remove(path)  # the secret of a stopped cluster opens nothing; leave none of it about
        if self._own_work_dir:
            shutil.rmtree(self.work_dir, ignore_errors=True)

    def vanish(self) -> None:
        """SIGKILL the master, then every worker with its executors, as a machine that goes away does.

        Unlike `stop`, nothing shuts down in order: a master stopped after its workers may still
        remove the application (ending the driver); a vanished one never answers again.
        """
        for daemon in self._daemons:
            kill_process_group(daemon.process.pid)
        self.stop(grace_seconds=1)

    def __enter__(self) -> StandaloneCluster:
        return self.start()

    def __exit__(self, *exc_info: Any) -> None:
        self.stop()

    # -- what the cluster offers --

    @property
    def master_url(self) -> str:
        self._require_started()
        return f"spark://{self.address}:{self._master_port}"

    @property
    def web_url(self) -> str:
        self._require_started()
        return f"http://{self.address}:{self._webui_port}"

    @property
    def app_properties_path(self) -> str:
        """The properties file (0600) an application loads to be let in: ``spark.authenticate`` and the
        secret of this start (``spark-submit --properties-file``, a host's ``properties_file``)."""
        return os.path.join(self.work_dir, "app.properties")

    @property
    def host_fields(self) -> str:
        """The fields of a host spec on this cluster: ``master=<url>,properties_file=<path>``."""
        return f"master={self.master_url},properties_file={self.app_properties_path}"

    @property
    def pids(self) -> list[int]:
        """Process ids of the master and worker JVMs (each the leader of its process group)."""
        return [daemon.process.pid for daemon in self._daemons]

    def status(self) -> dict[str, Any]:
        """The master's JSON status: workers, cores, memory, active and completed applications."""
        self._require_started()
        with urllib.request.urlopen(f"{self.web_url}/json/", timeout=5) as response:
            return json.load(response)

    def alive_workers(self) -> int:
        return sum(1 for worker in self.status().get("workers", []) if worker.get("state") == "ALIVE")

    def listening_sockets(self) -> list[ListeningSocket]:
        """LISTEN sockets of every process of the cluster (master, workers, executors)."""
        return listening_sockets(_group_pids(self.pids))

    def log_tails(self) -> str:
        return "\n".join(f"--- {d.role} ({d.log_path}) ---\n{d.log_tail()}" for d in self._daemons)

    # -- internals --

    def _require_started(self) -> None:
        if not self._daemons:
            raise StandaloneClusterError("the standalone cluster is not started; "
                                         "call start() or use it as a context manager")

    def _prepare_dirs(self) -> None:
        for name in ("logs", "pids", "work", "conf", "local"):
            os.makedirs(os.path.join(self.work_dir, name), exist_ok=True)

    @property
    def _daemon_conf_path(self) -> str:
        return os.path.join(self.work_dir, "conf", "spark-defaults.conf")

    def _write_secret_files(self) -> None:
        """A new secret for this start, for master and workers (their conf dir) and applications."""
        properties = authenticate_properties(new_secret())
        write_properties(self._daemon_conf_path, properties)
        write_properties(self.app_properties_path, properties)

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(spark_child_env(local_ip=self.address))
        env.update({
            "SPARK_MASTER_HOST": self.address,
            # Its own conf dir: only the secret's spark-defaults.conf, none from elsewhere leaks in.
            "SPARK_CONF_DIR": os.path.join(self.work_dir, "conf"),
            "SPARK_LOG_DIR": os.path.join(self.work_dir, "logs"),
            "SPARK_PID_DIR": os.path.join(self.work_dir, "pids"),
            "SPARK_WORKER_DIR": os.path.join(self.work_dir, "work"),
            "SPARK_LOCAL_DIRS": os.path.join(self.work_dir, "local"),
            "SPARK_DAEMON_MEMORY": self.daemon_memory,
            "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false -Dspark.ui.reverseProxy=false",
            "SPARK_WORKER_OPTS": "-Dspark.worker.cleanup.enabled=false",
        })
        return env

    def _master_args(self) -> list[str]:
        return ["--host", self.address, "--port", str(self._master_port), "--webui-port", str(self._webui_port)]

    def _worker_args(self, index: int) -> list[str]:
        return [
            "--host", self.address, "--port", str(free_port()), "--webui-port", str(free_port()),
            "--cores", str(self.cores_per_worker), "--memory", self.memory_per_worker,
            "--work-dir", os.path.join(self.work_dir, "work", f"worker-{index}"),
            f"spark://{self.address}:{self._master_port}",
        ]

    def _spawn(self, role: str, java_class: str, args: list[str]) -> _Daemon:
        log_path = os.path.join(self.work_dir, "logs", f"{role}.out")
        command = [os.path.join(spark_home(), "bin", "spark-class"), java_class, *args]
        if self.netns is not None:  # the daemon's own machine: it execs in place, the pid stays its own
            command = ["ip", "netns", "exec", self.netns, *command]
        with open(log_path, "ab") as log_file:
            process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT,
                                       env=self._env(), cwd=self.work_dir, start_new_session=True)
        with open(os.path.join(self.work_dir, "pids", f"{role}.pid"), "w", encoding="utf-8") as pid_file:
            pid_file.write(str(process.pid))
        return _Daemon(role, process, log_path)

    def _wait_until_alive(self) -> None:
        deadline = time.monotonic() + self.start_timeout
        while True:
            self._fail_if_a_daemon_died()
            alive = self._poll_alive_workers()
            if alive >= self.workers:
                return
            if time.monotonic() >= deadline:
                raise StandaloneClusterError(
                    f"the standalone cluster did not come up within {self.start_timeout:.0f} s: {alive} of "
                    f"{self.workers} worker(s) ALIVE at {self._webui_json_url()}; raise start_timeout on a busy "
                    f"machine or read the logs:\n{self.log_tails()}"
                )
            time.sleep(0.5)

    def _poll_alive_workers(self) -> int:
        try:
            with urllib.request.urlopen(self._webui_json_url(), timeout=2) as response:
                status = json.load(response)
        except (urllib.error.URLError, OSError, ValueError):
            return 0
        return sum(1 for worker in status.get("workers", []) if worker.get("state") == "ALIVE")

    def _webui_json_url(self) -> str:
        return f"http://{self.address}:{self._webui_port}/json/"

    def _fail_if_a_daemon_died(self) -> None:
        for daemon in self._daemons:
            code = daemon.process.poll()
            if code is not None:
                raise StandaloneClusterError(
                    f"the standalone {daemon.role} exited with code {code} while starting; its log "
                    f"({daemon.log_path}) ends with:\n{daemon.log_tail()}"
                )


def _check_sizes(workers: int, cores_per_worker: int, memory_per_worker: str) -> None:
    for name, value in (("workers", workers), ("cores_per_worker", cores_per_worker)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise StandaloneClusterError(f"{name}={value!r} is not valid; give a whole number >= 1")
    if not isinstance(memory_per_worker, str) or not _MEMORY_RE.match(memory_per_worker):
        raise StandaloneClusterError(
            f"memory_per_worker={memory_per_worker!r} is not a Spark memory size; use e.g. '1g' or '512m'"
        )



def _group_pids(leaders: Iterable[int]) -> list[int]:
    return [pid for leader in leaders for pid in process_group_members(leader)]


def listening_sockets(pids: Iterable[int]) -> list[ListeningSocket]:
    """TCP sockets in LISTEN state owned by `pids` (from /proc; IPv4 and IPv6), each read from the socket
    table of its process's own network namespace."""
    wanted = set(pids)
    inode_owner = {inode: pid for pid in wanted for inode in _socket_inodes(pid)}
    tables: dict[int, int] = {}  # network namespace -> a pid of it, whose /proc/<pid>/net shows its table
    for pid in wanted:
        with contextlib.suppress(OSError):
            tables.setdefault(os.stat(f"/proc/{pid}/ns/net").st_ino, pid)
    sockets = []
    for reader in tables.values():
        for table, is_v6 in ((f"/proc/{reader}/net/tcp", False), (f"/proc/{reader}/net/tcp6", True)):
            for address, port, inode in _listening_entries(table, is_v6):
                if inode in inode_owner:
                    sockets.append(ListeningSocket(address, port, inode_owner[inode]))
    return sockets


def _socket_inodes(pid: int) -> set[int]:
    inodes: set[int] = set()
    fd_dir = f"/proc/{pid}/fd"
    try:
        names = os.listdir(fd_dir)
    except OSError:
        return inodes
    for name in names:
        try:
            target = os.readlink(os.path.join(fd_dir, name))
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(int(target[8:-1]))
    return inodes


def _listening_entries(table: str, is_v6: bool) -> list[tuple[str, int, int]]:
    listen_state = "0A"
    entries: list[tuple[str, int, int]] = []
    try:
        with open(table, encoding="ascii") as handle:
            rows = handle.readlines()[1:]
    except OSError:
        return entries
    for row in rows:
        fields = row.split()
        if len(fields) > 9 and fields[3] == listen_state:
            hex_address, hex_port = fields[1].split(":")
            entries.append((_decode_address(hex_address, is_v6), int(hex_port, 16), int(fields[9])))
    return entries


def _decode_address(hex_address: str, is_v6: bool) -> str:
    raw = bytes.fromhex(hex_address)
    # /proc/net/tcp* prints each 32-bit word in host (little-endian) order.
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
    if not is_v6:
        return socket.inet_ntop(socket.AF_INET, words)
    return socket.inet_ntop(socket.AF_INET6, words)


__all__ = ["StandaloneCluster", "StandaloneClusterError", "ListeningSocket", "listening_sockets"]
