"""Winner and loser of a unit's attempts: watching for another attempt's commit, and settling.

Any attempt of a unit (the task instance's original, a speculative copy) runs its Spark submission
under a `CommitWatcher`: a thread polling the partition store's committed manifest every
`interval` seconds. When another attempt committed first, the watcher kills this attempt's
application (it could only discard its output) and its temporary attempt directory is deleted.
`settle` turns a finished submission into the attempt's end state from the one source of truth,
the committed manifest (PartitionStore.commit is atomic first-commit-wins). No Airflow imports.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from .store import CommittedUnit, PartitionStore

DEFAULT_WATCH_INTERVAL_S = 1.0


class CommitWatcher:
    """Kill `submission` as soon as an attempt other than `attempt_id` commits `unit_key`."""

    def __init__(self, partitions: PartitionStore, unit_key: str, attempt_id: str, submission: Any,
                 interval: float = DEFAULT_WATCH_INTERVAL_S) -> None:
        self.partitions = partitions
        self.unit_key = unit_key
        self.attempt_id = attempt_id
        self.submission = submission
        self.interval = interval
        self.beaten_by: CommittedUnit | None = None  # set when this watcher killed the submission
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name=f"commit-watch-{attempt_id}", daemon=True)

    def __enter__(self) -> "CommitWatcher":
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
            try:
                committed = self.partitions.committed(self.unit_key)
            except Exception:  # noqa: BLE001 - a torn read now is retried next tick
                continue
            if committed is not None and committed.attempt_id != self.attempt_id:
                self.beaten_by = committed
                self.submission.kill(wait=False)
                return


@dataclass(frozen=True)
class Settlement:
    """How one attempt ended: `state` is an attempt end state of regionflow's store."""

    state: str  # succeeded | lost_commit | killed | failed
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
            return Settlement("succeeded", committed)
        _discard_quietly(partitions, unit_key, attempt_id)
        return Settlement("lost_commit", committed)
    _discard_quietly(partitions, unit_key, attempt_id)
    return Settlement("killed" if getattr(result, "killed", False) else "failed", None)


def _discard_quietly(partitions: PartitionStore, unit_key: str, attempt_id: str) -> None:
    try:
        partitions.discard(unit_key, attempt_id)
    except Exception:  # noqa: BLE001 - cleanup only; a stale attempt dir is also swept later
        pass


__all__ = ["CommitWatcher", "DEFAULT_WATCH_INTERVAL_S", "Settlement", "settle"]
