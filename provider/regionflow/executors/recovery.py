"""Schedulers sharing the pool: membership, take-over of stopped ones, and the store-to-pool blocklist mirror.

`GrantRecovery`: every RegionExecutor registers in the store and heartbeats. A scheduler counts as
stopped when it ended, when its heartbeat is older than Airflow's ``[scheduler]
scheduler_health_check_threshold`` (the rule Airflow uses for its own scheduler jobs), or when it ran
on this machine and its process is gone. A live scheduler takes over a stopped one's rows: waiting
rows are released (the scheduler that adopts or resets their task instances queues them again), live
grants of task instances become *adopted*: no worker of this process runs them, so they are released
once Airflow's metadata says the task instance ended. Speculative copies, threads of the stopped
scheduler, are taken over: their records are settled and, while their shard still runs and has not
committed, each is asked for again as a new copy request that any scheduler's pool takes
(`CopyRunner.take_over`).

`BlocklistMirror`: speculation sensors (and copies, for their host exclusions) write (job, host)
blocklist entries into the store; every sync copies the live ones into the pool, which decides placement.
"""
from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Callable
from typing import Any

from ..processes import start_ticks
from ..scheduling.pool import Grant, SlotPool
from ..store import COPY_PREFIX, RegionflowStore, StoreError, TakeOver, is_stopped
from ..store.coordination import STOPPED_AFTER_S
from .copies import CopyRunner
from .guard import Every

ADOPTED_CHECK_INTERVAL_S = 5.0
HEARTBEAT_INTERVAL_S = 5.0


def new_scheduler_id() -> str:
    """A scheduler's id in the store: its machine and pid, plus a random part (pids are reused)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def _alive(pid: int) -> bool:
    return start_ticks(pid) is not None


class GrantRecovery:
    """This scheduler's membership in the shared pool, and the rows it takes over from stopped ones."""

    def __init__(self, store: RegionflowStore, copies: CopyRunner, log: Any, finished: Callable[[str], bool], *,
                 scheduler_id: str | None = None, stopped_after_s: float = STOPPED_AFTER_S,
                 clock: Callable[[], float] = time.time) -> None:
        """`finished(ti_id)`: whether Airflow's metadata says that task instance has ended."""
        self.store, self.copies, self.log, self.finished = store, copies, log, finished
        self.scheduler_id = scheduler_id or new_scheduler_id()
        self.stopped_after_s, self.clock = stopped_after_s, clock
        self.adopted: dict[str, str] = {}  # bulk id -> task instance id, granted by a stopped scheduler
        self._adopted_check = Every(ADOPTED_CHECK_INTERVAL_S)
        self._beat = 0.0

    def start(self, airflow_job_id: int | None = None) -> None:
        """Join the pool and take over the rows of schedulers that stopped."""
        self.store.register_scheduler(self.scheduler_id, hostname=socket.gethostname(), pid=os.getpid(),
                                      airflow_job_id=airflow_job_id)
        self._beat = time.monotonic()
        self.take_over_stopped()

    def end(self) -> None:
        """Leave the pool cleanly: waiting rows are released; live grants wait for a successor."""
        released = self.store.end_scheduler(self.scheduler_id, "the scheduler stopped while this waited; "
                                                                "Airflow queues the task instance again")
        if released:
            self.log.info("RegionExecutor: released %d waiting row(s) on leaving the pool", len(released))

    def tick(self, release: Callable[[str], None]) -> None:
        """Every sync: heartbeat and take over stopped schedulers every few seconds; release adopted
        grants whose task instances ended."""
        now = time.monotonic()
        if now - self._beat >= HEARTBEAT_INTERVAL_S:
            self._beat = now
            self.store.scheduler_heartbeat(self.scheduler_id)
            self.take_over_stopped()
        self.release_ended(release)

    def take_over_stopped(self) -> list[TakeOver]:
        """Take over the rows of every stopped scheduler (and of rows without an owner)."""
        now = self.clock()
        known = {record.scheduler_id: record for record in self.store.schedulers()}
        taken = []
        for owner in self.store.owners() - {self.scheduler_id}:
            record = known.get(owner) if owner is not None else None
            if record is not None and not is_stopped(record, now=now, timeout_s=self.stopped_after_s,
                                                     hostname=socket.gethostname(), alive=_alive):
                continue
            why = f"scheduler {owner or '(unknown)'} stopped; Airflow queues this task instance again"
            taken.append(self._settle(self.store.take_over(owner, self.scheduler_id, why)))
        return taken

    def adopt(self, bulk_id: str, ti_id: str) -> None:
        """Airflow handed over a running task instance of a stopped scheduler: its grant is ours now."""
        self.store.adopt_grant(bulk_id, self.scheduler_id)
        self.adopted[bulk_id] = ti_id

    def release_ended(self, release: Callable[[str], None]) -> None:
        """Every few seconds: `release` the adopted grants whose task instances have ended."""
        if not self.adopted or not self._adopted_check.due():
            return
        for bulk_id, ti_id in list(self.adopted.items()):
            if self.finished(ti_id):
                del self.adopted[bulk_id]
                release(bulk_id)

    def _settle(self, take: TakeOver) -> TakeOver:
        stopped = f"scheduler {take.stopped or '(unknown)'} stopped"
        for record in take.adopted:
            if record.bulk_id.startswith(COPY_PREFIX):  # its thread died with its scheduler
                self.store.record_released(record.bulk_id, "its scheduler stopped while this copy ran")
                self.copies.take_over(record.bulk_id, f"{stopped} while this copy ran")
            else:
                self.adopted[record.bulk_id] = record.bulk_id.partition(":")[0]
        for record in take.released:
            if record.bulk_id.startswith(COPY_PREFIX):
                self.copies.take_over(record.bulk_id, f"{stopped} before this copy got slots")
        if take.adopted or take.released:
            self.log.info("RegionExecutor: took over scheduler %s: %d grant(s) of running task instances adopted, "
                          "%d waiting row(s) released", take.stopped or "(unknown)", len(take.adopted),
                          len(take.released))
        return take


