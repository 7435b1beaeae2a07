"""`ServerKeeper`: when regionflow starts a host's Spark Connect server for an attempt (never started, stopped
for being idle, exited), the back-off between restarts and the crash loop that makes the host lost. Driven
with a recording server (its state in a real state dir, a fake clock and sleep); a real server started by
the attempt that needs it: tests/spark/test_connect.py and tests/airflow/test_e2e_session.py."""
from __future__ import annotations

import threading
import time

import pytest
from fake_time import FakeTime

from regionflow.scheduling.hosts import Cluster, Host
from regionflow.spark.data.task import UnitTask
from regionflow.spark.launch.attempt import HostLost
from regionflow.spark.launch.backends import SessionBackend
from regionflow.spark.servers.connect import IDLE, MASTER_LOST, ConnectServer, SessionServerError
from regionflow.spark.servers.keeper import BACKOFF_S, CRASH_LOOP_RESTARTS, CRASH_LOOP_WINDOW_S, ServerKeeper
from regionflow.spark.servers.session_servers import SessionServers

CAUSE = "its Spark Connect server (pid 4242) exited: java.lang.OutOfMemoryError: Java heap space (log: x.log)"


class RecordingServer:
    """What the keeper asks of a `ConnectServer`, recording each start; `start` takes `start_s` seconds."""

    def __init__(self, state_dir, *, up=False, idle=False, cause=None, start_s=0.0, why=IDLE):
        self.host = Host.of("h", 2)
        self.state_dir = str(state_dir)
        self.keeper_lock_path = f"{state_dir}/h.keeper.lock"
        self.restarts_path = f"{state_dir}/h.restarts.json"
        self.up, self.stopped_idle, self.cause, self.start_s = up, idle, cause, start_s
        self.stop_reason = why
        self.starts = 0

    def reachable(self):
        return self.up

    def exit_cause(self):
        return self.cause

    def start(self, timeout=0.0):
        time.sleep(self.start_s)
        self.starts += 1
        self.up, self.stopped_idle = True, False

    def crash(self):
        self.up, self.cause = False, CAUSE


def keeper_and_time():
    fake = FakeTime()
    return ServerKeeper(clock=fake.clock, sleep=fake.sleep), fake


@pytest.mark.parametrize("server_kwargs, starts, line", [
    ({"up": True}, 0, None),
    ({}, 1, "host h: its Spark Connect server is not running; starting it (regionflow starts the servers of its "
            "hosts when a region is granted one)"),
    ({"idle": True}, 1, "host h: its Spark Connect server was stopped for being idle; starting it again"),
    ({"idle": True, "why": MASTER_LOST}, 1, "host h: its Spark Connect server was stopped because its master went "
                                            "away (its application of it would never get an executor again); "
                                            "starting it again"),
    ({"cause": CAUSE}, 1, f"host h: {CAUSE}; starting it again"),
])
def test_a_server_that_is_not_running_is_started_once_saying_why(tmp_path, server_kwargs, starts, line):
    server = RecordingServer(tmp_path, **server_kwargs)
    lines = []
    keeper_and_time()[0].ensure(server, lines.append)
    assert server.starts == starts and lines == ([line] if line else [])


def test_restarts_after_exits_back_off_and_a_crash_loop_makes_the_host_lost(tmp_path):
    keeper, fake = keeper_and_time()
    server = RecordingServer(tmp_path)
    keeper.ensure(server, lambda line: None)  # the first start is no restart
    lines = []
    for restart in range(CRASH_LOOP_RESTARTS):
        server.crash()
        fake.now += 1.0
        keeper.ensure(server, lines.append)
        assert server.starts == restart + 2
    assert fake.slept == [BACKOFF_S[1] - 1.0, BACKOFF_S[2] - 1.0]  # none before the first restart
    assert lines[1] == f"host h: {CAUSE}; starting it again in {BACKOFF_S[1] - 1.0:.0f} s (restart 2)"
    server.crash()
    with pytest.raises(SessionServerError, match=rf"OutOfMemoryError.*started again {CRASH_LOOP_RESTARTS} times "
                                                 r"in the last 600 s .* \(a crash loop: read its log\)"):
        keeper.ensure(server, lines.append)
    assert server.starts == CRASH_LOOP_RESTARTS + 1  # not started in the loop
    fake.now += CRASH_LOOP_WINDOW_S  # the window has passed: a restart again
    keeper.ensure(server, lines.append)
    assert server.up and server.starts == CRASH_LOOP_RESTARTS + 2


def test_attempts_needing_one_server_at_once_start_it_once(tmp_path):
    server = RecordingServer(tmp_path, start_s=0.3)
    keeper = ServerKeeper()
    threads = [threading.Thread(target=keeper.ensure, args=(server, lambda line: None)) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert server.starts == 1 and server.up


def test_the_session_backend_makes_a_crash_loop_a_lost_host(tmp_path):
    servers = SessionServers(Cluster.parse("h:slots=2"), str(tmp_path / "sessions"), base_port=None)
    server = RecordingServer(tmp_path)
    servers.servers = {"h": server}
    server.url, server.token = "sc://127.0.0.1:1", None
    keeper, fake = keeper_and_time()
    with open(server.restarts_path, "w") as handle:  # three restarts within the window already
        handle.write(f"[{fake.now - 30}, {fake.now - 20}, {fake.now - 10}]")
    server.crash()
    task = UnitTask(job="j:JOB", mode="all-blocking", run_id="r1", data_dir=str(tmp_path), unit_key="u0",
                    unit_name="v[0]", regions=[0], attempt_id="a1-x", host="h")
    with pytest.raises(HostLost, match=r"^host h lost: its Spark Connect server \(pid 4242\) exited: .*crash loop"):
        SessionBackend(servers, {}, keeper).prepare(task, str(tmp_path / "t.json"), servers.cluster.host("h"), 2, None)
    assert server.starts == 0


def test_a_session_attempt_watches_its_hosts_master_and_a_lost_one_stops_the_server_for_a_fresh_start(tmp_path):
    """A session attempt on a standalone-master host hands its host watch the master (the server's driver would
    wait for a vanished master's executors forever); once the watch says the master went, the server is stopped
    with that reason, so the next attempt starts a fresh one (Spark outside HA mode never registers an
    application with a master again) and the probe does not count it as a crash."""
    master = "spark://10.0.0.2:7077"
    cluster = Cluster.parse(f"m2:slots=2,master={master};local:slots=1")
    servers = SessionServers(cluster, str(tmp_path / "sessions"), base_port=None, bind_address="127.0.0.1")
    up = RecordingServer(tmp_path, up=True)
    task = UnitTask(job="j:JOB", mode="all-blocking", run_id="r1", data_dir=str(tmp_path), unit_key="u0",
                    unit_name="v[0]", regions=[0], attempt_id="a1-x", host="m2")
    real = servers.server("m2")
    assert isinstance(real, ConnectServer)
    real.reachable = up.reachable  # the keeper finds it up: nothing is started here
    submission = SessionBackend(servers, {}).prepare(task, str(tmp_path / "t.json"), cluster.host("m2"), 2, None)
    assert submission.master == master
    assert not real.stopped_idle
    submission.master_lost()
    assert real.stopped_idle and real.stop_reason == MASTER_LOST

    local = servers.server("local")
    local.reachable = up.reachable
    assert SessionBackend(servers, {}).prepare(task, str(tmp_path / "u.json"), cluster.host("local"), 1,
                                               None).master == "local[1]"  # watched as nothing: it runs here
