"""Winner and loser of a unit's attempts: watching for another attempt's commit, and settling.

Any attempt of a unit (the task instance's original, a speculative copy) runs its Spark submission
under a `CommitWatcher`: a thread polling the partition store's committed manifest every
`interval` seconds. When another attempt committed first, the watcher kills this attempt's
application (it could only discard its output) and its temporary attempt directory is deleted.
`settle` turns a finished submission into the attempt's end state from the one source of truth,
the committed manifest (PartitionStore.commit is atomic first-commit-wins).

A `HostWatcher` ends an attempt whose host is gone. Neither side ends it by itself: a client-mode
driver whose standalone master and worker were stopped in the middle of a job was still waiting
for executors 214 s later, until it was killed; a Spark Connect client whose server hangs (a
stopped process still holds its port) waits for the reply forever. So, while an attempt runs, the
watcher asks every `interval` seconds whatever the attempt needs on its host: its ``spark://``
master answers a request on its RPC port, and, on the session backend, its Spark Connect server answers an
HTTP/2 handshake (`reachability`; a stopped or hung process that still holds its port answers
neither). Once that has failed for `timeout` seconds it kills the
submission and says why. ``local[k]`` masters run on this machine and are not watched. No Airflow
imports.
"""
from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from typing import Any

from ...core.attempts import AttemptState
from ..data.store import CommittedUnit, PartitionStore
from ..servers.reachability import (
    LOSS_HANDSHAKE_TIMEOUT_S,
    any_speaks_spark_rpc,
    connect_address,
    connect_server_serves,
)
from .masters import Master, MasterKind, master_problem

DEFAULT_WATCH_INTERVAL_S = 1.0
DEFAULT_HOST_LOST_TIMEOUT_S = 30.0
MASTER_PROBE_TIMEOUT_S = LOSS_HANDSHAKE_TIMEOUT_S  # how long a standalone master may take to answer one probe


class _SubmissionWatcher:
    """A daemon thread calling `_tick()` every `interval` seconds while the attempt runs; a `_tick()`
    that returns True has killed the submission and ends the watch. A context manager."""

    def __init__(self, submission: Any, interval: float, name: str) -> None:
        self.submission = submission
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name=name, daemon=True)

    def _should_watch(self) -> bool:
        return True

    def _tick(self) -> bool:
        raise NotImplementedError

    def __enter__(self):
        if self._should_watch():
            self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout=max(5.0, 2 * self.interval))

    def _watch(self) -> None:
        while not self._stop.wait(self.interval):
            if self._tick():
                return


class CommitWatcher(_SubmissionWatcher):
    """Kill `submission` as soon as an attempt other than `attempt_id` commits `unit_key`."""

    def __init__(self, partitions: PartitionStore, unit_key: str, attempt_id: str, submission: Any,
                 interval: float = DEFAULT_WATCH_INTERVAL_S) -> None:
        super().__init__(submission, interval, f"commit-watch-{attempt_id}")
        self.partitions = partitions
        self.unit_key = unit_key
        self.attempt_id = attempt_id
        self.beaten_by: CommittedUnit | None = None  # set when this watcher killed the submission

    def _tick(self) -> bool:
        try:
            committed = self.partitions.committed(self.unit_key)
        except Exception:  # noqa: BLE001 - a torn read now is retried next tick
            return False
        if committed is None or committed.attempt_id == self.attempt_id:
            return False
        self.beaten_by = committed
        self.submission.kill(wait=False)
        return True


def standalone_masters(master: str | None) -> list[tuple[str, int]]:
    """(host, port) of every master of a ``spark://h1:p1,h2:p2`` URL; [] for any other master."""
    if master_problem(master) is not None:
        return []
    parsed = Master.parse(str(master))
    return list(parsed.endpoints) if parsed.kind is MasterKind.STANDALONE else []


