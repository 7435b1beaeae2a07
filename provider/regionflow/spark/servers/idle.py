"""Idle Spark Connect servers are stopped: ``[regionflow] slot_idle_timeout`` (FLIP-138's idle
slot timeout, for the long-lived Spark of a host).

`IdleServerReaper.tick(busy_hosts)` is called by whoever knows which hosts hold granted slots (the
RegionExecutor, on its scheduler thread, every few seconds). A host's server that is up and has had
no granted slot for `timeout` seconds is stopped with an idle mark (`ConnectServer.stop_idle`), in a
thread of its own so the caller never waits for a JVM to exit. The next attempt on that host finds
the mark and starts the server again (`SessionBackend.prepare`): a cold start (~6 s here) instead of
a lost host. A server stopped without the mark (killed, crashed) stays a lost host.
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection

from .session_servers import SessionServers

log = logging.getLogger(__name__)


class IdleServerReaper:
    """Stops the servers of `servers` whose host has been idle for `timeout` seconds (> 0)."""

    def __init__(self, servers: SessionServers, timeout: float, *, clock: Callable[[], float] = time.monotonic,
                 background: bool = True) -> None:
        if timeout <= 0:
            raise ValueError(f"[regionflow] slot_idle_timeout = {timeout}: an idle timeout must be > 0 "
                             f"seconds (0 turns idle stopping off: then make no reaper)")
        self.servers = servers
        self.timeout = float(timeout)
        self._clock = clock
        self._background = background
        now = clock()
        self._last_busy = {name: now for name in servers.servers}
        self._stopping: dict[str, threading.Thread] = {}

    def tick(self, busy_hosts: Collection[str]) -> list[str]:
        """Note which hosts are busy now; stop the servers idle for `timeout`. Returns their hosts."""
        now = self._clock()
        stopped = []
        for name, server in self.servers.servers.items():
            if name in busy_hosts:
                self._last_busy[name] = now
                continue
            if now - self._last_busy[name] < self.timeout or self._is_stopping(name):
                continue
            self._last_busy[name] = now  # look again one timeout later
            if not server.reachable():
                continue
            log.info("regionflow: host %s had no granted slot for %.0f s: stopping its Spark Connect server "
                     "(slot_idle_timeout); the next region on it starts it again", name, self.timeout)
            stopped.append(name)
            if self._background:
                thread = threading.Thread(target=server.stop_idle, name=f"idle-stop-{name}", daemon=True)
                self._stopping[name] = thread
                thread.start()
            else:
                server.stop_idle()
        return stopped

    def _is_stopping(self, name: str) -> bool:
        thread = self._stopping.get(name)
        if thread is not None and not thread.is_alive():
            del self._stopping[name]
            return False
        return thread is not None


__all__ = ["IdleServerReaper"]
