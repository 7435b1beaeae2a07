"""CpuHogs: pinned busy loops, each in its own session, at the asked nice; stopped without leftovers."""
from __future__ import annotations

import os
import time

import pytest

from regionflow.testing.slow_host import CpuHogs


def session_of(pid: int) -> int:
    return os.getsid(pid)


def test_hogs_are_pinned_in_their_own_sessions_and_stop_cleanly():
    core = min(os.sched_getaffinity(0))
    hogs = CpuHogs([core], count=2, nice=5)  # a positive nice needs no privilege
    with hogs:
        pids = [process.pid for process in hogs.processes]
        deadline = time.time() + 10
        while time.time() < deadline and any(os.sched_getaffinity(pid) != {core} for pid in pids):
            time.sleep(0.05)  # the hog pins itself on its first line
        assert all(os.sched_getaffinity(pid) == {core} for pid in pids)
        assert len({session_of(pid) for pid in pids} | {os.getsid(0)}) == 3  # two new sessions
        assert all(os.getpriority(os.PRIO_PROCESS, pid) == 5 for pid in pids) and hogs.niced
        if os.path.exists(f"/proc/{pids[0]}/autogroup"):
            with open(f"/proc/{pids[0]}/autogroup") as handle:
                assert handle.read().strip().endswith("nice 5")
    assert not hogs.running
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    hogs.stop()  # a second stop is harmless


def test_bad_hog_settings_name_what_is_wrong():
    with pytest.raises(ValueError, match="at least one core"):
        CpuHogs([])
    with pytest.raises(ValueError, match=r"cores \[4096\] are not usable"):
        CpuHogs([4096])
    with pytest.raises(ValueError, match="count=0"):
        CpuHogs([min(os.sched_getaffinity(0))], count=0)
