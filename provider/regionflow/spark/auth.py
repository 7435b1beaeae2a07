"""Secrets of the Spark processes regionflow starts: the token of a Spark Connect server, and the
client sessions that present it.

Every Connect server regionflow starts (`connect.ConnectServer`) requires a random token
(``secrets.token_urlsafe``), without which any local user who finds its port could run code as the
server's owner. The token lives in a file only its owner can read (``<state dir>/<host>.token``, mode
0600, in the 0700 state dir), written before the server starts, and reaches the server through its
environment (``SPARK_CONNECT_AUTHENTICATE_TOKEN``, which Spark Connect reads when
``spark.connect.authenticate.token`` is not set): never on a command line (a process list shows it),
in a log or in a URL. A client session (`remote_session`) reads it from the file and sends it as a
bearer token on every call.

pyspark sends a token only over TLS, or over gRPC's local credentials when the URL's host is the word
``localhost``; regionflow's servers listen on 127.0.0.1 without TLS, so `remote_session` builds the
channel itself: local credentials (the connection must be over loopback) plus the token, for any
loopback host. The URL never carries the token, so the URLs that status lines, progress lines and
errors show have nothing to redact.
"""
from __future__ import annotations

import os
import secrets
import uuid
from typing import Any

TOKEN_VARIABLE = "SPARK_CONNECT_AUTHENTICATE_TOKEN"
_LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "[::1]", "::1")


def new_secret() -> str:
    """A fresh random secret (256 bits, URL-safe text)."""
    return secrets.token_urlsafe(32)


def write_secret(path: str, secret: str) -> str:
    """Write `secret` to `path`, readable by this user only (0600) from its first byte on, replacing any
    file there in one move; returns `path`."""
    folder, name = os.path.split(path)
    temporary = os.path.join(folder, f".{name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(secret)
        os.chmod(temporary, 0o600)  # whatever the umask
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)
    return path


def read_secret(path: str) -> str | None:
    """The secret in `path`, or None when there is no such file (a server started without one)."""
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read().strip() or None
    except FileNotFoundError:
        return None


def remote_session(url: str, token: str | None = None) -> Any:
    """A new Spark Connect client session to `url` (``sc://host:port[/;param=value...]``, no token in
    it), presenting `token` when one is given. Marks this process as a Connect client like
    ``SparkSession.builder.remote(url).create()`` does (pyspark's functions need the mark)."""
    from pyspark.sql import SparkSession

    if token is None:
        return SparkSession.builder.remote(url).create()
    from pyspark.sql.connect.session import SparkSession as RemoteSparkSession

    os.environ["SPARK_CONNECT_MODE_ENABLED"] = "1"
    return RemoteSparkSession.builder.channelBuilder(_token_channel(url, token)).create()


def _token_channel(url: str, token: str) -> Any:
    """pyspark's channel builder for `url` that sends `token`, over loopback without TLS."""
    import grpc  # type: ignore[import-untyped]  # grpcio ships no hints; its stubs are not installed
    from pyspark.sql.connect.client import DefaultChannelBuilder

    class TokenChannelBuilder(DefaultChannelBuilder):
        def toChannel(self) -> Any:  # noqa: N802 - pyspark's name
            if self.use_ssl or self.host not in _LOOPBACK_HOSTS:
                return super().toChannel()
            credentials = grpc.composite_channel_credentials(
                grpc.local_channel_credentials(), grpc.access_token_call_credentials(self.token))
            return self._secure_channel(self.endpoint, credentials)

    builder = TokenChannelBuilder(url)
    builder.set(DefaultChannelBuilder.PARAM_TOKEN, token)
    return builder


__all__ = ["TOKEN_VARIABLE", "new_secret", "read_secret", "remote_session", "write_secret"]
