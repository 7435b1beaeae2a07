"""`SessionServers`: the Spark Connect servers of a whole cluster, one per host (`connect.ConnectServer`)."""
from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor

from ...scheduling.hosts import Cluster
from ..launch.submit_args import LOOPBACK
from .connect import DEFAULT_BASE_PORT, DEFAULT_START_TIMEOUT_S, ConnectServer, ServerStatus, SessionServerError
from .external import ExternalServer

Server = ConnectServer | ExternalServer


class SessionServers:
    """The Connect servers of a whole cluster: host i listens on ``base_port + i``, but for a host with a
    ``conn_id``, whose server someone else runs (`ExternalServer`)."""

    def __init__(self, cluster: Cluster, state_dir: str, base_port: int | None = DEFAULT_BASE_PORT,
                 conf: Mapping[str, str] | None = None, bind_address: str = LOOPBACK) -> None:
        """`base_port` None: each host gets a free port of this machine (servers owned by one run).
        `bind_address`: what the drivers of hosts whose master is elsewhere bind (`ConnectServer`)."""
        self.cluster = cluster
        self.servers: dict[str, Server] = {
            host.name: ExternalServer(host) if host.conn_id is not None else
            ConnectServer(host, free_port() if base_port is None else base_port + index, state_dir, conf,
                          bind_address)
            for index, host in enumerate(cluster)}

    def server(self, host: str) -> Server:
        try:
            return self.servers[host]
        except KeyError:
            raise SessionServerError(
                f"no host {host!r} in the cluster; its hosts are: {', '.join(self.servers)}") from None

    def start(self, hosts: list[str] | None = None, timeout: float = DEFAULT_START_TIMEOUT_S) -> list[ServerStatus]:
        """Start the named (default: all) servers at once; raises the first host's error after all tried."""
        names = hosts or list(self.servers)
        with ThreadPoolExecutor(max(1, len(names)), thread_name_prefix="server-start") as pool:
            return list(pool.map(lambda name: self.server(name).start(timeout), names))  # the block waits for all

    def status(self, hosts: list[str] | None = None) -> list[ServerStatus]:
        """`ConnectServer.status` of the named (default: all) hosts' servers."""
        return [self.server(name).status() for name in (hosts or list(self.servers))]

    def checked_status(self, hosts: list[str] | None = None) -> list[ServerStatus]:
        """`ConnectServer.checked_status` (a handshake with each server that is up) of the named hosts."""
        return [self.server(name).checked_status() for name in (hosts or list(self.servers))]

    def stop(self, hosts: list[str] | None = None) -> list[str]:
        """Stop the named (default: all) servers; returns the hosts whose server was running."""
        return [name for name in (hosts or list(self.servers)) if self.server(name).stop()]


def default_state_dir() -> str:
    """``$AIRFLOW_HOME/regionflow-sessions`` (``~/airflow`` without AIRFLOW_HOME)."""
    home = os.environ.get("AIRFLOW_HOME") or os.path.join(os.path.expanduser("~"), "airflow")
    return os.path.join(home, "regionflow-sessions")


def free_port() -> int:
    """A TCP port of 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((LOOPBACK, 0))
        return int(probe.getsockname()[1])


__all__ = ["Server", "SessionServers", "default_state_dir", "free_port"]
