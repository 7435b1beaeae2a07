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

A standalone cluster regionflow starts (`standalone.StandaloneCluster`) runs with ``spark.authenticate``
and a random secret per start (`authenticate_properties`). Its master and workers read it from the
``spark-defaults.conf`` of their own conf dir; every application on its master needs it in its Spark
conf (on a ``spark://`` master Spark's driver takes the secret from ``spark.authenticate.secret`` only,
not from a file or the environment), so each one loads a properties file (``--properties-file``)
holding it. Both files are 0600 (`write_properties`). A host names the application's file in its
``properties_file`` field; a submission or Connect server of that host passes it after
`properties_file_problem` found it private to this user. The workers hand the secret to executors
through their environment; it is never on a command line, and Spark's logs redact it (its
``spark.redaction.regex`` matches ``secret``).
"""
from __future__ import annotations

import os
import secrets
import stat
import uuid
from collections.abc import Mapping
from typing import Any

from ...core.errors import RegionflowError

TOKEN_VARIABLE = "SPARK_CONNECT_AUTHENTICATE_TOKEN"
_LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "[::1]", "::1")


class SecretFileError(RegionflowError, ValueError):
    """A file that holds a secret cannot be used: missing, not a file, another user's, open to others."""


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


def authenticate_properties(secret: str) -> dict[str, str]:
    """The Spark properties that make a standalone master, its workers and an application of it
    authenticate with `secret`."""
    return {"spark.authenticate": "true", "spark.authenticate.secret": secret}


def write_properties(path: str, properties: Mapping[str, str]) -> str:
    """`properties` as a Java properties file (``key=value`` lines) at `path`, 0600 from its first byte
    (`write_secret`); returns `path`."""
    for key, value in properties.items():
        if any(c in f"{key}{value}" for c in "\n\r\\") or not key or any(c in key for c in "=: "):
            raise ValueError(f"Spark property {key!r} cannot be written as a plain properties line")
    return write_secret(path, "".join(f"{key}={value}\n" for key, value in properties.items()))


def properties_file_problem(path: str) -> str | None:
    """What is wrong with `path` as a properties file holding a secret (missing, not a file, not this
    user's, readable or writable by others), with the fix; None when it is fine."""
    try:
        info = os.stat(path)
    except OSError as error:
        return f"cannot be read ({error.strerror}); start the cluster that writes it, or fix the path"
    if not stat.S_ISREG(info.st_mode):
        return "is not a file; name the properties file itself"
    if info.st_uid != os.getuid():
        return f"belongs to uid {info.st_uid}, not to this user (uid {os.getuid()}); use a file of your own"
    if info.st_mode & 0o077:
        return f"is open to other users (mode {stat.S_IMODE(info.st_mode):04o}); chmod 600 it"
    return None


def checked_properties_file(path: str, master: str) -> str:
    """`path`, a host's properties file for applications on `master`, once `properties_file_problem`
    finds nothing wrong with it; else a `SecretFileError` saying what and the fix."""
    problem = properties_file_problem(path)
    if problem is not None:
        raise SecretFileError(f"properties_file {path!r} of the host on {master} {problem}")
    return path


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


__all__ = ["TOKEN_VARIABLE", "SecretFileError", "authenticate_properties", "checked_properties_file", "new_secret",
           "properties_file_problem", "read_secret", "remote_session", "write_properties", "write_secret"]
