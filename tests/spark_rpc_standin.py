"""A stand-in for a standalone Spark master's RPC port, for tests of the master probe that need no JVM.

It answers every frame it reads with an RPC failure frame, as a live master answers a request to an
endpoint it does not have (Spark's transport framing: an 8-byte length counting itself, a 1-byte
message type, then the message). That the real master answers the probe so is checked against a real
one in tests/spark/test_standalone.py.
"""
from __future__ import annotations

import socket
import struct
import threading

RPC_FAILURE = 5


class SparkRpcStandin:
    """A listener on 127.0.0.1 (`port`) answering each request frame with an RPC failure; a context manager."""

    def __init__(self) -> None:
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
                request_id = frame[9:17]
                error = b"Could not find the endpoint."
                message = bytes([RPC_FAILURE]) + request_id + struct.pack(">i", len(error)) + error
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
