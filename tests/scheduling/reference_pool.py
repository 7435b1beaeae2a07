"""FROZEN REFERENCE: scheduling/pool.py as of 8d3a3ce, before the split into modules (issue 17).

Used only by tests/scheduling/test_pool_equivalence.py to check that the split and the speed-ups
leave every decision unchanged. Do not edit or import from the package code.

The original docstring follows.


What it owns
------------
A *bulk* is all slot requests of one region (FLIP-119). The pool grants a bulk whole or not at
all, on hosts of the cluster, never on a host blocklisted for the bulk's job, and keeps the
declared requirements of every job (FLIP-138) current. It is event driven: every call returns
the grants it made, in the order it made them, and the caller starts those regions.

Order and backfill
------------------
Waiting bulks form one FIFO queue across all jobs. After every event that can change what is
possible (release, cancel, host added or removed, blocklist entry lifted or expired) the pool
runs a *pass*. Slots are counted per *slot class* (hosts whose slots offer the same profile);
the pass hands out a per-class budget, starting from the free slots:

1. From the front of the queue, bulks are granted while the budget holds them. The first bulk it
   does not hold is the *head* ``H``. It sets slots aside: in every class ``c`` it reserves
   ``min(budget_c, need_c)``, where ``need_c`` is the number of its requests that fit class
   ``c`` - the most any placement of ``H`` can ever use there.
2. Behind the head (backfill), bulks are visited in submission order. One that the remaining
   budget holds is granted. One that it does not is blocked and reserves like the head - unless
   one of its profiles has no budget left in any class it fits: such a bulk cannot start in this
   pass whatever younger bulks do, so it reserves nothing and is not even visited (waiting bulks
   are kept in sub-queues by *signature*, the classes each of their profiles fits, and a
   sub-queue whose signature has a drained profile is left out of the merge).

So a freed slot goes to the oldest waiting bulk it helps, and a younger bulk is granted only
from slots that the head, and every older bulk still in the running, either cannot use or has
more than enough of.

Guarantee for the head: let ``F_c`` be the free slots of class ``c`` that ``H`` may use (hosts
not blocklisted for its job). A younger grant leaves at least ``min(F_c, need_c(H))`` of them
free, and any placement of ``H`` uses at most that many in ``c``. Hence whatever placement would
have granted ``H`` without the younger bulk - now or after later releases, which only add free
slots - still exists with it: backfill never delays the head. With homogeneous slots this is
plain counting: a blocked head reserves every free slot and nothing passes it.

Reservations of bulks without blocklist entries are counts per class ("floating": any host of
the class will do). A bulk with blocklist entries must have its reservation on other hosts, so it
*pins* whole hosts outside its blocklist (the emptiest first) and later bulks of the pass skip
pinned hosts; the budget is capped so that ``budget_c + floating_c`` never exceeds the free
slots of unpinned hosts, which keeps every reservation placeable.

Liveness: a blocked head keeps its reservation topped up as slots free, so once every bulk
granted before it has released (and the blocklist entries of its job have expired) it has all it
needs: a bulk that fits the cluster is never starved. A pass looks past at most
``backfill_lookahead`` blocked bulks; bulks beyond that wait until the front moves.

Fulfillability
--------------
`submit` rejects at once, with `UnfulfillableBulk`, a bulk no cluster state can satisfy: more
requests than slots, a profile no host offers, or a profile whose fitting hosts are all (or too
many of them) blocklisted for the job *at submit time* - the message names the region, its
need, the cluster's capacity and the blocklisted hosts with their expiry. After submission the
blocklist never rejects a bulk: entries are temporary, so a waiting bulk that an entry blocks
waits for it to expire. Only `remove_host` re-checks waiting bulks against the smaller cluster
and rejects those that no longer fit it.

Placement
---------
Counts per class come first, cheapest class first (plain cpu work does not take gpu slots while
cheaper ones are free), exact when profiles compete (augmenting paths). Inside a class, the
class's share goes on one host if one has room (the fullest such host, keeping empty hosts
whole), else on the emptiest hosts first: a region lands on as few hosts as possible. A bulk
mixing profiles goes on a single host whenever one host fits all of it. Ties go to host order,
so every choice is deterministic. A grant lists its slots in the order of the bulk's requests.

Cost
----
C is the number of slot classes, G the number of signatures (both small: one per kind of host
and per kind of region), k a bulk's size. Host choices are bit operations on host bitsets,
O(hosts / 64) machine words.

* submit: O(k) to read the shape, O(1) fulfillability (cached per shape), then the new bulk is
  tried against the budget the last pass left (O(k * C)): no pass over the queue.
* release, cancel, add_host, lifted or expired entry: one pass, O((g + L) * k * C + G log G) for
  g grants and L = ``backfill_lookahead``. It never depends on the number of waiting bulks: it
  stops when the budget is spent, and drained sub-queues are skipped whole. The queue and the
  sub-queues are OrderedDicts (O(1) append, removal and walk from the front).
* remove_host: O(grants on the host + shapes waiting + rejected) plus one pass; waiting bulks are
  indexed by shape, so the re-check is done once per shape. Adding a host with a never-seen slot
  profile re-sorts the waiting bulks into sub-queues, O(waiting): it creates a class.
* declared requirements: O(1) per event; `overdue_jobs` is O(jobs).
"""
from __future__ import annotations

