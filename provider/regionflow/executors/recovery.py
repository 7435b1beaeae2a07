"""What the RegionExecutor does after a scheduler restart, and the store-to-pool blocklist mirror.

`GrantRecovery`: the store is the ledger of grants. A new scheduler re-takes the slots of grants a
previous one made for task instances that still run (*adopted*: no worker of this process runs them, so
they are released once Airflow's metadata says the task instance ended), releases the waiting rows
(the scheduler queues their task instances again) and settles copies whose threads died with the
previous scheduler.

`BlocklistMirror`: speculation sensors write (job, host) blocklist entries into the store; every sync
copies the live ones into the pool, which decides placement.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ..core.resources import UNKNOWN, ResourceProfile
from ..scheduling.capacity import SlotRef
from ..scheduling.errors import SchedulingError
from ..scheduling.pool import Bulk, SlotPool
from ..store import RegionflowStore, StoreError
from .copies import COPY_PREFIX, CopyRunner

ADOPTED_CHECK_INTERVAL_S = 5.0


class GrantRecovery:
    """Restores a previous scheduler's grants into the pool and releases them when their task ends."""

    def __init__(self, store: RegionflowStore, pool: SlotPool, copies: CopyRunner, log: Any,
                 finished: Callable[[str], bool]) -> None:
        """`finished(ti_id)`: whether Airflow's metadata says that task instance has ended."""
        self.store, self.pool, self.copies, self.log, self.finished = store, pool, copies, log, finished
        self.adopted: dict[str, str] = {}  # bulk id -> task instance id, granted before a restart
        self._checked = 0.0

    def rebuild(self) -> None:
        """Re-take the slots of grants a previous scheduler made for task instances that still run."""
        for record in self.store.live_grants():
            if record.bulk_id.startswith(COPY_PREFIX):  # its thread died with the previous scheduler
                self.store.record_released(record.bulk_id)
                self.copies.abandon(record.bulk_id, "the scheduler restarted while this copy ran")
                continue
            bulk = Bulk(record.bulk_id, record.job_id, record.label,
                        tuple(ResourceProfile.from_dict(p) for p in record.requests) or (UNKNOWN,))
            try:
                self.pool.restore(bulk, [SlotRef(host, index) for host, index in record.slots])
            except SchedulingError as error:
                self.log.error("RegionExecutor: cannot restore grant %s: %s", record.bulk_id, error)
                continue
            self.adopted[record.bulk_id] = record.bulk_id.partition(":")[0]
        if self.adopted:
            self.log.info("RegionExecutor: restored %d grant(s) of running task instances", len(self.adopted))
        for record in self.store.waiting_grants():
            self.store.record_released(record.bulk_id)  # its task instance is queued again by the scheduler
            if record.bulk_id.startswith(COPY_PREFIX):
                self.copies.abandon(record.bulk_id, "the scheduler restarted before this copy got slots")

    def release_ended(self, release: Callable[[str], None]) -> None:
        """Every few seconds: `release` the restored grants whose task instances have ended."""
        now = time.monotonic()
        if not self.adopted or now - self._checked < ADOPTED_CHECK_INTERVAL_S:
            return
        self._checked = now
        for bulk_id, ti_id in list(self.adopted.items()):
            if self.finished(ti_id):
                del self.adopted[bulk_id]
                release(bulk_id)


class BlocklistMirror:
    """Copies the store's live (job, host) blocklist entries into the pool, each once per expiry."""

    def __init__(self, store: RegionflowStore, pool: SlotPool, log: Any) -> None:
        self.store, self.pool, self.log = store, pool, log
        self._mirrored: dict[tuple[str, str], float] = {}  # (job, host) -> store expiry mirrored

    def mirror(self) -> None:
        try:
            entries = self.store.active_blocks()
        except StoreError as error:
            self.log.warning("RegionExecutor: cannot read the blocklist: %s", error)
            return
        now = time.time()
        for entry in entries:
            key = (entry.job_id, entry.host)
            if self._mirrored.get(key, 0.0) >= entry.expires_at:
                continue
            self._mirrored[key] = entry.expires_at
            self.pool.block(entry.job_id, entry.host, max(0.001, entry.expires_at - now))
            self.log.info("RegionExecutor: host %s blocklisted for %s for %.0f s (%s)", entry.host, entry.job_id,
                          entry.expires_at - now, entry.reason)
        for key, expires_at in list(self._mirrored.items()):
            if expires_at <= now:
                del self._mirrored[key]


__all__ = ["ADOPTED_CHECK_INTERVAL_S", "BlocklistMirror", "GrantRecovery"]
