"""IdleServerReaper over server doubles and a fake clock (the real stop and restart of a Spark Connect
server is in test_connect.py): which hosts count as idle, and when their servers are stopped."""
from __future__ import annotations

import pytest

from regionflow.spark.servers.idle import IdleServerReaper


class FakeServer:
    def __init__(self, up: bool = True):
        self.up = up
        self.idle_stops = 0

    def reachable(self) -> bool:
        return self.up

    def stop_idle(self) -> bool:
        self.idle_stops += 1
        self.up = False
        return True


class FakeServers:
    def __init__(self, **servers):
        self.servers = servers


def reaper(servers, timeout=60.0):
    now = [1000.0]
    return IdleServerReaper(servers, timeout, clock=lambda: now[0], background=False), now


def test_a_host_without_grants_for_the_timeout_has_its_server_stopped_once():
    servers = FakeServers(a=FakeServer(), b=FakeServer())
    idle, now = reaper(servers)
    assert idle.tick({"a", "b"}) == []
    now[0] += 59
    assert idle.tick({"b"}) == []  # a idle for 59 s only
    now[0] += 2
    assert idle.tick({"b"}) == ["a"]
    assert servers.servers["a"].idle_stops == 1 and servers.servers["b"].idle_stops == 0
    now[0] += 120
    assert idle.tick({"b"}) == []  # already down: not stopped again
    assert servers.servers["a"].idle_stops == 1


def test_a_busy_host_is_never_stopped_and_its_idle_time_starts_when_it_is_freed():
    servers = FakeServers(a=FakeServer())
    idle, now = reaper(servers, timeout=10)
    for _ in range(5):
        now[0] += 9
        assert idle.tick({"a"}) == []
    now[0] += 9
    assert idle.tick(set()) == []  # 9 s since it was last seen busy
    now[0] += 2
    assert idle.tick(set()) == ["a"]


def test_a_down_server_is_left_alone():
    servers = FakeServers(a=FakeServer(up=False))
    idle, now = reaper(servers, timeout=1)
    now[0] += 5
    assert idle.tick(set()) == [] and servers.servers["a"].idle_stops == 0


@pytest.mark.parametrize("timeout", [0, -5])
def test_a_timeout_that_is_not_positive_is_refused_naming_the_option(timeout):
    with pytest.raises(ValueError, match="slot_idle_timeout"):
        IdleServerReaper(FakeServers(), timeout)