import heapq
import itertools
import time
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from reference_capacity import Demand, Placement, SlotRef, SlotTable, iter_bits

from regionflow.core.errors import SpecError
from regionflow.core.resources import ResourceProfile
from regionflow.scheduling.blocklist import DEFAULT_EXPIRY_S, BlockEntry, Blocklist, Clock
from regionflow.scheduling.errors import SchedulingError, UnfulfillableBulk
from regionflow.scheduling.fit import UnfulfillableExplainer
from regionflow.scheduling.hosts import Cluster, Host
from regionflow.scheduling.requirements import RequirementLedger, ResourceNotice, describe_counts

DEFAULT_RESOURCE_WAIT_TIMEOUT_S = 300.0
DEFAULT_BACKFILL_LOOKAHEAD = 32


@dataclass(frozen=True)
class Bulk:
    """All slot requests of one region; `label` (the region name) is used in messages."""

    bulk_id: str
    job_id: str
    label: str
    requests: tuple[ResourceProfile, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.requests, tuple):
            object.__setattr__(self, "requests", tuple(self.requests))
        if not self.requests:
            raise SchedulingError(
                f"bulk '{self.bulk_id}' (region '{self.label}') has no slot requests; a region needs at least one slot"
            )
        for request in self.requests:
            if not isinstance(request, ResourceProfile):
                raise SchedulingError(
                    f"bulk '{self.bulk_id}' (region '{self.label}'): request {request!r} is not a ResourceProfile"
                )

    @property
    def size(self) -> int:
        return len(self.requests)


@dataclass(frozen=True)
class Grant:
    """The slots given to a bulk, listed in the order of its requests."""

    bulk_id: str
    job_id: str
    label: str
    slots: tuple[SlotRef, ...]

    @property
    def hosts(self) -> tuple[str, ...]:
        """Distinct hosts of the grant, in order of first use."""
        return tuple(dict.fromkeys(slot.host for slot in self.slots))

    def to_dict(self) -> dict[str, Any]:
        return {"bulk_id": self.bulk_id, "job_id": self.job_id, "label": self.label,
                "slots": [[slot.host, slot.index] for slot in self.slots]}


@dataclass(frozen=True)
class HostLoss:
    """What `remove_host` did: grants that lost slots, bulks that no longer fit, new grants."""

    host: str
    lost_grants: list[Grant]
    rejected: list[tuple[Bulk, UnfulfillableBulk]]
    granted: list[Grant]


@dataclass(frozen=True)
class HostUsage:
    """One live host's slots and how many of them are free (for metrics and views)."""

    name: str
    slots: int
    free: int

    @property
    def used(self) -> int:
        return self.slots - self.free


class _Waiting:
    __slots__ = ("bulk", "demand", "sequence", "since", "positions", "signature")

    def __init__(self, bulk: Bulk, demand: Demand, sequence: int, since: float,
                 positions: tuple[tuple[int, ...], ...] | None) -> None:
        self.bulk = bulk
        self.demand = demand
        self.sequence = sequence
        self.since = since
        self.positions = positions  # request positions per demand item; None for one-profile bulks
        self.signature = demand.signature  # the key of the sub-queue it sits in


class _Running:
    __slots__ = ("bulk", "demand", "grant", "taken")

    def __init__(self, bulk: Bulk, demand: Demand, grant: Grant, taken: list[tuple[int, list[int]]]) -> None:
        self.bulk = bulk
        self.demand = demand
        self.grant = grant
        self.taken = taken  # (host index, slot indices)


