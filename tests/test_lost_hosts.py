"""Lost hosts are probed while blocklisted for every run: lifted when they answer, extended while silent.

`LostHostWatch` runs here against a real SQLite store with a recording probe double and a fake clock;
`SparkHostProbe` against a real gRPC server standing in for a Spark Connect server (it must answer an
HTTP/2 handshake, so a stopped one is silent) and a TCP listener standing in for a standalone master
(its port must accept a connection); the executor's `BlocklistMirror` against a real `SlotPool`.
"""
from __future__ import annotations

import logging
import socket
import time

import pytest
from clock_doubles import FakeClock
from grpc_standin import GrpcServer
from spark_rpc_standin import SparkRpcStandin

from regionflow.executors.lost_hosts import STILL_SILENT, LostHostWatch, Verdict
from regionflow.executors.recovery import BlocklistMirror
from regionflow.scheduling.blocklist import EVERY_JOB
from regionflow.scheduling.hosts import Cluster
from regionflow.scheduling.pool import Bulk, SlotPool
from regionflow.spark.servers.health import SparkHostProbe
from regionflow.spark.servers.session_servers import SessionServers, free_port
from regionflow.store import RegionflowStore

LOG = logging.getLogger("test_lost_hosts")
INTERVAL_S = 10.0
EXPIRY_S = 60.0


class RecordingProbe:
    """Answers from a table (a host missing from it raises); records every host it was asked about."""

    def __init__(self, verdicts: dict[str, bool | None]) -> None:
        self.verdicts = verdicts
        self.asked: list[str] = []
        self.while_probing = None  # called with the host before answering (a concurrent write, say)

    def answers(self, host: str) -> bool | None:
        self.asked.append(host)
        if self.while_probing is not None:
            self.while_probing(host)
        return self.verdicts[host]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def store(tmp_path, clock) -> RegionflowStore:
    return RegionflowStore(f"sqlite:///{tmp_path}/regionflow.db", clock=clock)


def watch(store: RegionflowStore, probe: RecordingProbe, clock: FakeClock) -> LostHostWatch:
    return LostHostWatch(store, probe, EXPIRY_S, LOG, interval_s=INTERVAL_S, clock=clock)


def entries(store: RegionflowStore, clock: FakeClock) -> dict[tuple[str, str], tuple[float, str]]:
    return {(b.job_id, b.host): (b.expires_at, b.reason) for b in store.active_blocks(clock.now)}


def test_a_lost_host_that_answers_is_lifted_and_one_still_silent_is_extended_before_its_entry_ends(store, clock):
    store.block(EVERY_JOB, "back", clock.now + 50, "host lost: server down")
    store.block(EVERY_JOB, "down", clock.now + 15, "host lost: server down")  # ends before the next probe but one
    store.block(EVERY_JOB, "down-long", clock.now + 50, "host lost: master silent")
    store.block(EVERY_JOB, "local", clock.now + 15, "host lost: ?")
    store.block("run-1", "back", clock.now + 50, "slow attempt")  # a run's own entry: not a lost host
    probe = RecordingProbe({"back": True, "down": False, "down-long": False, "local": None})

    verdicts = {v.host: v for v in watch(store, probe, clock).tick()}

    assert sorted(probe.asked) == ["back", "down", "down-long", "local"]  # each lost host once, nothing else
    assert {host: v.verdict for host, v in verdicts.items()} == {
        "back": Verdict.LIFTED, "down": Verdict.EXTENDED, "down-long": Verdict.SILENT, "local": Verdict.UNKNOWN}
    now = entries(store, clock)
    assert (EVERY_JOB, "back") not in now and now[("run-1", "back")][0] == clock.now + 50
    assert now[(EVERY_JOB, "down")][0] == clock.now + EXPIRY_S == verdicts["down"].expires_at
    assert now[(EVERY_JOB, "down")][1].startswith("host lost: server down" + STILL_SILENT)
    assert now[(EVERY_JOB, "down-long")] == (clock.now + 50, "host lost: master silent")
    assert now[(EVERY_JOB, "local")] == (clock.now + 15, "host lost: ?")


def test_an_entry_extended_again_and_again_keeps_one_reason(store, clock):
    store.block(EVERY_JOB, "down", clock.now + 5, "host lost: server down")
    probe = RecordingProbe({"down": False})
    probes = watch(store, probe, clock)
    for _ in range(3):
        assert [v.verdict for v in probes.tick()] == [Verdict.EXTENDED]
        clock.now += EXPIRY_S - 5  # the next probe comes when the extended entry is about to end
    (entry,) = store.active_blocks(clock.now)
    assert entry.reason.count(STILL_SILENT) == 1 and entry.reason.startswith("host lost: server down")
    assert entry.expires_at == clock.now - (EXPIRY_S - 5) + EXPIRY_S


def test_a_host_lost_again_while_it_was_probed_stays_blocked(store, clock):
    store.block(EVERY_JOB, "flaky", clock.now + 50, "host lost: server down")
    probe = RecordingProbe({"flaky": True})
    # between the store read and the lift, an attempt loses the host again and extends its entry
    probe.while_probing = lambda host: store.block(EVERY_JOB, host, clock.now + 90, "host lost: server down again")

    assert [v.verdict for v in watch(store, probe, clock).tick()] == [Verdict.SILENT]
    assert entries(store, clock)[(EVERY_JOB, "flaky")] == (clock.now + 90, "host lost: server down again")


