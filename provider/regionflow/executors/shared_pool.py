"""One scheduler's view of the slot pool that every scheduler shares through the store.

The store's grant rows are the truth (see `regionflow.store.coordination`); `SharedPool` keeps this
process's `SlotPool` as a cache of them at one pool version, and is the only place grant decisions
are written. Why the cache is never wrong when it decides:

- every write to the grants table raises the version by one in its own transaction, so the versions
  order all writes of all schedulers;
- the cache's version is kept only while each of this scheduler's own writes returns exactly the next
  version (`wrote`): then no other scheduler wrote in between, and the cache, having applied the same
  change, equals the rows; any gap marks it stale;
- a decision is recorded with `record_grants(..., expected_version)`, a compare-and-set under the
  store's pool lock: if any write landed since, nothing is written, the pool is rebuilt from a
  snapshot of the rows (`rebuild`: live grants restored, waiting bulks re-submitted oldest first) and
  decides again.

With one scheduler the cache stays exact and each decision costs one small transaction; with several,
a scheduler rebuilds after the others' writes (O(live + waiting rows)).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from ..core.resources import UNKNOWN, ResourceProfile
from ..scheduling.capacity import SlotRef
from ..scheduling.errors import SchedulingError, UnfulfillableBulk
from ..scheduling.pool import Bulk, Grant, SlotPool
from ..store import COPY_PREFIX, GrantRecord, RegionflowStore, SlotConflictError, StalePoolError

REBUILD_TRIES = 5  # decisions lost to other schedulers' writes before giving up until the next sync


@dataclass(frozen=True)
class Decided:
    """A grant recorded in the store; `record` is None for a grant another scheduler recorded."""

    grant: Grant
    record: GrantRecord | None


def bulk_of(record: GrantRecord) -> Bulk:
    """The pool bulk of a grant row (a copy's bulk runs in a job of its own, see `copy_job`)."""
    requests = tuple(ResourceProfile.from_dict(p) for p in record.requests) or (UNKNOWN,)
    job_id = copy_job(record.job_id, record.bulk_id) if record.bulk_id.startswith(COPY_PREFIX) else record.job_id
    return Bulk(record.bulk_id, job_id, record.label, requests)


def copy_job(job_id: str, bulk_id: str) -> str:
    """The pool job of a speculative copy: its own, so its host exclusions concern only it."""
    return f"{job_id}#{bulk_id}"


class SharedPool:
    """The pool as this scheduler sees it: `pool` (the cache), `version` (None: stale), `decide`."""

    def __init__(self, pool: SlotPool, store: RegionflowStore, log: Any, clock: Any = time.time) -> None:
        self.pool, self.store, self.log, self._clock = pool, store, log, clock
        self.version: int | None = None  # the store's pool version the cache equals; None: rebuild first
        self.rebuilds = 0

    def wrote(self, record: GrantRecord | None) -> None:
        """One of this scheduler's writes to the grants table returned `record`."""
        if record is None or record.pool_version is None:
            return
        exact = self.version is not None and record.pool_version == self.version + 1
        self.version = record.pool_version if exact else None

    def invalidate(self) -> None:
        """The cache and the store differ (a write of ours failed): rebuild before the next decision."""
        self.version = None

    def changed(self) -> bool:
        """Whether the cache is stale or another scheduler wrote since (one small read)."""
        return self.version is None or self.store.pool_version() != self.version

    def decide(self, grants: list[Grant]) -> list[Decided]:
        """Record the cache's `grants` in the store; if the cache was stale, rebuild it and decide anew.
        Returns what was recorded (a rebuild's decisions, not `grants`, in that case)."""
        if not grants:
            return []
        if self.version is not None:
            try:
                return self._record(grants, self.version)
            except StalePoolError:
                pass
            except SlotConflictError as error:  # cannot happen at an exact version; the store wins
                self.log.error("RegionExecutor: the pool disagreed with the store (%s); rebuilding it", error)
        return self.rebuild()

    def rebuild(self) -> list[Decided]:
        """Rebuild the cache from the store's rows and record the grants it makes possible."""
        for _ in range(REBUILD_TRIES):
            snapshot = self.store.pool_snapshot()
            self.rebuilds += 1
            self.pool.reset()
            for record in snapshot.live:
                try:
                    self.pool.restore(bulk_of(record), [SlotRef(host, index) for host, index in record.slots])
                except SchedulingError as error:
                    self.log.error("RegionExecutor: cannot restore grant %s: %s", record.bulk_id, error)
            grants: list[Grant] = []
            now = self._clock()
            for record in snapshot.waiting:
                try:
                    grants.extend(self.pool.submit(bulk_of(record), waited_s=now - record.submitted_at))
                except (UnfulfillableBulk, SchedulingError) as error:  # its owner rejects it on admission
                    self.log.warning("RegionExecutor: waiting bulk %s left out of the pool: %s", record.bulk_id, error)
            self.version = snapshot.version
            if not grants:
                return []
            try:
                return self._record(grants, snapshot.version)
            except (StalePoolError, SlotConflictError):
                continue
        self.version = None
        self.log.warning("RegionExecutor: other schedulers kept writing; the pool decides again at the next sync")
        return []

    def _record(self, grants: list[Grant], version: int) -> list[Decided]:
        decisions = [(grant.bulk_id, [(slot.host, slot.index) for slot in grant.slots]) for grant in grants]
        try:
            records = self.store.record_grants(decisions, expected_version=version)
        except (StalePoolError, SlotConflictError):
            raise
        except Exception:  # the cache holds grants the store did not record: rebuild at the next refresh
            self.version = None
            raise
        self.version = records[0].pool_version
        return [Decided(grant, record) for grant, record in zip(grants, records, strict=True)]


__all__ = ["REBUILD_TRIES", "Decided", "SharedPool", "bulk_of", "copy_job"]
