"""A stand-in for a standalone Spark master's RPC port, for tests of the master probe that need no JVM.

It answers every frame it reads with a stream failure frame, as a live master answers a stream request
for a file it does not serve (Spark's transport framing: an 8-byte length counting itself, a 1-byte
message type, then the message; a StreamFailure is the stream id and the error, each a 4-byte length
and UTF-8). That the real master answers the probe so is checked against a real
one in tests/spark/test_standalone.py.
"""
from __future__ import annotations

import socket
import struct
import threading
import time

STREAM_FAILURE = 8


class SparkRpcStandin:
    """A listener on 127.0.0.1 (`port`) answering each request frame with a stream failure; a context manager."""

    def __init__(self, reply_delay: float = 0.0) -> None:
        """`reply_delay`: seconds between reading a request and answering it (a slow link's queue)."""
        self.reply_delay = reply_delay
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen()
        self.port = self.listener.getsockname()[1]
        self.requests: list[bytes] = []  # the frames read, in order
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return  # closed
            with connection:
                frame = _read_frame(connection)
                if frame is None:
                    continue
                self.requests.append(frame)
                stream_id = frame[13:13 + struct.unpack(">i", frame[9:13])[0]]
                error = b"Stream '" + stream_id + b"' was not found."
                message = (bytes([STREAM_FAILURE]) + struct.pack(">i", len(stream_id)) + stream_id
                           + struct.pack(">i", len(error)) + error)
                time.sleep(self.reply_delay)
                connection.sendall(struct.pack(">q", 8 + len(message)) + message)
                connection.recv(1)  # until the client closes

    def close(self) -> None:
        """Stop listening: the port refuses connections from now on."""
        try:
            self.listener.shutdown(socket.SHUT_RDWR)  # wakes the accept() in the serving thread
        except OSError:
            pass
        self.listener.close()
        self._thread.join(timeout=10)

    def __enter__(self) -> SparkRpcStandin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _read_frame(connection: socket.socket) -> bytes | None:
    data = b""
    while len(data) < 8 or len(data) < struct.unpack(">q", data[:8])[0]:
        chunk = connection.recv(65536)
        if not chunk:
            return None
        data += chunk
    return data
