"""Processes, in one place: the live processes and process groups as /proc shows them, and the one way
regionflow ends a process group (SIGTERM, a grace period, SIGKILL; or SIGKILL at once for a machine that
goes away). Used by spark-submit attempts, Spark Connect servers, the standalone cluster and the embedded
Airflow stack. Linux only (it reads /proc); standard library only.
"""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass

DEFAULT_KILL_GRACE_SECONDS = 10.0


def live_processes() -> Iterator[tuple[int, int, int]]:
    """(pid, parent pid, process group) of every live process (not a zombie, or a zombie leader whose
    other threads still run), read from /proc."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        fields = _stat_fields(f"/proc/{entry}/stat")
        if len(fields) > 2 and (fields[0] != "Z" or _threads_left(entry)):
            yield int(entry), int(fields[1]), int(fields[2])


def thread_states(pid: int) -> list[str]:
    """The state letter of each thread of process `pid` (``R``, ``S``, ``T`` stopped, ``Z``...), read
    from /proc; [] once it has exited."""
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    states = (_stat_fields(f"/proc/{pid}/task/{thread}/stat") for thread in threads)
    return [fields[0] for fields in states if fields]  # a thread that ended meanwhile has no fields


def _stat_fields(path: str) -> list[str]:
    """The fields of a /proc stat file after the command name (state first), or [] if it is gone."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            stat = handle.read()
    except OSError:
        return []
    return stat[stat.rfind(")") + 2:].split()  # the command name may hold spaces and ")"


def _threads_left(pid: str) -> bool:
    """A zombie thread-group leader whose other threads still run (a JVM whose main thread ended while
    its shutdown hooks still hold its sockets) is not gone yet."""
    try:
        return len(os.listdir(f"/proc/{pid}/task")) > 1
    except OSError:
        return False


def process_group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes of process group `pgid`."""
    return [pid for pid, _, group in live_processes() if group == pgid]


def terminate_process_group(pgid: int, grace_seconds: float = DEFAULT_KILL_GRACE_SECONDS) -> bool:
    """SIGTERM the group, SIGKILL what is left after `grace_seconds`; True if it was still alive."""
    if not process_group_members(pgid):
        return False
    signal_group(pgid, signal.SIGTERM)
    if not _wait_group_empty(pgid, grace_seconds):
        signal_group(pgid, signal.SIGKILL)
        _wait_group_empty(pgid, 5.0)
    return True


def kill_process_group(pgid: int, timeout: float = 5.0) -> None:
    """SIGKILL the group at once (no grace: a machine that goes away) and wait until it is empty."""
    signal_group(pgid, signal.SIGKILL)
    _wait_group_empty(pgid, timeout)


def signal_group(pgid: int, signum: int) -> None:
    """Send `signum` to process group `pgid`; a group that is gone (or not ours) is no error."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


def signal_pids(pids: Iterable[int], signum: int) -> None:
    """Send `signum` to each process of `pids`; one that is gone (or not ours) is no error."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signum)


def start_ticks(pid: int) -> str | None:
    """When process `pid` started (clock ticks after boot, from /proc), or None once it has exited
    (gone, or a zombie): with the pid it names one process, even after the pid is reused."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as handle:
            stat = handle.read()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2:].split()  # the command name may hold spaces and ")"
    if len(fields) < 20 or fields[0] in ("Z", "X"):
        return None
    return fields[19]


def command_line(pid: int) -> str:
    """Process `pid`'s command line as ``ps`` shows it (arguments joined by spaces, a title set with
    setproctitle as set, trailing blanks dropped), or "" once it has exited."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().replace(b"\0", b" ").decode(errors="replace").rstrip()
    except OSError:
        return ""


@dataclass(frozen=True)
class ProcessInfo:
    """A live process: its pid, parent, process group, and whether its environment carries a tag."""

    pid: int
    ppid: int
    pgid: int
    tagged: bool


def tagged_processes(variable: str, value: str) -> dict[int, ProcessInfo]:
    """Every live process of this user by pid, each saying whether its environment has
    ``variable=value`` (a tag its starter put there, inherited by everything it starts)."""
    marker = f"{variable}={value}".encode()
    table = {}
    for pid, parent, group in live_processes():
        try:
            with open(f"/proc/{pid}/environ", "rb") as handle:
                tagged = marker in handle.read().split(b"\0")
        except OSError:
            continue
        table[pid] = ProcessInfo(pid, parent, group, tagged)
    return table


def descendants(table: Mapping[int, ProcessInfo], roots: set[int]) -> set[int]:
    """The pids below `roots` (children, their children, ...) in `table`, `roots` themselves excluded."""
    children: dict[int, list[int]] = {}
    for info in table.values():
        children.setdefault(info.ppid, []).append(info.pid)
    found, stack = set(), list(roots)
    while stack:
        for child in children.get(stack.pop(), []):
            if child not in found:
                found.add(child)
                stack.append(child)
    return found


def wait_until(condition: Callable[[], object], timeout: float, poll_seconds: float = 0.1) -> bool:
    """Poll `condition` until it is true (True) or `timeout` seconds have passed (False)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() >= deadline:
            return False
        time.sleep(poll_seconds)
    return True


def reap(process: subprocess.Popen[bytes], timeout: float = 5.0) -> None:
    """Collect the exit of a child we signalled; SIGKILL it if it has not exited within `timeout`."""
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=timeout)


def _wait_group_empty(pgid: int, timeout: float) -> bool:
    return wait_until(lambda: not process_group_members(pgid), timeout, poll_seconds=0.05)


__all__ = ["DEFAULT_KILL_GRACE_SECONDS", "ProcessInfo", "descendants", "kill_process_group", "live_processes",
           "process_group_members", "reap", "signal_group", "signal_pids", "start_ticks", "tagged_processes",
           "terminate_process_group", "thread_states", "wait_until"]
