"""Stopping a process group as a hung server would be, for tests: SIGSTOP, then wait until it took.

``kill(SIGSTOP)`` returns before the signal has stopped anything: a thread stops only once it is
scheduled and sees the signal, so on a busy machine a "stopped" server can still answer a request that
arrives at once (measured here under load: 4 handshakes of 100 answered right after the SIGSTOP).
`pause_group` returns only when every thread of every process of the group is stopped.
"""
from __future__ import annotations

import os
import signal

from regionflow.processes import process_group_members, thread_states, wait_until

STOPPED_STATES = ("T", "t")  # stopped by a signal; stopped by a tracer


def pause_group(pgid: int, timeout: float = 30.0) -> None:
    """SIGSTOP process group `pgid` and wait until all its threads are stopped; AssertionError if not in time."""
    os.killpg(pgid, signal.SIGSTOP)
    assert wait_until(lambda: all(_stopped(pid) for pid in process_group_members(pgid)), timeout, 0.01), \
        f"process group {pgid} did not stop within {timeout:.0f} s"


def resume_group(pgid: int) -> None:
    """SIGCONT process group `pgid`."""
    os.killpg(pgid, signal.SIGCONT)


def _stopped(pid: int) -> bool:
    """Every thread of `pid` is stopped (or ended): nothing of it can answer."""
    return all(state in STOPPED_STATES or state == "Z" for state in thread_states(pid))