class BlocklistMirror:
    """Copies the store's live (job, host) blocklist entries into the pool, each once per expiry, and
    lifts from the pool an entry the store lifted before it expired (a lost host that answers again,
    `LostHostWatch`); the grants that makes possible go to `start`."""

    def __init__(self, store: RegionflowStore, pool: SlotPool, log: Any,
                 start: Callable[[list[Grant]], None]) -> None:
        self.store, self.pool, self.log, self.start = store, pool, log, start
        self._mirrored: dict[tuple[str, str], float] = {}  # (job, host) -> store expiry mirrored

    def mirror(self) -> None:
        try:
            entries = self.store.active_blocks()
        except StoreError as error:
            self.log.warning("RegionExecutor: cannot read the blocklist: %s", error)
            return
        now = time.time()  # not before the store's read: an entry it left out as expired is expired here too
        live = set()
        for entry in entries:
            key = (entry.job_id, entry.host)
            live.add(key)
            if self._mirrored.get(key, 0.0) >= entry.expires_at:
                continue
            self._mirrored[key] = entry.expires_at
            self.pool.block(entry.job_id, entry.host, max(0.001, entry.expires_at - now))
            self.log.info("RegionExecutor: host %s blocklisted for %s for %.0f s (%s)", entry.host, entry.job_id,
                          entry.expires_at - now, entry.reason)
        for key, expires_at in list(self._mirrored.items()):
            if expires_at <= now:
                del self._mirrored[key]
            elif key not in live:
                del self._mirrored[key]
                self.log.info("RegionExecutor: blocklist entry of host %s for %s lifted", key[1], key[0])
                self.start(self.pool.unblock(*key))


__all__ = ["ADOPTED_CHECK_INTERVAL_S", "BlocklistMirror", "GrantRecovery", "new_scheduler_id"]
