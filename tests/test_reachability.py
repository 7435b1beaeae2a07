"""The two liveness probes of `regionflow.spark.servers.reachability` against real listeners.

`answers` (a TCP connection is accepted) and `speaks_http2` (the process answers an HTTP/2 handshake,
what a Spark Connect client needs): nothing listening, a listener that never reads, a server of another
protocol, and a real gRPC server (grpcio's, what Spark Connect is) running, stopped with SIGSTOP as a hung
server would be, and continued. The real Spark Connect server is checked the same way in
tests/spark/test_connect.py.
"""
from __future__ import annotations

import socket
import threading
import time

from grpc_standin import GrpcServer

from regionflow.spark.servers.reachability import answers, speaks_http2
from regionflow.spark.servers.session_servers import free_port

LOOPBACK = "127.0.0.1"
TIMEOUT_S = 0.5


def test_nothing_listening_neither_answers_nor_speaks():
    port = free_port()
    assert not answers(LOOPBACK, port) and not speaks_http2(LOOPBACK, port)
    assert not answers(LOOPBACK, 0) and not speaks_http2(LOOPBACK, "not-a-port")  # type: ignore[arg-type]


def test_a_listener_that_never_reads_answers_but_is_silent_within_the_timeout():
    with socket.socket() as listener:
        listener.bind((LOOPBACK, 0))
        listener.listen()  # the kernel accepts for it; nobody ever reads or writes
        port = listener.getsockname()[1]
        assert answers(LOOPBACK, port)
        began = time.monotonic()
        assert not speaks_http2(LOOPBACK, port, timeout=TIMEOUT_S)
        assert time.monotonic() - began < TIMEOUT_S + 5  # bounded by the timeout (and a slow machine)


def test_a_server_of_another_protocol_does_not_speak_http2():
    with socket.socket() as listener:
        listener.bind((LOOPBACK, 0))
        listener.listen()
        port = listener.getsockname()[1]

        def reply_like_http1() -> None:
            connection, _ = listener.accept()
            with connection:
                connection.recv(1024)
                connection.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")

        server = threading.Thread(target=reply_like_http1, daemon=True)
        server.start()
        assert not speaks_http2(LOOPBACK, port)
        server.join(timeout=10)


def test_a_grpc_server_speaks_until_stopped_while_its_port_still_answers():
    with GrpcServer() as server:
        assert answers(LOOPBACK, server.port) and speaks_http2(LOOPBACK, server.port)
        server.pause()
        try:
            assert answers(LOOPBACK, server.port)  # the kernel accepts for the stopped process
            assert not speaks_http2(LOOPBACK, server.port, timeout=TIMEOUT_S)
        finally:
            server.resume()
        assert speaks_http2(LOOPBACK, server.port)
    assert not answers(LOOPBACK, server.port)


def test_connect_urls_are_parsed_and_a_bad_one_is_named():
    from regionflow.spark.servers.reachability import connect_address, connect_server_serves

    assert connect_address("sc://127.0.0.1:15002") == ("127.0.0.1", 15002)
    assert connect_address("sc://h:15002/;session_id=abc") == ("h", 15002)
    for bad in ("http://h:1", "sc://h", "sc://:1", "sc://h:port"):
        try:
            connect_address(bad)
        except ValueError as error:
            assert repr(bad) in str(error)
        else:
            raise AssertionError(f"{bad!r} was taken for a Spark Connect URL")
    assert not connect_server_serves("sc://h")


