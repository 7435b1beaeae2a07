"""A real gRPC server standing in for a Spark Connect server in tests that need no Spark.

Spark Connect is a gRPC service over HTTP/2; what regionflow's probes check of it (the port accepts
connections, the process answers an HTTP/2 handshake) holds of any gRPC server, so grpcio's own
server, the one pyspark's Connect client is built on, stands in. `GrpcServer` runs it in a child
process (its own process group), so a test can stop (SIGSTOP) and continue it like a hung server.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys

from stopping import pause_group, resume_group

_SERVE = """
import sys
from concurrent import futures
import grpc
server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
port = server.add_insecure_port("127.0.0.1:" + sys.argv[1])
server.start()
print(port, flush=True)
server.wait_for_termination()
"""


class GrpcServer:
    """A gRPC server on 127.0.0.1 in a child process: `port`, `pause()`, `resume()`, `stop()`."""

    def __init__(self, port: int = 0) -> None:
        self.process = subprocess.Popen([sys.executable, "-c", _SERVE, str(port)], stdout=subprocess.PIPE,
                                        stdin=subprocess.DEVNULL, start_new_session=True, text=True)
        assert self.process.stdout is not None
        line = self.process.stdout.readline().strip()
        if not line.isdigit() or int(line) == 0:
            self.stop()
            raise RuntimeError(f"the stand-in gRPC server did not start on port {port} (printed {line!r})")
        self.port = int(line)

    def pause(self) -> None:
        """Stop the server's process (SIGSTOP, and wait until it took): the kernel still accepts
        connections on its port."""
        pause_group(self.process.pid)

    def resume(self) -> None:
        resume_group(self.process.pid)

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=30)

    def __enter__(self) -> GrpcServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

