"""Whether something answers on a TCP address: the probes behind "is this host's server up".

Three probes, one module:

- `answers`: the port accepts a TCP connection. Enough for "is this port taken". A process that is
  stopped (SIGSTOP) or hung but still listens counts as up here, since the kernel accepts connections
  for it.
- `speaks_http2`: a server process really serves HTTP/2 on the port, which is what a Spark Connect
  (gRPC) client needs. The probe sends the HTTP/2 client preface and waits for the server's SETTINGS
  frame, which every HTTP/2 server sends first; only the server process itself can send it, so a
  stopped or hung Connect server is silent here while `answers` still says yes.
- `speaks_spark_rpc`: a standalone master (or any Spark RPC endpoint environment) really serves its
  RPC port. The probe sends one stream request, in Spark's transport framing, for a file nobody
  serves; a live process answers it with a stream failure ("Stream ... was not found."), quietly (no
  error in its log), and a stopped or hung one does not answer at all. A stream request rather than
  an RPC request because a master that authenticates (``spark.authenticate``, as regionflow's
  standalone clusters do) answers both without the secret, the stream request quietly, but takes any
  RPC request for a failed authentication handshake and logs an error with a stack trace for each.
"""
from __future__ import annotations

import socket
import struct
import time
from collections.abc import Iterable

DEFAULT_CONNECT_TIMEOUT_S = 1.0
DEFAULT_HANDSHAKE_TIMEOUT_S = 2.0
# one probe's deadline before an attempt is called lost on its server's or master's silence. A live server
# answers in milliseconds, but a busy one (a JVM in a garbage-collection pause) gets time, and so does a slow,
# busy link: a probe crosses the link's queue twice (connect, request) behind the bulk data in it. Measured on a
# 96 kbit/s link carrying 6 bulk transfers (a token bucket with a 1 s queue, tests/airflow/test_multi_machine.py):
# answers took 0.7-2.3 s; with a 2 s deadline 7 of 30 probes counted as answers, and 30 s of "silence" ended
# live attempts as lost hosts; with 5 s all 30 did
LOSS_HANDSHAKE_TIMEOUT_S = 5.0

# RFC 9113, section 3.4: the client connection preface, then an empty SETTINGS frame
_CLIENT_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
# GOAWAY (type 7) on stream 0: last stream 0, NO_ERROR; sent before closing, as a polite client does
_GOAWAY = b"\x00\x00\x08\x07\x00\x00\x00\x00\x00" + b"\x00" * 8
_FRAME_HEADER = 9
_SETTINGS = 0x4

# Spark's RPC transport (its network-common module): a frame is its length (8 bytes, big-endian,
# counting itself), the message type (1 byte) and the message. A StreamRequest (type 6) is the stream
# id (a 4-byte length and UTF-8); the RPC environment's file server reads ``/files/<name>`` as a file
# added to it, which the master has none of, and answers a StreamFailure (type 8: the stream id, then
# the error text).
_STREAM_REQUEST, _STREAM_RESPONSE, _STREAM_FAILURE = 6, 7, 8
_PROBE_STREAM = "/files/regionflow-liveness-probe"
_MAX_REPLY_BYTES = 1 << 20  # the failure's text is one line


def answers(host: str, port: int, timeout: float = DEFAULT_CONNECT_TIMEOUT_S) -> bool:
    """True when a TCP connection to (`host`, `port`) is accepted within `timeout` seconds."""
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            return True
    except (OSError, ValueError, OverflowError):
        return False


def any_speaks_spark_rpc(addresses: Iterable[tuple[str, int]], timeout: float = DEFAULT_HANDSHAKE_TIMEOUT_S) -> bool:
    """True when one of `addresses` (host, port), the masters of a ``spark://`` URL, answers a Spark RPC
    request (`speaks_spark_rpc`); tried in order, each for at most `timeout` s."""
    return any(speaks_spark_rpc(host, port, timeout) for host, port in addresses)