class HostWatcher(_SubmissionWatcher):
    """Kill `submission` once its host has been silent for `timeout` seconds: none of its standalone
    `master`'s addresses answers a Spark transport request, or its Spark Connect server at `server_url` (``sc://``;
    None with the submit backend) does not answer an HTTP/2 handshake."""

    def __init__(self, master: str | None, submission: Any, timeout: float = DEFAULT_HOST_LOST_TIMEOUT_S,
                 interval: float = 2.0, server_url: str | None = None, host: str | None = None) -> None:
        """`host`: the host's name, which the loss names (``host m3 lost: ...``)."""
        super().__init__(submission, interval, "host-watch")
        self.host = host
        self.master = master
        self.addresses = standalone_masters(master)
        if server_url:
            connect_address(server_url)  # a malformed URL fails here, not as a silent host 30 s later
        self.server_url = server_url
        self.timeout = timeout
        self.lost: str | None = None  # why the host counts as lost, once this watcher killed the submission
        self._last_answer = time.monotonic()

    def _should_watch(self) -> bool:
        return bool(self.addresses) or bool(self.server_url)  # local[k] masters run on this machine

    def _silent(self) -> tuple[str, str, bool] | None:
        """(what does not answer now, who would wait for it, whether it is the master), or None."""
        if self.addresses and not any_speaks_spark_rpc(self.addresses, MASTER_PROBE_TIMEOUT_S):
            return f"master {self.master}", "Spark's driver", True
        if self.server_url and not connect_server_serves(self.server_url, LOSS_HANDSHAKE_TIMEOUT_S):
            return f"its Spark Connect server at {self.server_url}", "the Spark Connect client", False
        return None

    def _tick(self) -> bool:
        silent = self._silent()
        if silent is None:
            self._last_answer = time.monotonic()
            return False
        if time.monotonic() - self._last_answer < self.timeout:
            return False
        what, waiter, master_silent = silent
        who = f"host {self.host}" if self.host else "host"
        self.lost = (f"{who} lost: {what} did not answer for {self.timeout:.0f} s; the attempt was killed "
                     f"({waiter} would wait for it forever)")
        if master_silent:
            self.submission.master_lost()
        self.submission.kill(wait=False)
        return True


class ParentWatcher(_SubmissionWatcher):
    """Kill `submission` once this process has lost the parent `parent_pid` that started it (a task
    process whose supervising Airflow worker was killed): nobody reads its output or reports its end
    any more and its slots are given back without it, so its Spark work must not go on. A process
    whose parent dies is re-parented, so ``os.getppid()`` changes; checked every `interval` s."""

    def __init__(self, parent_pid: int | None, submission: Any, interval: float = DEFAULT_WATCH_INTERVAL_S) -> None:
        super().__init__(submission, interval, "parent-watch")
        self.parent_pid = parent_pid
        self.orphaned: str | None = None  # why, once this watcher killed the submission

    def _should_watch(self) -> bool:
        return self.parent_pid is not None

    def _tick(self) -> bool:
        if os.getppid() == self.parent_pid:
            return False
        self.orphaned = (f"orphaned: the process that started this attempt (pid {self.parent_pid}, its "
                         f"supervisor) is gone; the attempt was killed")
        self.submission.kill(wait=False)
        return True


def explain(result: Any, host_watcher: HostWatcher | None, parent_watcher: ParentWatcher | None = None) -> str:
    """The failure text of an attempt: the host-lost or orphaned reason first when that is why it ended."""
    described = result.describe()
    if host_watcher is not None and host_watcher.lost:
        return f"{host_watcher.lost}; {described}"
    if parent_watcher is not None and parent_watcher.orphaned:
        return f"{parent_watcher.orphaned}; {described}"
    return described


@dataclass(frozen=True)
class Settlement:
    """How one attempt ended: `state` is an attempt end state of regionflow's store."""

    state: AttemptState  # an end state
    winner: CommittedUnit | None

    @property
    def winner_attempt(self) -> str | None:
        return None if self.winner is None else self.winner.attempt_id

    @property
    def winner_host(self) -> str:
        return "?" if self.winner is None else str(self.winner.manifest.get("host", "?"))

    @property
    def unit_done(self) -> bool:
        """Some attempt (this one or another) committed the unit."""
        return self.winner is not None


def settle(result: Any, partitions: PartitionStore, unit_key: str, attempt_id: str) -> Settlement:
    """The end state of `attempt_id` after its submission returned `result` (ok / killed / failed).

    Whoever's id the committed manifest holds won; every other attempt lost, whatever its own exit
    was, and its temporary directory is removed (a killed loser never got to discard itself).
    """
    committed = partitions.committed(unit_key)
    if committed is not None:
        if committed.attempt_id == attempt_id:
            return Settlement(AttemptState.SUCCEEDED, committed)
        _discard_quietly(partitions, unit_key, attempt_id)
        return Settlement(AttemptState.LOST_COMMIT, committed)
    _discard_quietly(partitions, unit_key, attempt_id)
    return Settlement(AttemptState.KILLED if getattr(result, "killed", False) else AttemptState.FAILED, None)


def _discard_quietly(partitions: PartitionStore, unit_key: str, attempt_id: str) -> None:
    try:
        partitions.discard(unit_key, attempt_id)
    except Exception:  # noqa: BLE001 - cleanup only; a stale attempt dir is also swept later
        pass


__all__ = ["CommitWatcher", "DEFAULT_HOST_LOST_TIMEOUT_S", "DEFAULT_WATCH_INTERVAL_S", "HostWatcher", "ParentWatcher",
           "Settlement", "explain", "settle", "standalone_masters"]