class _PassState:
    """Per-class budgets of one pass.

    `budget[c]`: slots of class c that bulks visited from now on may take.
    `floating[c]`: reservations of blocked bulks that may sit on any host of class c.
    `pinned`: hosts (bitmask) held whole for blocked bulks with blocklist entries, whose
    reservations must sit on particular hosts; later bulks of the pass do not touch them.
    `open_free[c]`: free slots of class c outside pinned hosts.
    Invariant: budget[c] + floating[c] <= open_free[c], so every reservation stays placeable
    whatever later bulks take within their budget.
    """

    __slots__ = ("budget", "floating", "open_free", "pinned", "total", "active", "blocked", "open",
                 "last_sequence")

    def __init__(self, free: Sequence[int]) -> None:
        self.budget = list(free)
        self.floating = [0] * len(free)
        self.open_free = list(free)
        self.pinned = 0
        self.total = sum(free)
        self.active = sum(1 << klass for klass, slots in enumerate(free) if slots > 0)
        self.blocked = 0
        self.open = True
        self.last_sequence = -1

    def take_budget(self, klass: int, count: int) -> None:
        left = self.budget[klass] - count
        self.budget[klass] = left
        self.total -= count
        if left <= 0:
            self.active &= ~(1 << klass)


class SlotPool:
    """FIFO bulk slot pool over a cluster of hosts (see the module docstring for the rules)."""

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
        self._table = SlotTable()
        self._ledger = RequirementLedger()
        self._pending: OrderedDict[str, _Waiting] = OrderedDict()
        self._queues: dict[tuple[int, ...], OrderedDict[str, _Waiting]] = {}  # by signature, oldest first
        self._running: dict[str, _Running] = {}
        self._running_on_host: list[dict[str, None]] = []
        self._demands: dict[object, Demand] = {}
        self._waiting_by_shape: dict[object, dict[str, _Waiting]] = {}
        self._block_masks: dict[str, int] = {}
        self._sequence = itertools.count()
        self._frontier = _PassState(())
        self._dirty = False
        for host in hosts:
            self._add_host_record(host)
        self._frontier = _PassState(self._table.class_free)

    # ==== public API ==============================================================================

    @property
    def blocklist(self) -> Blocklist:
        """The pool's blocklist (read it freely; change it through `block` and `unblock`)."""
        return self._blocklist

    @property
    def pending_count(self) -> int:
        return len(self._pending)

    @property
    def running_count(self) -> int:
        return len(self._running)

    def submit(self, bulk: Bulk, waited_s: float = 0.0) -> list[Grant]:
        """Queue `bulk`; return the grants this made possible (it may be among them). `waited_s`: how
        long it has waited already (a pool rebuilt from a store re-submits its waiting bulks).

        Raises `UnfulfillableBulk` when no state of the cluster can ever satisfy the bulk.
        """
        self._expire_blocklist()
        self._check_new_bulk_id(bulk)
        demand, positions = self._demand_of(bulk)
        self._check_fulfillable(bulk, demand)
        waiting = _Waiting(bulk, demand, next(self._sequence), self._clock() - max(0.0, waited_s), positions)
        self._enqueue(waiting)
        if self._dirty:
            return self._run_pass()
        return self._continue_pass(waiting)

    def restore(self, bulk: Bulk, slots: Sequence[SlotRef]) -> Grant:
        """Re-take exactly `slots` for `bulk`, as granted before a restart (the executor rebuilds its
        ledger from the store). Slots on hosts that no longer exist are dropped; a slot that is
        already taken raises SchedulingError, so nothing is ever granted twice."""
        self._check_new_bulk_id(bulk)
        demand, _ = self._demand_of(bulk)
        table = self._table
        by_host: dict[int, list[int]] = {}
        for slot in slots:
            if slot.host in table.index_of and table.hosts[table.index_of[slot.host]] is not None:
                by_host.setdefault(table.index_of[slot.host], []).append(slot.index)
        taken: list[tuple[int, list[int]]] = []
        for host, indices in by_host.items():
            busy = table.take_specific(host, indices)
            if busy:
                for done_host, done in taken:
                    table.give_back(done_host, done)
                name = next(name for name, index in table.index_of.items() if index == host)
                raise SchedulingError(f"cannot restore bulk '{bulk.bulk_id}' ({bulk.label}): slot(s) {busy} of host "
                                      f"'{name}' are already taken")
            taken.append((host, sorted(indices)))
            self._running_on_host[host][bulk.bulk_id] = None
        kept = tuple(slot for slot in slots if slot.host in table.index_of)
        grant = Grant(bulk.bulk_id, bulk.job_id, bulk.label, kept)
        self._running[bulk.bulk_id] = _Running(bulk, demand, grant, taken)
        self._ledger.bulk_restored(bulk.job_id, demand)
        self._dirty = True  # the budget left by the last pass no longer holds
        return grant

    def reset(self) -> None:
        """Forget every bulk, waiting or granted; hosts and the blocklist stay. The executor then
        rebuilds the pool from its store (`restore` the live grants, `submit` the waiting bulks in order)."""
        hosts = self.hosts()
        self._table = SlotTable()
        self._ledger = RequirementLedger()
        self._pending = OrderedDict()
        self._queues = {}
        self._running = {}
        self._running_on_host = []
        self._demands = {}
        self._waiting_by_shape = {}
        self._block_masks = {}
        self._frontier = _PassState(())
        self._dirty = False
        for host in hosts:
            self._add_host_record(host)
        self._frontier = _PassState(self._table.class_free)

    def release(self, bulk_id: str) -> list[Grant]:
        """Return a granted bulk's slots; return the grants this made possible."""
        self._expire_blocklist()
        running = self._running.get(bulk_id)
        if running is None:
            raise SchedulingError(self._not_running_message(bulk_id, "release"))
        self._drop_running(running)
        return self._run_pass()

    def cancel(self, bulk_id: str) -> list[Grant]:
        """Withdraw a waiting bulk; return the grants its lifted reservation made possible."""
        self._expire_blocklist()
        waiting = self._pending.get(bulk_id)
        if waiting is None:
            if bulk_id in self._running:
                raise SchedulingError(f"bulk '{bulk_id}' is running, not waiting; release it instead of cancelling")
            raise SchedulingError(f"bulk '{bulk_id}' is not waiting (never submitted, granted or already cancelled)")
        self._dequeue(waiting)
        self._ledger.bulk_withdrawn(waiting.bulk.job_id, bulk_id, waiting.demand)
        if self._dirty or waiting.sequence <= self._frontier.last_sequence:
            return self._run_pass()
        return []

    def add_host(self, host: Host) -> list[Grant]:
        """Add a host (its slots are free at once); return the grants this made possible."""
        self._expire_blocklist()
        if host.name in self._table.index_of:
            raise SchedulingError(f"host '{host.name}' is already in the pool; remove it first or pick another name")
        self._add_host_record(host)
        return self._run_pass()

    def remove_host(self, name: str) -> HostLoss:
        """Take a host away: its grants are lost, waiting bulks that no longer fit are rejected."""
        self._expire_blocklist()
        index = self._host_index(name)
        lost = [self._running[bulk_id] for bulk_id in list(self._running_on_host[index])]
        for running in lost:
            self._drop_running(running)
        self._table.remove_host(index)
        self._refresh_block_masks()
        rejected = self._reject_unfulfillable_waiting()
        granted = self._run_pass()
        return HostLoss(name, [running.grant for running in lost], rejected, granted)

    def block(self, job_id: str, host: str, expiry_s: float | None = None) -> BlockEntry:
        """Place no new slot of `job_id` on `host` for `expiry_s` seconds (default: the pool's)."""
        self._expire_blocklist()
        entry = self._blocklist.add(job_id, host, expiry_s)
        self._refresh_block_mask(job_id)
        self._dirty = True  # an entry only ever removes options, so no grant can follow from it
        return entry

    def unblock(self, job_id: str, host: str) -> list[Grant]:
        """Lift a blocklist entry early; return the grants this made possible."""
        self._expire_blocklist()
        if self._blocklist.remove(job_id, host):
            self._refresh_block_mask(job_id)
            return self._run_pass()
        return self._run_pass() if self._dirty else []

    def poll(self) -> list[Grant]:
        """Expire blocklist entries whose time has come; return the grants this made possible."""
        self._expire_blocklist()
        return self._run_pass() if self._dirty else []

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

    def overdue_jobs(self, now: float | None = None) -> list[ResourceNotice]:
        """Not-enough-resources notices: jobs whose oldest waiting bulk waited past the grace period."""
        now = self._clock() if now is None else now
        notices = []
        for job_id, oldest in self._ledger.oldest_waiting():
            waited = now - oldest.since
            if waited >= self.resource_wait_timeout_s:
                notices.append(self._resource_notice(job_id, oldest.bulk_id, oldest.label, waited))
        return sorted(notices, key=lambda notice: -notice.waiting_s)

    def free_slots(self) -> int:
        return sum(self._table.class_free)

    def used_slots(self) -> int:
        return sum(self._table.class_capacity) - sum(self._table.class_free)

    def total_slots(self) -> int:
        return sum(self._table.class_capacity)

    def hosts(self) -> list[Host]:
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
        return bulk_id in self._pending

    def grant_of(self, bulk_id: str) -> Grant | None:
        running = self._running.get(bulk_id)
        return running.grant if running else None

    def waiting_bulks(self) -> list[Bulk]:
        """Waiting bulks, oldest first (O(waiting))."""
        return [waiting.bulk for waiting in self._pending.values()]

    def snapshot(self, max_pending: int | None = 100) -> dict[str, Any]:
        """JSON-able state for the UI: hosts, waiting bulks (oldest first), grants, blocklist."""
        now = self._clock()
        table = self._table
        pending = itertools.islice(self._pending.values(), max_pending)
        return {
            "hosts": [
                {"name": host.name, "slots": host.slots, "used": host.slots - table.free_count[index],
                 "free": table.free_count[index], "slot_profile": host.slot_profile.to_dict(),
                 "address": host.address}  # (was host.spark.master before Host lost .spark)
                for index, host in table.live()
            ],
            "pending_count": len(self._pending),
            "pending": [
                {"bulk_id": w.bulk.bulk_id, "job_id": w.bulk.job_id, "label": w.bulk.label,
                 "slots": w.demand.size, "waiting_s": now - w.since}
                for w in pending
            ],
            "running": [running.grant.to_dict() for running in self._running.values()],
            "blocklist": [
                {"job_id": entry.job_id, "host": entry.host, "expires_in_s": entry.remaining_s(now)}
                for entry in self._blocklist.entries()
            ],
            "declared": {
                job: [{"profile": profile.to_dict(), "slots": count} for profile, count in counts.items()]
                for job, counts in self._ledger.declared().items()
            },
        }

    # ==== the pass ================================================================================

    def _run_pass(self) -> list[Grant]:
        """Walk the queue from the head, granting what fits and reserving for what is blocked."""
        self._dirty = False
        state = _PassState(self._table.class_free)
        self._frontier = state
        grants: list[Grant] = []
        granted: list[_Waiting] = []
        if state.total <= 0:
            state.open = False
            return grants
        head_sequence = self._walk_head(state, grants, granted)
        if state.open and head_sequence is not None:
            self._walk_behind_head(state, head_sequence, grants, granted)
        for waiting in granted:
            self._dequeue(waiting)
        return grants

    def _walk_head(self, state: _PassState, grants: list[Grant], granted: list[_Waiting]) -> int | None:
        """Grant from the front of the queue until a bulk is blocked; that bulk, the head, reserves.

        Returns the head's sequence number, or None when the whole queue was granted.
        """
        for waiting in self._pending.values():
            grant = self._visit(waiting, state)
            if grant is None:
                return waiting.sequence
            grants.append(grant)
            granted.append(waiting)
            if not state.open:
                return waiting.sequence
        return None

    def _walk_behind_head(self, state: _PassState, head_sequence: int, grants: list[Grant],
                          granted: list[_Waiting]) -> None:
        """Backfill: the rest of the queue in submission order, as a merge of sub-queues.

        Bulks of one sub-queue share a signature (which classes each of their profiles fits). A
        sub-queue with a profile whose classes have no budget left is left out of the walk: none of
        its bulks can start in this pass, and they reserve nothing - only the head reserves for a
        profile it cannot get at all. This keeps a pass from wading through bulks that wait for a
        drained class (say, gpu) while other classes have room.
        """
        heads = []
        for signature, queue in self._queues.items():
            if _uses_only_active(signature, state.active):
                walk = iter(queue.values())
                first = _first_after(walk, head_sequence)
                if first is not None:
                    heads.append((first.sequence, signature, first, walk))
        heapq.heapify(heads)
        while heads:
            _, signature, waiting, walk = heads[0]
            if not _uses_only_active(signature, state.active):
                heapq.heappop(heads)
                continue
            grant = self._visit(waiting, state)
            if grant is not None:
                grants.append(grant)
                granted.append(waiting)
            if not state.open:
                return
            following = next(walk, None)
            if following is None:
                heapq.heappop(heads)
            else:
                heapq.heapreplace(heads, (following.sequence, signature, following, walk))

    def _continue_pass(self, waiting: _Waiting) -> list[Grant]:
        """Try a newly queued bulk against the budget the last pass left, as if the pass went on."""
        state = self._frontier
        is_head = len(self._pending) == 1
        if not state.open or not (is_head or _uses_only_active(waiting.signature, state.active)):
            return []
        grant = self._visit(waiting, state)
        if grant is None:
            return []
        self._dequeue(waiting)
        return [grant]

    def _visit(self, waiting: _Waiting, state: _PassState) -> Grant | None:
        state.last_sequence = waiting.sequence
        blocked = self._block_masks.get(waiting.bulk.job_id, 0) if self._block_masks else 0
        budget = self._budget_without(state, blocked) if blocked else state.budget
        placements = self._choose_slots(waiting.demand, budget, blocked | state.pinned)
        if placements is not None:
            self._spend(state, placements)
            grant = self._grant(waiting, placements)
        else:
            self._set_aside(state, waiting.demand, budget, blocked)
            state.blocked += 1
            grant = None
        if state.total <= 0 or state.blocked >= self._lookahead:
            state.open = False
        return grant

    def _budget_without(self, state: _PassState, blocked: int) -> list[int]:
        """The budget of a bulk that may not use the (unpinned) blocklisted hosts in `blocked`."""
        budget = state.budget[:]
        for klass, free in self._free_by_class(blocked & ~state.pinned).items():
            budget[klass] = max(0, min(budget[klass], state.open_free[klass] - free))
        return budget

    def _free_by_class(self, hosts: int) -> dict[int, int]:
        table = self._table
        free: dict[int, int] = {}
        for host in iter_bits(hosts & table.live_hosts):
            if table.free_count[host]:
                klass = table.class_of_host[host]
                free[klass] = free.get(klass, 0) + table.free_count[host]
        return free

    def _choose_slots(self, demand: Demand, budget: Sequence[int], excluded: int) -> list[Placement] | None:
        """Where the bulk's requests go, or None when the budget cannot hold the bulk."""
        table = self._table
        if len(demand.counts) > 1:
            for klass in demand.common:
                if budget[klass] >= demand.size:
                    host = table.best_fit_host(klass, demand.size, excluded)
                    if host >= 0:
                        return [(item, host, count) for item, count in enumerate(demand.counts)]
        plan = demand.assign(budget)
        if plan is None:
            return None
        if len(plan) == 1:
            item, klass, count = plan[0]
            return [(item, host, n) for host, n in table.widest_hosts(klass, count, excluded)]
        return _split_among_items(plan, table, excluded)

    def _spend(self, state: _PassState, placements: list[Placement]) -> None:
        class_of_host = self._table.class_of_host
        budget, open_free = state.budget, state.open_free
        for _, host, count in placements:
            klass = class_of_host[host]
            budget[klass] -= count
            open_free[klass] -= count
            state.total -= count
            if budget[klass] <= 0:
                state.active &= ~(1 << klass)

    def _set_aside(self, state: _PassState, demand: Demand, budget: Sequence[int], blocked: int) -> None:
        """Reserve, per class, what a blocked bulk could still use there (see module docstring)."""
        for klass, need in demand.needs:
            take = budget[klass] if budget[klass] < need else need
            if not take:
                continue
            state.take_budget(klass, take)
            if blocked:
                self._pin(state, klass, take, blocked)
            else:
                state.floating[klass] += take

    def _pin(self, state: _PassState, klass: int, count: int, blocked: int) -> None:
        """Hold whole hosts outside `blocked` for a reservation that must avoid those hosts.

        Whole hosts keep later placements simple (they just skip pinned hosts); the price is
        holding a little more than reserved, which the budget cap below accounts for.
        """
        table = self._table
        for host, _ in table.widest_hosts(klass, count, blocked | state.pinned):
            state.pinned |= 1 << host
            state.open_free[klass] -= table.free_count[host]
        cap = max(0, state.open_free[klass] - state.floating[klass])
        if state.budget[klass] > cap:
            state.take_budget(klass, state.budget[klass] - cap)

    # ==== granting and releasing ==================================================================

    def _grant(self, waiting: _Waiting, placements: list[Placement]) -> Grant:
        table = self._table
        bulk = waiting.bulk
        bulk_id = bulk.bulk_id
        running_on_host = self._running_on_host
        taken: list[tuple[int, list[int]]] = []
        for _, host, count in placements:
            taken.append((host, table.take(host, count)))
            running_on_host[host][bulk_id] = None
        if waiting.positions is None and len(taken) == 1:
            host, indices = taken[0]
            slots = tuple(map(table.slot_refs[host].__getitem__, indices))
        elif waiting.positions is None:
            slot_refs = table.slot_refs
            slots = tuple([slot_refs[host][index] for host, indices in taken for index in indices])
        else:
            slots = self._slots_in_request_order(waiting, placements, taken)
        grant = Grant(bulk_id, bulk.job_id, bulk.label, slots)
        self._running[bulk_id] = _Running(bulk, waiting.demand, grant, taken)
        self._ledger.bulk_granted(bulk.job_id, bulk_id, waiting.demand)
        return grant

    def _slots_in_request_order(self, waiting: _Waiting, placements: list[Placement],
                                taken: list[tuple[int, list[int]]]) -> tuple[SlotRef, ...]:
        """Deal each profile's slots out to the positions of that profile's requests."""
        slot_refs = self._table.slot_refs
        positions = waiting.positions
        assert positions is not None
        slots: list[SlotRef | None] = [None] * waiting.demand.size
        cursors = [0] * len(positions)
        for (item, _, _), (host, indices) in zip(placements, taken, strict=False):
            for index in indices:
                slots[positions[item][cursors[item]]] = slot_refs[host][index]
                cursors[item] += 1
        return tuple(slots)  # type: ignore[arg-type]

    def _drop_running(self, running: _Running) -> None:
        bulk_id = running.bulk.bulk_id
        del self._running[bulk_id]
        table = self._table
        running_on_host = self._running_on_host
        for host, indices in running.taken:
            table.give_back(host, indices)
            running_on_host[host].pop(bulk_id, None)
        self._ledger.slots_returned(running.bulk.job_id, running.demand)

    # ==== queue bookkeeping =======================================================================

    def _enqueue(self, waiting: _Waiting) -> None:
        bulk = waiting.bulk
        self._pending[bulk.bulk_id] = waiting
        queue = self._queues.get(waiting.signature)
        if queue is None:
            queue = self._queues[waiting.signature] = OrderedDict()
        queue[bulk.bulk_id] = waiting
        same_shape = self._waiting_by_shape.get(waiting.demand.key)
        if same_shape is None:
            same_shape = self._waiting_by_shape[waiting.demand.key] = {}
        same_shape[bulk.bulk_id] = waiting
        self._ledger.bulk_waiting(bulk.job_id, bulk.bulk_id, bulk.label, waiting.since, waiting.demand)

    def _dequeue(self, waiting: _Waiting) -> None:
        bulk_id = waiting.bulk.bulk_id
        del self._pending[bulk_id]
        queue = self._queues[waiting.signature]
        del queue[bulk_id]
        if not queue:
            del self._queues[waiting.signature]
        same_shape = self._waiting_by_shape[waiting.demand.key]
        del same_shape[bulk_id]
        if not same_shape:
            del self._waiting_by_shape[waiting.demand.key]

    def _check_new_bulk_id(self, bulk: Bulk) -> None:
        if bulk.bulk_id in self._pending or bulk.bulk_id in self._running:
            state = "waiting" if bulk.bulk_id in self._pending else "running"
            raise SchedulingError(
                f"bulk id '{bulk.bulk_id}' (region '{bulk.label}') is already {state}; give each attempt its own id"
            )

    def _not_running_message(self, bulk_id: str, action: str) -> str:
        if bulk_id in self._pending:
            return f"bulk '{bulk_id}' is still waiting, it holds no slots to {action}; cancel it instead"
        return f"bulk '{bulk_id}' holds no slots (never granted, already released, or lost with its host)"

    # ==== shapes ==================================================================================

    def _demand_of(self, bulk: Bulk) -> tuple[Demand, tuple[tuple[int, ...], ...] | None]:
        """The shared Demand of the bulk's shape, and its request positions per profile."""
        requests = bulk.requests
        first = requests[0]
        if requests.count(first) == len(requests):
            key: object = (first, len(requests))
            positions = None
            items: Sequence[tuple[ResourceProfile, int]] = ((first, len(requests)),)
        else:
            by_profile: dict[ResourceProfile, list[int]] = {}
            for position, request in enumerate(requests):
                by_profile.setdefault(request, []).append(position)
            key = frozenset((profile, len(where)) for profile, where in by_profile.items())
            demand = self._demands.get(key)
            order = demand.profiles if demand is not None else tuple(by_profile)
            positions = tuple(tuple(by_profile[profile]) for profile in order)
            items = tuple((profile, len(by_profile[profile])) for profile in order)
        demand = self._demands.get(key)
        if demand is None:
            demand = self._demands[key] = Demand(key, items)
        demand.refresh(self._table)
        return demand, positions

    # ==== fulfillability ==========================================================================

    def _check_fulfillable(self, bulk: Bulk, demand: Demand) -> None:
        table = self._table
        if demand.capacity_version != table.capacity_version:
            demand.fulfillable = demand.assign(table.class_capacity) is not None
            demand.capacity_version = table.capacity_version
        blocked = self._block_masks.get(bulk.job_id, 0)
        if demand.fulfillable and not blocked:
            return
        capacity = self._capacity_without(blocked)
        if demand.assign(capacity) is None:
            raise self._unfulfillable(bulk, demand, self._blocklist.hosts_for(bulk.job_id) if blocked else {})

    def _capacity_without(self, blocked: int) -> list[int]:
        table = self._table
        capacity = list(table.class_capacity)
        for host in iter_bits(blocked & table.live_hosts):
            capacity[table.class_of_host[host]] -= table.hosts[host].slots  # type: ignore[union-attr]
        return capacity

    def _reject_unfulfillable_waiting(self) -> list[tuple[Bulk, UnfulfillableBulk]]:
        """After a host left: reject the waiting bulks the smaller cluster can never hold."""
        table = self._table
        rejected: list[tuple[_Waiting, UnfulfillableBulk]] = []
        for key in list(self._waiting_by_shape):
            demand = self._demands[key]
            if demand.assign(table.class_capacity) is not None:
                continue
            for waiting in list(self._waiting_by_shape[key].values()):
                rejected.append((waiting, self._unfulfillable(waiting.bulk, demand, {})))
                self._dequeue(waiting)
                self._ledger.bulk_withdrawn(waiting.bulk.job_id, waiting.bulk.bulk_id, demand)
        rejected.sort(key=lambda pair: pair[0].sequence)
        return [(waiting.bulk, error) for waiting, error in rejected]

    def _unfulfillable(self, bulk: Bulk, demand: Demand, blocked_hosts: dict[str, float]) -> UnfulfillableBulk:
        message = UnfulfillableExplainer(self._table, bulk, demand, blocked_hosts, self._clock()).message()
        return UnfulfillableBulk(message, bulk_id=bulk.bulk_id, job_id=bulk.job_id, label=bulk.label)

    # ==== hosts and blocklist =====================================================================

    def _add_host_record(self, host: Host) -> None:
        if host.name in self._table.index_of:
            raise SchedulingError(f"host '{host.name}' is listed twice; host names must be unique")
        layout_before = self._table.layout_version
        self._table.add_host(host)
        self._running_on_host.append({})
        if self._table.layout_version != layout_before:
            self._regroup_waiting()
        self._refresh_block_masks()

    def _regroup_waiting(self) -> None:
        """A new slot class changes which classes a shape fits: refresh shapes, rebuild sub-queues.

        O(waiting bulks), paid only when a host with a never-seen slot profile joins.
        """
        for demand in self._demands.values():
            demand.refresh(self._table)
        self._queues = {}
        for bulk_id, waiting in self._pending.items():
            waiting.signature = waiting.demand.signature
            self._queues.setdefault(waiting.signature, OrderedDict())[bulk_id] = waiting

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
                self._refresh_block_mask(job_id)
            self._dirty = True

    def _block_mask_of(self, job_id: str) -> int:
        index_of = self._table.index_of
        mask = 0
        for host in self._blocklist.hosts_for(job_id):
            index = index_of.get(host)
            if index is not None:
                mask |= 1 << index
        return mask

    def _refresh_block_mask(self, job_id: str) -> None:
        mask = self._block_mask_of(job_id)
        if mask:
            self._block_masks[job_id] = mask
        else:
            self._block_masks.pop(job_id, None)

    def _refresh_block_masks(self) -> None:
        jobs = {entry.job_id for entry in self._blocklist.entries()} | set(self._block_masks)
        for job_id in jobs:
            self._refresh_block_mask(job_id)
        self._dirty = True

    # ==== notices =================================================================================

    def _resource_notice(self, job_id: str, bulk_id: str, label: str, waited: float) -> ResourceNotice:
        outstanding = self._ledger.outstanding(job_id)
        acquired = self._ledger.acquired(job_id)
        message = (
            f"job '{job_id}' has waited {waited:.0f} s for {describe_counts(outstanding)}, longer than "
            f"resource_wait_timeout ({self.resource_wait_timeout_s:g} s); its oldest waiting region is "
            f"'{label}'; it holds {describe_counts(acquired)}; the cluster has {self.free_slots()} of "
            f"{self.total_slots()} slots free and {len(self._pending)} bulks waiting - add hosts, lower the "
            f"parallelism or raise resource_wait_timeout"
        )
        return ResourceNotice(job_id, waited, bulk_id, label, outstanding, acquired, message)