def speaks_spark_rpc(host: str, port: int, timeout: float = DEFAULT_HANDSHAKE_TIMEOUT_S) -> bool:
    """True when the process on (`host`, `port`) answers a Spark transport request (a stream request)
    with a stream response or failure frame within `timeout` seconds in all (connecting included);
    False when nothing listens, the process does not answer (stopped, hung) or it speaks another
    protocol."""
    deadline = time.monotonic() + timeout
    try:
        with socket.create_connection((host, int(port)), timeout=timeout) as connection:
            connection.sendall(_spark_probe_request())
            header = _read_exactly(connection, _FRAME_HEADER, deadline)
            if header is None or header[8] not in (_STREAM_RESPONSE, _STREAM_FAILURE):
                return False
            # read the rest of the reply before closing: a socket closed with unread data resets the
            # connection, and the server logs a warning with a stack trace for each reset
            rest = struct.unpack(">q", header[:8])[0] - _FRAME_HEADER
            if 0 < rest <= _MAX_REPLY_BYTES:
                _read_exactly(connection, rest, deadline)
            return True
    except (OSError, ValueError, OverflowError, struct.error):
        return False


def _spark_probe_request() -> bytes:
    """One StreamRequest frame for `_PROBE_STREAM` (see the framing note above)."""
    stream = _PROBE_STREAM.encode("ascii")
    message = struct.pack(">Bi", _STREAM_REQUEST, len(stream)) + stream
    return struct.pack(">q", 8 + len(message)) + message


def _read_exactly(connection: socket.socket, size: int, deadline: float) -> bytes | None:
    """`size` bytes from `connection` before `deadline` (monotonic), or None (timed out, or closed first)."""
    data = b""
    while len(data) < size:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        connection.settimeout(left)
        chunk = connection.recv(size - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def connect_address(url: str) -> tuple[str, int]:
    """(host, port) of a Spark Connect URL ``sc://host:port[/;param=value...]``; ValueError naming it."""
    host, _, rest = url.removeprefix("sc://").partition(":")
    port = rest.split("/")[0].split(";")[0]
    if not url.startswith("sc://") or not host or not port.isdigit():
        raise ValueError(f"not a Spark Connect URL of the form sc://host:port: {url!r}")
    return host, int(port)


def connect_server_serves(url: str, timeout: float = DEFAULT_HANDSHAKE_TIMEOUT_S) -> bool:
    """True when the Spark Connect server of `url` (``sc://host:port``) answers an HTTP/2 handshake
    within `timeout` seconds (see `speaks_http2`); False for a URL that names no host and port."""
    try:
        host, port = connect_address(url)
    except ValueError:
        return False
    return speaks_http2(host, port, timeout)


def speaks_http2(host: str, port: int, timeout: float = DEFAULT_HANDSHAKE_TIMEOUT_S) -> bool:
    """True when the server on (`host`, `port`) answers the HTTP/2 client preface with its SETTINGS
    frame within `timeout` seconds in all (connecting included); False when nothing listens, the
    process does not answer (stopped, hung) or it speaks another protocol."""
    deadline = time.monotonic() + timeout
    try:
        with socket.create_connection((host, int(port)), timeout=timeout) as connection:
            connection.sendall(_CLIENT_PREFACE)
            header = _read_exactly(connection, _FRAME_HEADER, deadline)
            if header is None:
                return False  # silent, or closed on us: not an HTTP/2 server
            try:
                connection.sendall(_GOAWAY)
            except OSError:
                pass  # it answered; how it takes the goodbye does not matter
            return header[3] == _SETTINGS
    except (OSError, ValueError, OverflowError):
        return False


__all__ = ["DEFAULT_CONNECT_TIMEOUT_S", "DEFAULT_HANDSHAKE_TIMEOUT_S", "LOSS_HANDSHAKE_TIMEOUT_S", "answers",
           "any_speaks_spark_rpc", "connect_address", "connect_server_serves", "speaks_http2", "speaks_spark_rpc"]
