"""`ExternalServer`: the Spark Connect server of a host with a ``conn_id``, run by someone else.

It answers what `connect.ConnectServer` answers for the session backend, the host probe, the idle reaper
and the orphan stopper (its URL and token, whether it is reachable and serves, its status), but regionflow
never starts, stops or restarts it: `start` only checks that it answers, `stop` and `stop_idle` do
nothing. Its endpoint is read from the Airflow connection on first use, in the process that uses it (the
task process presents the token; the scheduler's probe needs only the address).
"""
from __future__ import annotations

from collections.abc import Callable

from ...scheduling.hosts import Host
from .connect import ServerStatus, SessionServerError
from .connections import ConnectEndpoint, connect_endpoint
from .reachability import DEFAULT_HANDSHAKE_TIMEOUT_S, answers, speaks_http2


class ExternalServer:
    """The Spark Connect server of `host`, named by its Airflow connection `host.conn_id`."""

    stopped_idle = False  # nobody here stops it
    stop_reason = ""  # (so never for a reason either)

    def __init__(self, host: Host, resolve: Callable[[str, str], ConnectEndpoint] = connect_endpoint) -> None:
        if host.conn_id is None:
            raise ValueError(f"host {host.name!r} names no conn_id")
        self.host = host
        self.conn_id = host.conn_id
        self._resolve = resolve
        self._endpoint: ConnectEndpoint | None = None

    @property
    def endpoint(self) -> ConnectEndpoint:
        """The connection's endpoint (read once; `SparkConnectionError` when the connection is bad)."""
        if self._endpoint is None:
            self._endpoint = self._resolve(self.conn_id, self.host.name)
        return self._endpoint

    @property
    def url(self) -> str:
        return self.endpoint.url

    @property
    def token(self) -> str | None:
        return self.endpoint.token

    def exit_cause(self) -> str | None:
        return None  # not a process of this machine: nothing here can tell why it went

    def reachable(self) -> bool:
        """True when the server's address accepts a TCP connection."""
        return answers(*self.endpoint.address)

    def serving(self, timeout: float = DEFAULT_HANDSHAKE_TIMEOUT_S) -> bool:
        """True when it answers an HTTP/2 handshake (without TLS) or accepts a connection (with TLS, whose
        handshake comes first) within `timeout` seconds."""
        host, port = self.endpoint.address
        return answers(host, port, timeout) if self.endpoint.use_ssl else speaks_http2(host, port, timeout)

    def status(self) -> ServerStatus:
        if self.reachable():
            return ServerStatus(self.host.name, "up", self.url, cause=f"run by someone else (conn {self.conn_id})")
        return ServerStatus(self.host.name, "down", self.url, cause=(
            f"nothing answers at the address of Airflow connection {self.conn_id!r}; it is not regionflow's to "
            f"start: start it where it runs, or fix the connection"))

    def checked_status(self) -> ServerStatus:
        current = self.status()
        if current.up and not self.serving():
            return ServerStatus(self.host.name, "silent", self.url, cause=(
                f"its address (Airflow connection {self.conn_id!r}) accepts connections but serves no Spark "
                f"Connect"))
        return current

    def start(self, timeout: float = 0.0) -> ServerStatus:
        """Not started here: the status when it serves, else a `SessionServerError` saying whose it is."""
        current = self.checked_status()
        if not current.up:
            raise SessionServerError(f"host {self.host.name}: the Spark Connect server at {self.url} "
                                     f"{current.cause}")
        return current

    def stop(self, grace_seconds: float = 0.0) -> bool:
        return False  # someone else's

    def stop_idle(self, grace_seconds: float = 0.0, why: str = "") -> bool:
        return False


__all__ = ["ExternalServer"]