def _uses_only_active(signature: tuple[int, ...], active: int) -> bool:
    """True when every profile of the signature fits some class in the `active` bitmask."""
    for fit_mask in signature:
        if not fit_mask & active:
            return False
    return True


def _split_among_items(plan: list[tuple[int, int, int]], table: SlotTable, excluded: int) -> list[Placement]:
    """Pick hosts once per class for the class's whole share, then deal them out to the items."""
    per_class: dict[int, list[tuple[int, int]]] = {}
    for item, klass, count in plan:
        per_class.setdefault(klass, []).append((item, count))
    placements: list[Placement] = []
    for klass, shares in per_class.items():
        hosts = table.widest_hosts(klass, sum(count for _, count in shares), excluded)
        host_at, left_on_host = 0, hosts[0][1]
        for item, count in shares:
            while count:
                take = min(count, left_on_host)
                placements.append((item, hosts[host_at][0], take))
                count -= take
                left_on_host -= take
                if not left_on_host and host_at + 1 < len(hosts):
                    host_at += 1
                    left_on_host = hosts[host_at][1]
    return placements


def _first_after(walk: Iterator[_Waiting], sequence: int) -> _Waiting | None:
    for waiting in walk:
        if waiting.sequence > sequence:
            return waiting
    return None


__all__ = ["Bulk", "Grant", "HostLoss", "HostUsage", "SlotPool", "SlotRef", "DEFAULT_RESOURCE_WAIT_TIMEOUT_S",
           "DEFAULT_BACKFILL_LOOKAHEAD"]
