"""A stand-in HTTP server on 127.0.0.1 for tests of regionflow's HTTP clients (the REST client, the
readiness probes): `serving(handler)` runs a `BaseHTTPRequestHandler` class in threads and yields the
server's base URL. A connection the client drops (its timeout ran out, or it closed a keep-alive
connection) is no news there, so the server prints no traceback for it."""
from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        pass


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """Serve `handler` on a free port of 127.0.0.1 until the block ends; yields ``http://127.0.0.1:<port>``."""
    server = QuietServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
