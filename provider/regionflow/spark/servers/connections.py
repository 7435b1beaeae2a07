"""A Spark Connect server named by an Airflow connection: a host's ``conn_id`` (``[regionflow] hosts``).

The connection is the Spark provider's ``spark_connect`` type (host, port, login as the user id, password as
the token, ``use_ssl`` in its extra) and is read through the provider's own `SparkConnectHook`, so the URL is
the one every other Airflow task on that connection uses, and its secrets come from wherever Airflow keeps
connections (the metadata database, ``AIRFLOW_CONN_*`` variables, a secrets backend), never from regionflow's
options. The token is split off the hook's URL at once: regionflow's URLs (status lines, progress lines,
errors) never carry it; `remote_session` presents it on every call.
"""
from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote

from ...core.errors import RegionflowError
from .reachability import connect_address

CONN_TYPE = "spark_connect"
TOKEN_PARAMETER = "token"
DEFAULT_PORT = 15002  # Spark Connect's (pyspark's ChannelBuilder.default_port())


class SparkConnectionError(RegionflowError, ValueError):
    """A host's Airflow connection cannot name a Spark Connect server (missing, another type, a bad URL)."""


@dataclass(frozen=True)
class ConnectEndpoint:
    """A Spark Connect server as its connection names it: `url` without the token (``sc://host:port`` and
    ``/;use_ssl=...;user_id=...``), the `token` apart."""

    conn_id: str
    url: str
    token: str | None = None
    use_ssl: bool = False

    @property
    def address(self) -> tuple[str, int]:
        return connect_address(self.url)

    def __repr__(self) -> str:  # never the token
        return f"ConnectEndpoint(conn_id={self.conn_id!r}, url={self.url!r}, token={'***' if self.token else None})"


def connect_endpoint(conn_id: str, host: str) -> ConnectEndpoint:
    """The endpoint of host `host`'s connection `conn_id`, through the Spark provider's hook; a
    `SparkConnectionError` naming the host and the connection when it is missing or of another type."""
    from airflow.exceptions import AirflowNotFoundException
    from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook

    hook = SparkConnectHook(conn_id)
    where = f"host {host!r}: Airflow connection {conn_id!r}"
    try:
        connection = hook.get_connection(conn_id)
    except AirflowNotFoundException:
        raise SparkConnectionError(
            f"{where} is not defined; add it (type {CONN_TYPE}: host, port, password as the token), e.g. "
            f"`airflow connections add {conn_id} --conn-type {CONN_TYPE} --conn-host HOST --conn-port PORT`"
        ) from None
    if connection.conn_type != CONN_TYPE:
        raise SparkConnectionError(f"{where} is of type {connection.conn_type!r}, not {CONN_TYPE!r}; a host's "
                                   f"conn_id names a Spark Connect server (a spark connection is the submit "
                                   f"backend's [regionflow] spark_conn_id)")
    if not connection.host:
        raise SparkConnectionError(f"{where} has no host; set the Spark Connect server's host and port")
    try:
        return endpoint_of(conn_id, hook.get_connection_url())
    except ValueError as error:
        raise SparkConnectionError(f"{where}: {error}") from None


def endpoint_of(conn_id: str, url: str) -> ConnectEndpoint:
    """`url` as `SparkConnectHook.get_connection_url` builds it (``sc://host:port/;param=value;...``), its
    token split off; a ValueError naming what is wrong (no port, a path)."""
    base, _, parameters = url.partition("/;")
    base = base.rstrip("/")
    if base.startswith("sc://") and ":" not in base.removeprefix("sc://").split("]")[-1]:
        base = f"{base}:{DEFAULT_PORT}"  # pyspark's default, as a client given this URL would use
    kept, token, use_ssl = [], None, False
    for parameter in filter(None, parameters.split(";")):
        name, _, value = parameter.partition("=")
        if name == TOKEN_PARAMETER:
            token = unquote(value)
            continue
        if name == "use_ssl":
            use_ssl = unquote(value).strip().lower() == "true"
        kept.append(parameter)
    clean = f"{base}/;{';'.join(kept)}" if kept else base
    connect_address(clean)  # host and port, or the ValueError that says what is missing
    return ConnectEndpoint(conn_id, clean, token, use_ssl)


__all__ = ["CONN_TYPE", "ConnectEndpoint", "SparkConnectionError", "connect_endpoint", "endpoint_of"]