def test_the_host_watch_kills_an_attempt_whose_server_hangs_and_leaves_one_on_a_live_server_alone():
    """An attempt on the session backend waits forever for a hung server: the `HostWatcher` kills it
    once the server has not answered a handshake for `timeout` s, and says which server."""
    from speculation_fakes import FakeResult, FakeSubmission

    from regionflow.spark.launch.watch import HostWatcher

    def plays_until_killed(submission: FakeSubmission) -> FakeResult:
        submission.killed.wait(60)
        return FakeResult(returncode=0 if not submission.killed.is_set() else 1, killed=submission.killed.is_set())

    with GrpcServer() as server:
        url = f"sc://{LOOPBACK}:{server.port}"
        live = FakeSubmission(plays_until_killed, server_url=url)
        with HostWatcher(None, live, timeout=1.0, interval=0.2, server_url=url) as watcher:
            time.sleep(2.0)
            assert not live.killed.is_set() and watcher.lost is None
            live.killed.set()  # ends the play

        hung = FakeSubmission(plays_until_killed, server_url=url)
        server.pause()
        try:
            began = time.monotonic()
            with HostWatcher(None, hung, timeout=1.0, interval=0.2, server_url=url) as watcher:
                result = hung.run()
            waited = time.monotonic() - began
        finally:
            server.resume()
    assert result.killed and waited < 30
    assert watcher.lost is not None and watcher.lost.startswith(
        f"host lost: its Spark Connect server at {url} did not answer for 1 s; the attempt was killed")


# ---- the standalone master's probe: one Spark stream request ------------------------------------


def test_the_spark_rpc_probe_is_answered_only_by_a_process_that_replies_with_a_stream_frame():
    """Nothing listening, a listener that never reads (a stopped master's port), a server of another
    protocol: silent. A stand-in answering with a stream failure frame, as a live master does: answers.
    (A real master, authenticating, running and stopped: tests/spark/test_standalone.py.)"""
    import struct

    from spark_rpc_standin import SparkRpcStandin

    from regionflow.spark.servers.reachability import any_speaks_spark_rpc, speaks_spark_rpc

    assert not speaks_spark_rpc(LOOPBACK, free_port(), timeout=TIMEOUT_S)
    with socket.socket() as listener:
        listener.bind((LOOPBACK, 0))
        listener.listen()
        began = time.monotonic()
        assert not speaks_spark_rpc(LOOPBACK, listener.getsockname()[1], timeout=TIMEOUT_S)
        assert time.monotonic() - began < TIMEOUT_S + 5
    with GrpcServer() as server:  # speaks HTTP/2: its reply to the frame is no RPC frame
        assert not speaks_spark_rpc(LOOPBACK, server.port, timeout=TIMEOUT_S)
    with SparkRpcStandin() as master:
        assert speaks_spark_rpc(LOOPBACK, master.port)
        assert any_speaks_spark_rpc([(LOOPBACK, free_port()), (LOOPBACK, master.port)])
        assert len(master.requests) == 2  # one per probe that reached it
        frame = master.requests[0]
    # the frame as Spark's transport decoder reads it: its length, StreamRequest (6), the stream id's size
    length, kind, id_size = struct.unpack(">qBi", frame[:13])
    assert (length, kind, id_size) == (len(frame), 6, len(frame) - 13)
    assert frame[13:] == b"/files/regionflow-liveness-probe"


def test_a_master_answering_late_over_a_slow_busy_link_still_counts_as_answering():
    """On a slow link carrying bulk data a probe's answer took up to 2.3 s (96 kbit/s, six transfers): the
    host watch's probe waits `MASTER_PROBE_TIMEOUT_S` (5 s) for it, so that link is not taken for a lost host
    (with the 2 s it had, 23 of 30 probes failed there and live attempts were killed as host lost)."""
    from spark_rpc_standin import SparkRpcStandin

    from regionflow.spark.launch.watch import MASTER_PROBE_TIMEOUT_S
    from regionflow.spark.servers.reachability import any_speaks_spark_rpc

    with SparkRpcStandin(reply_delay=2.5) as master:
        assert not any_speaks_spark_rpc([(LOOPBACK, master.port)], 2.0)
        assert any_speaks_spark_rpc([(LOOPBACK, master.port)], MASTER_PROBE_TIMEOUT_S)
