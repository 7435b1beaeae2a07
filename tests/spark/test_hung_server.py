"""An attempt whose Spark Connect server is already hung when it starts ends as host lost.

The attempt's session is real (pyspark's Connect client, the session backend's `SessionSubmission`) and
its server is a real gRPC server (grpcio's, `grpc_standin`) stopped with SIGSTOP before the attempt
starts. `SessionBackend.prepare` lets such an attempt through (its check is TCP, which the kernel answers
for the stopped process). The session's first call then never gets a connection: the server never sends
its HTTP/2 SETTINGS, so the channel gives up after gRPC's connect timeout and the session's retries. The
attempt's `HostWatcher` meanwhile finds the server silent to the HTTP/2 handshake and kills the attempt,
so it ends as killed with "host lost", within a bound. (A server that hangs mid-query, on a connection
already made, never lets the client go: that case, and the kill cutting the connection, is in
test_connect.py against a real Spark Connect server.)
"""
from __future__ import annotations

import threading
import time

import pytest
from grpc_standin import GrpcServer

from regionflow.spark.data.task import UnitTask
from regionflow.spark.launch.session_backend import SessionSubmission
from regionflow.spark.launch.watch import HostWatcher
from regionflow.spark.servers.client_env import no_client_marks

pytestmark = pytest.mark.timeout(300)


def test_an_attempt_whose_server_hangs_before_its_first_call_is_killed_as_host_lost(tmp_path):
    with GrpcServer() as server, no_client_marks():
        url = f"sc://127.0.0.1:{server.port}"
        task = UnitTask(job="regionflow.examples.orders:job", mode="all-blocking", run_id="r1",
                        data_dir=str(tmp_path), unit_key="u0", unit_name="v[0]", regions=[0],
                        attempt_id="try1-silent", host="h1")
        submission = SessionSubmission(task, url, 1, {"spark.sql.shuffle.partitions": "1"})
        ended: list = []
        server.pause()
        try:
            began = time.monotonic()
            with HostWatcher(None, submission, timeout=1.0, interval=0.2, server_url=url) as watcher:
                runner = threading.Thread(target=lambda: ended.append(submission.run()), daemon=True)
                runner.start()
                runner.join(timeout=120)
            waited = time.monotonic() - began
        finally:
            server.resume()
    assert ended, "the attempt still waits for the silent server"
    (result,) = ended
    assert result.killed and not result.ok and waited < 120, result
    assert watcher.lost is not None and watcher.lost.startswith(
        f"host lost: its Spark Connect server at {url} did not answer for 1 s; the attempt was killed")
