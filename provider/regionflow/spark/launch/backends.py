"""The two attempt backends (`attempt.Backend`): ``submit`` and ``session``.

``submit``: every attempt is a spark-submit of the region program, a Spark application sized to the
grant (any master: local, standalone, YARN, Kubernetes). ``session``: every attempt is a client
session on its host's long-lived Spark Connect server (``[regionflow] backend = session``); a server
that does not answer makes the host lost at once.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from ...core.errors import SpecError
from ...scheduling.hosts import Host
from ..data.task import UnitTask
from ..servers.connect import MASTER_LOST, SessionServerError
from ..servers.connections import SparkConnectionError
from ..servers.keeper import ServerKeeper
from ..servers.reachability import LOSS_HANDSHAKE_TIMEOUT_S
from ..servers.session_servers import SessionServers
from .attempt import Backend, HostLost
from .orphans import OrphanStopper, ProcessOrphans, SessionOrphans
from .session_backend import SessionSubmission
from .submission import unit_submission
from .submit import RegionSubmission
from .targets import backend_problem, spark_target

if TYPE_CHECKING:
    from ...config import RegionflowConfig

class SubmitBackend:
    """An attempt is one spark-submit (`unit_submission`)."""

    name = "submit"

    def __init__(self, job_conf: Mapping[str, str], py_files: Sequence[str], *, conn_id: str | None = None,
                 forward_output: bool = True) -> None:
        self.job_conf = dict(job_conf)
        self.py_files = list(py_files)
        self.conn_id = conn_id
        self.forward_output = forward_output

    def prepare(self, task: UnitTask, task_path: str, host: Host, slots: int,
                on_line: Callable[[str], None] | None) -> RegionSubmission:
        """The attempt's spark-submit (its task file written to `task_path`). With `forward_output`
        the hook logs every output line itself (in a task process: to the task log), so `on_line`
        is not called as well."""
        problem = backend_problem(host, self.name)
        if problem is not None:
            raise SpecError(problem)
        return unit_submission(task, task_path, host, slots, self.job_conf, self.py_files,
                               on_line=None if self.forward_output else on_line,
                               forward_output=self.forward_output, conn_id=self.conn_id)


class SessionBackend:
    """An attempt is a client session on the host's Spark Connect server, started first when regionflow owns
    it and it is not running (`ServerKeeper`)."""

    name = "session"

    def __init__(self, servers: SessionServers, job_conf: Mapping[str, str],
                 keeper: ServerKeeper | None = None) -> None:
        self.servers = servers
        self.job_conf = dict(job_conf)
        self.keeper = keeper or ServerKeeper()

    def prepare(self, task: UnitTask, task_path: str, host: Host, slots: int,
                on_line: Callable[[str], None] | None) -> SessionSubmission:
        """The attempt's session; raises `HostLost` when the host's server cannot serve. A server regionflow
        owns that is not running (never started, stopped for being idle, exited) is started first."""
        try:
            server = self.servers.server(host.name)
            url = server.url  # a conn_id host's: read from its Airflow connection
        except SparkConnectionError as error:
            raise HostLost(f"host {host.name} lost: {error}") from error
        try:
            self.keeper.ensure(server, on_line or (lambda line: None))
        except SessionServerError as error:
            raise HostLost(f"host {host.name} lost: {error}") from error
        task.write(task_path)  # the same record of the attempt as the submit backend leaves
        return SessionSubmission(task, url, slots, self.job_conf, on_line=on_line, token=server.token,
                                 exit_cause=server.exit_cause,
                                 serving=lambda: server.serving(LOSS_HANDSHAKE_TIMEOUT_S),
                                 master=None if host.conn_id is not None else spark_target(host).master,
                                 on_master_lost=lambda: server.stop_idle(grace_seconds=2.0, why=MASTER_LOST))


def configured_servers(config: RegionflowConfig) -> SessionServers:
    """The Spark Connect servers ``[regionflow]`` describes: hosts, state dir and base port."""
    return SessionServers(config.cluster, config.session_state_dir, config.session_base_port,
                          bind_address=config.bind_address)


def configured_stopper(config: RegionflowConfig) -> OrphanStopper:
    """What stops the Spark work of an attempt whose process died, for ``[regionflow] backend``."""
    return SessionOrphans(configured_servers(config)) if config.backend == "session" else ProcessOrphans()


def configured_backend(config: RegionflowConfig, job_conf: Mapping[str, str],
                       py_files: Callable[[], Sequence[str]], *, forward_output: bool = True) -> Backend:
    """The backend ``[regionflow] backend`` names, for attempts of one job (its conf and modules).
    `py_files` gives the job's modules as files for spark-submit's ``--py-files``; it is called only by
    the submit backend (a session attempt imports them in its own process)."""
    if config.backend == "session":
        return SessionBackend(configured_servers(config), job_conf)
    return SubmitBackend(job_conf, py_files(), conn_id=config.spark_conn_id, forward_output=forward_output)


__all__ = ["Backend", "SessionBackend", "SubmitBackend", "configured_backend", "configured_servers",
           "configured_stopper"]
