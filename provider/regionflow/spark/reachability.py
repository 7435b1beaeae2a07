"""Whether something answers on a TCP address: the probes behind "is this host's server up".

Two levels, one module:

- `answers`: the port accepts a TCP connection. Enough for a standalone master (its RPC protocol is
  Spark's own) and for "is this port taken". A process that is stopped (SIGSTOP) or hung but still
  listens counts as up here, since the kernel accepts connections for it.
- `speaks_http2`: a server process really serves HTTP/2 on the port, which is what a Spark Connect
  (gRPC) client needs. The probe sends the HTTP/2 client preface and waits for the server's SETTINGS
  frame, which every HTTP/2 server sends first; only the server process itself can send it, so a
  stopped or hung Connect server is silent here while `answers` still says yes.
"""
from __future__ import annotations

import socket
import time
from collections.abc import Iterable

DEFAULT_CONNECT_TIMEOUT_S = 1.0
DEFAULT_HANDSHAKE_TIMEOUT_S = 2.0
# before an attempt is called lost on its server's silence: a live server answers in milliseconds, a busy
# one (a JVM in a garbage-collection pause) gets time
LOSS_HANDSHAKE_TIMEOUT_S = 5.0

# RFC 9113, section 3.4: the client connection preface, then an empty SETTINGS frame
_CLIENT_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
# GOAWAY (type 7) on stream 0: last stream 0, NO_ERROR; sent before closing, as a polite client does
_GOAWAY = b"\x00\x00\x08\x07\x00\x00\x00\x00\x00" + b"\x00" * 8
_FRAME_HEADER = 9
_SETTINGS = 0x4


def answers(host: str, port: int, timeout: float = DEFAULT_CONNECT_TIMEOUT_S) -> bool:
    """True when a TCP connection to (`host`, `port`) is accepted within `timeout` seconds."""
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            return True
    except (OSError, ValueError, OverflowError):
        return False


def any_answers(addresses: Iterable[tuple[str, int]], timeout: float = DEFAULT_CONNECT_TIMEOUT_S) -> bool:
    """True when one of `addresses` (host, port) answers; tried in order, each for at most `timeout` s."""
    return any(answers(host, port, timeout) for host, port in addresses)


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
            header = b""
            while len(header) < _FRAME_HEADER:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                connection.settimeout(left)
                chunk = connection.recv(_FRAME_HEADER - len(header))
                if not chunk:
                    return False  # closed on us: not an HTTP/2 server
                header += chunk
            try:
                connection.sendall(_GOAWAY)
            except OSError:
                pass  # it answered; how it takes the goodbye does not matter
            return header[3] == _SETTINGS
    except (OSError, ValueError, OverflowError):
        return False


__all__ = ["DEFAULT_CONNECT_TIMEOUT_S", "DEFAULT_HANDSHAKE_TIMEOUT_S", "LOSS_HANDSHAKE_TIMEOUT_S", "answers",
           "any_answers", "connect_address", "connect_server_serves", "speaks_http2"]
