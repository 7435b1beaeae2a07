"""The FIFO bulk slot pool: gives each region all of its slots at once, oldest region first.

A *bulk* is all slot requests of one region (FLIP-119). The pool grants a bulk whole or not at
all, on hosts of the cluster, never on a host blocklisted for the bulk's job or for every job, and
keeps the declared requirements of every job (FLIP-138) current. It is event driven: every call
returns the grants it made, in the order it made them, and the caller starts those regions.

`SlotPool` is the facade; as in Flink's slot pool, each responsibility has its own module:

==================  ==============================================================================
pool_bulks          the values: `Bulk`, `Grant`, `HostLoss`, `HostUsage`
pool_queue          the waiting queue: one FIFO of bulks, sub-queues by signature, index by shape
pool_fulfill        bulk shapes and the fulfillability check (can this bulk ever be served?)
pool_pass           the pass: FIFO with reservations and bounded backfill (who is served now)
pool_placement      host choice: counts per slot class, then hosts, avoiding blocklisted hosts
pool_grants         the grant book: who holds which slots on which host
capacity            slot classes and per-host free slots (`SlotTable`), bulk shapes (`Demand`)
blocklist           the (job, host) blocklist with expiries
requirements        declared requirements per job and not-enough-resources notices
==================  ==============================================================================

Fulfillability: `submit` rejects at once, with `UnfulfillableBulk`, a bulk no cluster state can
satisfy (more requests than slots, a profile no host offers, or a profile whose fitting hosts are
all, or too many of them, blocklisted for the job at submit time). After submission the blocklist
never rejects a bulk: a waiting bulk that an entry blocks waits for it to expire. Only
`remove_host` re-checks waiting bulks against the smaller cluster.

Cost (C slot classes, G signatures, k a bulk's size, L = ``backfill_lookahead``):

* submit: O(k) to read the shape, O(1) fulfillability (cached per shape), then the new bulk is
  tried against the budget the last pass left (O(k * C)): no pass over the queue.
* release, cancel, add_host, lifted or expired entry: one pass, O((g + L) * k * C + G log G) for
  g grants (`release_all` of several bulks: one pass for all); never dependent on the number of waiting bulks.
* remove_host: O(grants on the host + shapes waiting + rejected) plus one pass. Adding a host
  with a never-seen slot profile re-sorts the waiting bulks into sub-queues, O(waiting).
* declared requirements: O(1) per event; `overdue_jobs` is O(jobs).
"""
from __future__ import annotations

import itertools
import time
from collections.abc import Iterable, Sequence
from typing import Any

from ..core.errors import SpecError
from ..core.resources import ResourceProfile
from .blocklist import DEFAULT_EXPIRY_S, BlockEntry, Blocklist, Clock
from .capacity import SlotRef, SlotTable
from .errors import SchedulingError, UnfulfillableBulk
from .hosts import Cluster, Host
from .pool_bulks import Bulk, Grant, HostLoss, HostUsage, host_row
from .pool_fulfill import Fulfillability
from .pool_grants import GrantBook, Held
from .pool_pass import Passes, PassState
from .pool_placement import BlockMasks
from .pool_queue import Queued, WaitingQueue
from .requirements import RequirementLedger, ResourceNotice

DEFAULT_RESOURCE_WAIT_TIMEOUT_S = 300.0
DEFAULT_BACKFILL_LOOKAHEAD = 32