def test_a_probe_that_fails_tells_nothing_and_the_next_host_is_still_probed(store, clock):
    store.block(EVERY_JOB, "odd", clock.now + 5, "host lost: ?")
    store.block(EVERY_JOB, "back", clock.now + 50, "host lost: server down")
    probe = RecordingProbe({"back": True})  # "odd" is not in the table: its probe raises KeyError

    verdicts = {v.host: v.verdict for v in watch(store, probe, clock).tick()}

    assert verdicts == {"odd": Verdict.UNKNOWN, "back": Verdict.LIFTED}
    assert list(entries(store, clock)) == [(EVERY_JOB, "odd")]


def test_probes_need_a_positive_interval_and_expiry(store, clock):
    with pytest.raises(ValueError, match="interval_s > 0"):
        LostHostWatch(store, RecordingProbe({}), EXPIRY_S, LOG, interval_s=0)


# ------------------------------------------------------------------------------- what is probed


def listening(port: int = 0) -> socket.socket:
    listener = socket.socket()
    listener.bind(("127.0.0.1", port))
    listener.listen()
    return listener


def test_the_submit_backend_probes_a_hosts_standalone_master_and_cannot_tell_about_local_hosts():
    master = SparkRpcStandin()
    cluster = Cluster.parse(f"a:slots=1,master=spark://127.0.0.1:{master.port};b:slots=1")
    probe = SparkHostProbe(cluster, servers=None)
    with master:
        assert probe.answers("a") is True
    assert probe.answers("a") is False  # the master is gone
    with listening(master.port):
        assert probe.answers("a") is False  # something holds the port but answers no RPC request
    assert probe.answers("b") is None  # local[k]: nothing to probe
    assert probe.answers("no-such-host") is None


def test_the_session_backend_probes_the_hosts_spark_connect_server(tmp_path):
    cluster = Cluster.parse("a:slots=1;b:slots=1")
    servers = SessionServers(cluster, str(tmp_path), base_port=None)
    probe = SparkHostProbe(cluster, servers)
    assert probe.answers("a") is False  # nothing listens on a's port
    with listening(servers.server("a").port):
        assert probe.answers("a") is False  # something holds the port but serves nothing
    with GrpcServer(servers.server("a").port) as server:
        assert probe.answers("a") is True
        server.pause()  # a hung server: its port still accepts, it answers nothing
        try:
            assert probe.answers("a") is False
        finally:
            server.resume()
        assert probe.answers("a") is True
    # a server stopped for being idle that was lost did not start again: the probe cannot tell
    with open(servers.server("b").idle_mark_path, "w", encoding="utf-8"):
        pass
    assert probe.answers("b") is None


def test_a_session_host_whose_server_was_stopped_for_its_lost_master_is_back_when_the_master_answers(tmp_path):
    """When a machine is lost its host's Connect server is stopped (its application would never get an
    executor from that master again) and the next attempt starts it anew; so once the master answers again the
    host is usable, and the probe says so instead of leaving the entry to its whole expiry."""
    from regionflow.spark.servers.connect import MASTER_LOST

    master = SparkRpcStandin()
    cluster = Cluster.parse(f"a:slots=1,master=spark://127.0.0.1:{master.port};b:slots=1")
    servers = SessionServers(cluster, str(tmp_path), base_port=free_port())
    probe = SparkHostProbe(cluster, servers)
    servers.server("a").stop_idle(why=MASTER_LOST)
    servers.server("b").stop_idle(why=MASTER_LOST)  # local[k]: no master to ask
    with master:
        assert probe.answers("a") is True
        servers.server("a").stop_idle()  # stopped for being idle: a host lost with it did not start
        assert probe.answers("a") is None
        servers.server("a").stop_idle(why=MASTER_LOST)
        assert probe.answers("a") is True
    assert probe.answers("a") is False  # the master is silent again: still lost
    assert probe.answers("b") is None


def test_a_session_host_with_a_standalone_master_answers_only_when_both_do(tmp_path):
    master = SparkRpcStandin()
    cluster = Cluster.parse(f"a:slots=1,master=spark://127.0.0.1:{master.port}")
    servers = SessionServers(cluster, str(tmp_path), base_port=free_port())
    probe = SparkHostProbe(cluster, servers)
    with GrpcServer(servers.server("a").port):
        with master:
            assert probe.answers("a") is True
        assert probe.answers("a") is False


# ------------------------------------------------------------------------------- the pool follows the store


def test_the_mirror_lifts_from_the_pool_an_entry_the_store_lifted_and_starts_what_waited(tmp_path):
    store = RegionflowStore(f"sqlite:///{tmp_path}/regionflow.db")
    pool = SlotPool(Cluster.parse("a:slots=1;b:slots=1").hosts)
    started: list[str] = []
    mirror = BlocklistMirror(store, pool, LOG, start=lambda grants: started.extend(g.bulk_id for g in grants))
    (profile,) = {host.slot_profile for host in pool.hosts()}
    assert [g.slots[0].host for g in pool.submit(Bulk("busy", "run-2", "r", (profile,)))] == ["a"]
    store.block(EVERY_JOB, "b", time.time() + 600, "host lost: server down")
    mirror.mirror()
    assert pool.submit(Bulk("waits", "run-1", "r", (profile,))) == []  # a is busy, b is blocked for every run

    store.unblock(EVERY_JOB, "b")  # a probe found it back
    mirror.mirror()

    assert started == ["waits"] and not pool.blocklist.is_blocked("run-1", "b")
    mirror.mirror()  # nothing more to lift
    assert started == ["waits"]
