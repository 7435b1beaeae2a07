"""Keeping a host's Spark Connect server up for the attempts that need it (session backend): the one rule
for when regionflow starts a server, so that a plain installation needs no manual step.

The first attempt granted a host whose server regionflow owns and that is not running starts it (under the
host's keeper lock, so concurrent attempts start one server), as does the next attempt after an idle stop
(``slot_idle_timeout``). A server that exited (killed, crashed, out of memory) is started again by the next
attempt on its host, after a back-off; a server that exits again and again (`CRASH_LOOP_RESTARTS` restarts
within `CRASH_LOOP_WINDOW_S`) is not started again: the attempt fails with the host lost, naming the cause
from the server's log, and the pool blocklists the host. A host's server that someone else runs
(`ExternalServer`, a ``conn_id``) is only checked. A server that accepts connections but does not serve
(stopped, hung) is left alone: the attempt finds it silent within ~2 s and the host is lost.
"""
from __future__ import annotations

import json
import os
import time
from collections.abc import Callable

from ...localfiles import exclusive_lock, write_json_atomically
from .connect import ConnectServer, SessionServerError
from .external import ExternalServer

CRASH_LOOP_RESTARTS = 3  # restarts after an exit within the window; one more exit is a crash loop
CRASH_LOOP_WINDOW_S = 600.0
BACKOFF_S = (0.0, 5.0, 20.0)  # before the 1st, 2nd and 3rd restart within the window, since the previous start


class ServerKeeper:
    """Makes a host's server serve before an attempt uses it (`ensure`), or says why it cannot."""

    def __init__(self, *, clock: Callable[[], float] = time.time, sleep: Callable[[float], None] = time.sleep) -> None:
        self.clock = clock
        self.sleep = sleep

    def ensure(self, server: ConnectServer | ExternalServer, note: Callable[[str], None]) -> None:
        """Start `server` when regionflow owns it and it is not running; a `SessionServerError` saying why
        when it cannot serve (someone else's is down, a crash loop, a start that failed)."""
        if isinstance(server, ExternalServer):
            status = server.status()
            if not status.up:
                raise SessionServerError(f"{status.cause} (at {server.url})")
            return
        if server.reachable():
            return
        os.makedirs(server.state_dir, mode=0o700, exist_ok=True)
        with exclusive_lock(server.keeper_lock_path):  # one attempt decides and starts; the others find it up
            if not server.reachable():
                self._start(server, note)

    def _start(self, server: ConnectServer, note: Callable[[str], None]) -> None:
        host = server.host.name
        if server.stopped_idle:
            note(f"host {host}: its Spark Connect server was stopped {server.stop_reason}; starting it again")
            server.start()
            return
        cause = server.exit_cause()
        if cause is None:  # never started here, or stopped by an operator
            note(f"host {host}: its Spark Connect server is not running; starting it (regionflow starts the "
                 f"servers of its hosts when a region is granted one)")
            server.start()
            return
        now = self.clock()
        restarts = [at for at in _read_restarts(server.restarts_path) if now - at < CRASH_LOOP_WINDOW_S]
        if len(restarts) >= CRASH_LOOP_RESTARTS:
            raise SessionServerError(
                f"{cause}; it was started again {len(restarts)} times in the last {CRASH_LOOP_WINDOW_S:.0f} s and "
                f"exited each time, so it is not started again before {CRASH_LOOP_WINDOW_S:.0f} s have passed since "
                f"the first of them (a crash loop: read its log)")
        wait = BACKOFF_S[len(restarts)] - (now - restarts[-1]) if restarts else BACKOFF_S[0]
        if wait > 0:
            note(f"host {host}: {cause}; starting it again in {wait:.0f} s (restart {len(restarts) + 1})")
            self.sleep(wait)
        else:
            note(f"host {host}: {cause}; starting it again")
        write_json_atomically(server.restarts_path, [*restarts, self.clock()])
        server.start()


def _read_restarts(path: str) -> list[float]:
    try:
        with open(path, encoding="utf-8") as handle:
            return [float(at) for at in json.load(handle)]
    except (OSError, ValueError, TypeError):
        return []


__all__ = ["BACKOFF_S", "CRASH_LOOP_RESTARTS", "CRASH_LOOP_WINDOW_S", "ServerKeeper"]