class SlotPool:
    """FIFO bulk slot pool over a cluster of hosts (see the module docstring and pool_pass for the rules)."""

    def __init__(
        self,
        hosts: Cluster | Iterable[Host] = (),
        *,
        clock: Clock = time.monotonic,
        blocklist_expiry_s: float = DEFAULT_EXPIRY_S,
        resource_wait_timeout_s: float = DEFAULT_RESOURCE_WAIT_TIMEOUT_S,
        backfill_lookahead: int = DEFAULT_BACKFILL_LOOKAHEAD,
    ) -> None:
        if isinstance(backfill_lookahead, bool) or not isinstance(backfill_lookahead, int) or backfill_lookahead < 1:
            raise SpecError(f"backfill_lookahead must be an integer >= 1, got {backfill_lookahead!r}")
        if not isinstance(resource_wait_timeout_s, (int, float)) or resource_wait_timeout_s < 0:
            raise SpecError("resource_wait_timeout_s must be a number of seconds >= 0, "
                            f"got {resource_wait_timeout_s!r}")
        self._clock = clock
        self._lookahead = backfill_lookahead
        self.resource_wait_timeout_s = float(resource_wait_timeout_s)
        self._blocklist = Blocklist(clock, blocklist_expiry_s)
        self._sequence = itertools.count()
        self._build(hosts)

    def _build(self, hosts: Iterable[Host]) -> None:
        """Fresh parts over `hosts`, no bulks; the blocklist stays."""
        self._table = table = SlotTable()
        self._ledger = RequirementLedger()
        self._queue = WaitingQueue()
        self._book = GrantBook(table, self._ledger)
        self._shapes = Fulfillability(table, self._blocklist, self._clock)
        self._masks = BlockMasks(table, self._blocklist)
        self._passes = Passes(table, self._queue, self._book, self._masks, self._lookahead)
        for host in hosts:
            self._add_host_record(host)
        self._passes.frontier = PassState(table.class_free)

    # ==== public API ==============================================================================

    @property
    def blocklist(self) -> Blocklist:
        """The pool's blocklist (read it freely; change it through `block` and `unblock`)."""
        return self._blocklist

    @property
    def pending_count(self) -> int:
        """Number of waiting bulks."""
        return len(self._queue.pending)

    @property
    def running_count(self) -> int:
        """Number of granted bulks holding slots."""
        return len(self._book.running)

    def submit(self, bulk: Bulk, waited_s: float = 0.0) -> list[Grant]:
        """Queue `bulk`; return the grants this made possible (it may be among them). `waited_s`: how
        long it has waited already (a pool rebuilt from a store re-submits its waiting bulks).

        Raises `UnfulfillableBulk` when no state of the cluster can ever satisfy the bulk.
        """
        self._expire_blocklist()
        self._check_new_bulk_id(bulk)
        demand, positions = self._shapes.demand_of(bulk)
        self._shapes.check(bulk, demand, self._masks.of(bulk.job_id))
        waiting = Queued(bulk, demand, next(self._sequence), self._clock() - max(0.0, waited_s), positions)
        self._queue.add(waiting)
        self._ledger.bulk_waiting(bulk.job_id, bulk.bulk_id, bulk.label, waiting.since, demand)
        if self._passes.dirty:
            return self._passes.run()
        return self._passes.continue_with(waiting)

    def grantable_now(self, bulk: Bulk, ignoring: str | None = None) -> bool:
        """Whether `submit(bulk)` would grant it at once: nothing else waits (`ignoring` aside) and the free
        slots hold it. A query (`scheduling.elastic`)."""
        return self._passes.fits_alone(self._shapes.demand_of(bulk)[0], bulk.job_id, ignoring)

    def restore(self, bulk: Bulk, slots: Sequence[SlotRef]) -> Grant:
        """Re-take exactly `slots` for `bulk`, as granted before a restart (the executor rebuilds its
        ledger from the store). Slots on hosts that no longer exist are dropped; a slot that is
        already taken raises SchedulingError, so nothing is ever granted twice."""
        self._check_new_bulk_id(bulk)
        demand, _ = self._shapes.demand_of(bulk)
        grant = self._book.restore(bulk, demand, slots)
        self._passes.dirty = True  # the budget left by the last pass no longer holds
        return grant

    def reset(self) -> None:
        """Forget every bulk, waiting or granted; hosts and the blocklist stay. The executor then
        rebuilds the pool from its store (`restore` the live grants, `submit` the waiting bulks in order)."""
        self._build(self.hosts())

    def release(self, bulk_id: str) -> list[Grant]:
        """Return a granted bulk's slots; return the grants this made possible."""
        self._expire_blocklist()
        self._book.drop(self._held(bulk_id))
        return self._passes.run()

    def release_all(self, bulk_ids: Iterable[str]) -> list[Grant]:
        """Return the slots of granted bulks that ended together, in one pass; return its grants. An id
        that holds no slots, or is given twice, raises SchedulingError before anything is released."""
        self._expire_blocklist()
        ending: dict[str, Held] = {}
        for bulk_id in bulk_ids:
            if bulk_id in ending:
                raise SchedulingError(f"release_all got bulk id '{bulk_id}' twice; release each bulk once")
            ending[bulk_id] = self._held(bulk_id)
        for held in ending.values():
            self._book.drop(held)
        return self._passes.run()

    def cancel(self, bulk_id: str) -> list[Grant]:
        """Withdraw a waiting bulk; return the grants its lifted reservation made possible."""
        self._expire_blocklist()
        waiting = self._queue.pending.get(bulk_id)
        if waiting is None:
            if bulk_id in self._book.running:
                raise SchedulingError(f"bulk '{bulk_id}' is running, not waiting; release it instead of cancelling")
            raise SchedulingError(f"bulk '{bulk_id}' is not waiting (never submitted, granted or already cancelled)")
        self._queue.remove(waiting)
        self._ledger.bulk_withdrawn(waiting.bulk.job_id, bulk_id, waiting.demand)
        if self._passes.dirty or waiting.sequence <= self._passes.frontier.last_sequence:
            return self._passes.run()
        return []

    def add_host(self, host: Host) -> list[Grant]:
        """Add a host (its slots are free at once); return the grants this made possible."""
        self._expire_blocklist()
        if host.name in self._table.index_of:
            raise SchedulingError(f"host '{host.name}' is already in the pool; remove it first or pick another name")
        self._add_host_record(host)
        return self._passes.run()

    def remove_host(self, name: str) -> HostLoss:
        """Take a host away: its grants are lost, waiting bulks that no longer fit are rejected."""
        self._expire_blocklist()
        index = self._host_index(name)
        lost = self._book.holding(index)
        for held in lost:
            self._book.drop(held)
        self._table.remove_host(index)
        self._refresh_block_masks()
        rejected = self._reject_unfulfillable_waiting()
        granted = self._passes.run()
        return HostLoss(name, [held.grant for held in lost], rejected, granted)

    def block(self, job_id: str, host: str, expiry_s: float | None = None) -> BlockEntry:
        """Place no new slot of `job_id` on `host` for `expiry_s` seconds (default: the pool's);
        `job_id` `EVERY_JOB` (``"*"``) blocks the host for every job (a lost host)."""
        self._expire_blocklist()
        entry = self._blocklist.add(job_id, host, expiry_s)
        self._masks.refresh(job_id)
        self._passes.dirty = True  # an entry only ever removes options, so no grant can follow from it
        return entry

    def unblock(self, job_id: str, host: str) -> list[Grant]:
        """Lift a blocklist entry early; return the grants this made possible."""
        self._expire_blocklist()
        if self._blocklist.remove(job_id, host):
            self._masks.refresh(job_id)
            return self._passes.run()
        return self._passes.run() if self._passes.dirty else []

    def poll(self) -> list[Grant]:
        """Expire blocklist entries whose time has come; return the grants this made possible."""
        self._expire_blocklist()
        return self._passes.run() if self._passes.dirty else []

    def next_wakeup(self) -> float | None:
        """Clock time of the next blocklist expiry (call `poll` then), or None."""
        return self._blocklist.next_expiry()

    def requirements(self, job_id: str) -> dict[ResourceProfile, int]:
        """Outstanding (waiting, not yet granted) slots of a job per profile."""
        return self._ledger.outstanding(job_id)

    def acquired(self, job_id: str) -> dict[ResourceProfile, int]:
        """Slots a job holds per profile."""
        return self._ledger.acquired(job_id)

    def declared(self) -> dict[str, dict[ResourceProfile, int]]:
        """Outstanding slots per profile of every job that waits for some."""
        return self._ledger.declared()

    def run_shortfalls(self, job_id: str, needs: Iterable[tuple[str, Sequence[ResourceProfile]]]) -> list[str]:
        """A job's declaration at its start (FLIP-138): of the bulks it will ask for, given as (label,
        slot requests), the ones the cluster as it is can never serve, each as the message `submit`
        would reject it with. Blocklist entries do not count (they expire). Nothing is queued; O(1) per
        known bulk shape."""
        problems = []
        for label, requests in needs:
            bulk = Bulk(f"{job_id}#declared", job_id, label, tuple(requests))
            demand, _ = self._shapes.demand_of(bulk)
            try:
                self._shapes.check(bulk, demand, 0)
            except UnfulfillableBulk as rejection:
                problems.append(str(rejection))
        return problems

    def overdue_jobs(self, now: float | None = None) -> list[ResourceNotice]:
        """Not-enough-resources notices: jobs whose oldest waiting bulk waited past the grace period."""
        now = self._clock() if now is None else now
        notices = []
        for job_id, oldest in self._ledger.oldest_waiting():
            waited = now - oldest.since
            if waited >= self.resource_wait_timeout_s:
                notices.append(self._ledger.notice(job_id, oldest, waited, self.resource_wait_timeout_s,
                                                   self.free_slots(), self.total_slots(), len(self._queue.pending)))
        return sorted(notices, key=lambda notice: -notice.waiting_s)

    def free_slots(self) -> int:
        """Free slots on live hosts."""
        return sum(self._table.class_free)

    def used_slots(self) -> int:
        """Granted slots on live hosts."""
        return sum(self._table.class_capacity) - sum(self._table.class_free)

    def total_slots(self) -> int:
        """All slots of the live hosts."""
        return sum(self._table.class_capacity)

    def hosts(self) -> list[Host]:
        """The live hosts, in host order."""
        return [host for _, host in self._table.live()]

    def host_usage(self) -> list[HostUsage]:
        """Per live host: its slots and how many are free (O(hosts))."""
        table = self._table
        return [HostUsage(host.name, host.slots, table.free_count[index]) for index, host in table.live()]

    def busy_hosts(self) -> set[str]:
        """Names of the live hosts with at least one granted slot."""
        table = self._table
        return {host.name for index, host in table.live() if table.free_count[index] < host.slots}

    def is_waiting(self, bulk_id: str) -> bool:
        """True when the bulk is queued (submitted, not yet granted or cancelled)."""
        return bulk_id in self._queue.pending

    def grant_of(self, bulk_id: str) -> Grant | None:
        """The grant of a bulk that holds slots, else None."""
        held = self._book.running.get(bulk_id)
        return held.grant if held else None

    def waiting_bulks(self) -> list[Bulk]:
        """Waiting bulks, oldest first (O(waiting))."""
        return [waiting.bulk for waiting in self._queue.pending.values()]

    def snapshot(self, max_pending: int | None = 100) -> dict[str, Any]:
        """JSON-able state for the UI: hosts, waiting bulks (oldest first), grants, blocklist."""
        now = self._clock()
        table = self._table
        pending = itertools.islice(self._queue.pending.values(), max_pending)
        return {
            "hosts": [host_row(host, table.free_count[index]) for index, host in table.live()],
            "pending_count": len(self._queue.pending),
            "pending": [
                {"bulk_id": w.bulk.bulk_id, "job_id": w.bulk.job_id, "label": w.bulk.label,
                 "slots": w.demand.size, "waiting_s": now - w.since}
                for w in pending
            ],
            "running": [held.grant.to_dict() for held in self._book.running.values()],
            "blocklist": [
                {"job_id": entry.job_id, "host": entry.host, "expires_in_s": entry.remaining_s(now)}
                for entry in self._blocklist.entries()
            ],
            "declared": {
                job: [{"profile": profile.to_dict(), "slots": count} for profile, count in counts.items()]
                for job, counts in self._ledger.declared().items()
            },
        }

    # ==== bookkeeping =============================================================================

    def _check_new_bulk_id(self, bulk: Bulk) -> None:
        if bulk.bulk_id in self._queue.pending or bulk.bulk_id in self._book.running:
            state = "waiting" if bulk.bulk_id in self._queue.pending else "running"
            raise SchedulingError(
                f"bulk id '{bulk.bulk_id}' (region '{bulk.label}') is already {state}; give each attempt its own id"
            )

    def _held(self, bulk_id: str) -> Held:
        """The granted bulk `bulk_id`, to release; SchedulingError saying why when it holds no slots."""
        held = self._book.running.get(bulk_id)
        if held is not None:
            return held
        if bulk_id in self._queue.pending:
            raise SchedulingError(f"bulk '{bulk_id}' is still waiting, it holds no slots to release; cancel it instead")
        raise SchedulingError(f"bulk '{bulk_id}' holds no slots (never granted, already released, or lost with "
                              "its host)")

    def _reject_unfulfillable_waiting(self) -> list[tuple[Bulk, UnfulfillableBulk]]:
        """After a host left: reject the waiting bulks the smaller cluster can never hold."""
        queue = self._queue
        rejected: list[tuple[Queued, UnfulfillableBulk]] = []
        for demand in self._shapes.never_fitting(list(queue.by_shape)):
            for waiting in list(queue.by_shape[demand.key].values()):
                rejected.append((waiting, self._shapes.unfulfillable(waiting.bulk, demand, {})))
                queue.remove(waiting)
                self._ledger.bulk_withdrawn(waiting.bulk.job_id, waiting.bulk.bulk_id, demand)
        rejected.sort(key=lambda pair: pair[0].sequence)
        return [(waiting.bulk, error) for waiting, error in rejected]

    def _add_host_record(self, host: Host) -> None:
        if host.name in self._table.index_of:
            raise SchedulingError(f"host '{host.name}' is listed twice; host names must be unique")
        layout_before = self._table.layout_version
        self._table.add_host(host)
        self._book.host_added()
        if self._table.layout_version != layout_before:
            # a new slot class changes which classes a shape fits: O(waiting), paid only then
            self._shapes.refresh_shapes()
            self._queue.regroup()
        self._refresh_block_masks()

    def _host_index(self, name: str) -> int:
        index = self._table.index_of.get(name)
        if index is None:
            known = ", ".join(host.name for _, host in self._table.live()) or "none"
            raise SchedulingError(f"no host named '{name}' in the pool; hosts are: {known}")
        return index

    def _expire_blocklist(self) -> None:
        expired = self._blocklist.purge()
        if expired:
            for job_id in {entry.job_id for entry in expired}:
                self._masks.refresh(job_id)
            self._passes.dirty = True

    def _refresh_block_masks(self) -> None:
        self._masks.refresh_all()
        self._passes.dirty = True


__all__ = ["Bulk", "Grant", "HostLoss", "HostUsage", "SlotPool", "SlotRef", "DEFAULT_RESOURCE_WAIT_TIMEOUT_S",
           "DEFAULT_BACKFILL_LOOKAHEAD"]
