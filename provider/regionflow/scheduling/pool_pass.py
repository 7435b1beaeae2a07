"""The slot pool's pass: who gets slots now - FIFO with reservations and bounded backfill.

After every event that can change what is possible (release, cancel, host added or removed,
blocklist entry lifted or expired) the pool runs a *pass* over the waiting queue. Slots are
counted per *slot class* (hosts whose slots offer the same profile); the pass hands out a
per-class budget, starting from the free slots:

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

A newly submitted bulk does not start a pass: it is tried against the budget the last pass left
(`Passes.continue_with`), as if that pass went on to it. Events that invalidate that budget mark
it *dirty*, and the next event runs a full pass.

Cost: one pass is O((g + L) * k * C + G log G) for g grants, L = ``backfill_lookahead``, k a
bulk's size, C slot classes and G signatures; it never depends on the number of waiting bulks:
it stops when the budget is spent, and drained sub-queues are skipped whole.
"""
from __future__ import annotations

import heapq
from collections.abc import Sequence

from .capacity import Demand, Placement, SlotTable, assign_one
from .pool_bulks import Grant
from .pool_grants import GrantBook
from .pool_placement import BlockMasks, choose_slots, free_by_class, place_plan
from .pool_queue import Queued, WaitingQueue


class PassState:
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
        active = 0
        for klass, slots in enumerate(free):
            if slots > 0:
                active |= 1 << klass
        self.active = active
        self.blocked = 0
        self.open = True
        self.last_sequence = -1

    def take_budget(self, klass: int, count: int) -> None:
        """Remove `count` slots of class `klass` from the budget."""
        left = self.budget[klass] - count
        self.budget[klass] = left
        self.total -= count
        if left <= 0:
            self.active &= ~(1 << klass)


class Passes:
    """Runs passes over the waiting queue, granting through the grant book (see module docstring)."""

    __slots__ = ("table", "queue", "book", "masks", "lookahead", "frontier", "dirty")

    def __init__(self, table: SlotTable, queue: WaitingQueue, book: GrantBook, masks: BlockMasks,
                 lookahead: int) -> None:
        self.table = table
        self.queue = queue
        self.book = book
        self.masks = masks
        self.lookahead = lookahead
        self.frontier = PassState(table.class_free)  # the budget the last pass left
        self.dirty = False  # the frontier no longer holds: the next event runs a full pass

    def run(self) -> list[Grant]:
        """Walk the queue from the head, granting what fits and reserving for what is blocked."""
        self.dirty = False
        state = PassState(self.table.class_free)
        self.frontier = state
        grants: list[Grant] = []
        granted: list[Queued] = []
        if state.total <= 0:
            state.open = False
            return grants
        # from the front of the queue until a bulk is blocked; that bulk, the head, reserves
        visit = self._visit
        for waiting in self.queue.pending.values():
            grant = visit(waiting, state)
            if grant is None:
                break
            grants.append(grant)
            granted.append(waiting)
            if not state.open:
                break
        else:  # the whole queue was granted
            waiting = None
        if state.open and waiting is not None:
            self._walk_behind_head(state, waiting.sequence, grants, granted)
        for waiting in granted:
            self.queue.remove(waiting)
        return grants

    def continue_with(self, waiting: Queued) -> list[Grant]:
        """Try a newly queued bulk against the budget the last pass left, as if the pass went on."""
        state = self.frontier
        is_head = len(self.queue.pending) == 1
        if not state.open or not (is_head or _uses_only_active(waiting.signature, state.active)):
            return []
        grant = self._visit(waiting, state)
        if grant is None:
            return []
        self.queue.remove(waiting)
        return [grant]

    def fits_alone(self, demand: Demand, job_id: str, ignoring: str | None = None) -> bool:
        """Whether a bulk of `demand` for `job_id` would be granted at once if it were submitted now: no
        bulk waits (nothing older to serve first, no reservation; the waiting bulk `ignoring` aside) and
        the free slots outside the hosts blocklisted for the job hold it. A query: it changes nothing."""
        pending = self.queue.pending
        if pending and (len(pending) > 1 or ignoring not in pending):
            return False
        state = PassState(self.table.class_free)
        blocked = self.masks.of(job_id)
        budget = self._budget_without(state, blocked) if blocked else state.budget
        return choose_slots(self.table, demand, budget, blocked) is not None

    def _walk_behind_head(self, state: PassState, head_sequence: int, grants: list[Grant],
                          granted: list[Queued]) -> None:
        """Backfill: the rest of the queue in submission order, as a merge of sub-queues.

        Bulks of one sub-queue share a signature (which classes each of their profiles fits). A
        sub-queue with a profile whose classes have no budget left is left out of the walk: none of
        its bulks can start in this pass, and they reserve nothing - only the head reserves for a
        profile it cannot get at all. This keeps a pass from wading through bulks that wait for a
        drained class (say, gpu) while other classes have room.
        """
        heads = []
        active = state.active
        for signature, queue in self.queue.sub_queues.items():
            if _uses_only_active(signature, active):
                walk = iter(queue.values())
                for first in walk:  # the sub-queue's oldest bulk behind the head
                    if first.sequence > head_sequence:
                        heads.append((first.sequence, signature, first, walk))
                        break
        if len(heads) > 1:
            heapq.heapify(heads)
        heappop, heapreplace, visit = heapq.heappop, heapq.heapreplace, self._visit
        while heads:
            _, signature, waiting, walk = heads[0]
            if _uses_only_active(signature, state.active):
                grant = visit(waiting, state)
                if grant is not None:
                    grants.append(grant)
                    granted.append(waiting)
                if not state.open:
                    return
                following = next(walk, None)
                if following is None:
                    heappop(heads)
                else:
                    heapreplace(heads, (following.sequence, signature, following, walk))
                continue
            heappop(heads)

    def _visit(self, waiting: Queued, state: PassState) -> Grant | None:
        """Grant `waiting` from the pass's budget, or set slots aside for it.

        This is the hot path of a pass (a few visits per event), so the common case - a bulk of one
        profile whose job has no blocklist entry - decides the counts per class first (`assign_one`),
        spends them per class and only then picks hosts (`place_plan`).
        """
        state.last_sequence = waiting.sequence
        block_masks = self.masks
        masks = block_masks.masks
        blocked = (masks.get(waiting.job_id, 0) if masks else 0) | block_masks.every
        demand = waiting.demand
        budget = state.budget
        if not blocked and demand.single:
            fit = demand.fit0
            size = demand.size
            # budgets are never negative, so this is `assign_one(...) is None` without building the plan
            plan = assign_one(size, fit, budget) if sum(map(budget.__getitem__, fit)) >= size else None
            if plan is not None:
                open_free = state.open_free
                for _, klass, count in plan:  # what `_spend` does for the placements, per class at once
                    left = budget[klass] - count
                    budget[klass] = left
                    open_free[klass] -= count
                    state.total -= count
                    if left <= 0:
                        state.active &= ~(1 << klass)
                grant: Grant | None = self.book.grant(waiting, place_plan(self.table, plan, state.pinned))
            else:
                grant = None
        else:
            if blocked:
                budget = self._budget_without(state, blocked)
            placements = choose_slots(self.table, demand, budget, blocked | state.pinned)
            grant = None if placements is None else self.book.grant(waiting, self._spend(state, placements))
        if grant is None:
            self._set_aside(state, demand, budget, blocked)
            state.blocked += 1
        if state.total <= 0 or state.blocked >= self.lookahead:
            state.open = False
        return grant

    def _budget_without(self, state: PassState, blocked: int) -> list[int]:
        """The budget of a bulk that may not use the (unpinned) blocklisted hosts in `blocked`."""
        budget = state.budget[:]
        for klass, free in free_by_class(self.table, blocked & ~state.pinned).items():
            budget[klass] = max(0, min(budget[klass], state.open_free[klass] - free))
        return budget

    def _spend(self, state: PassState, placements: list[Placement]) -> list[Placement]:
        """Take granted `placements` out of the budget (and return them)."""
        class_of_host = self.table.class_of_host
        budget, open_free = state.budget, state.open_free
        for _, host, count in placements:
            klass = class_of_host[host]
            budget[klass] -= count
            open_free[klass] -= count
            state.total -= count
            if budget[klass] <= 0:
                state.active &= ~(1 << klass)
        return placements

    def _set_aside(self, state: PassState, demand: Demand, budget: Sequence[int], blocked: int) -> None:
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

    def _pin(self, state: PassState, klass: int, count: int, blocked: int) -> None:
        """Hold whole hosts outside `blocked` for a reservation that must avoid those hosts.

        Whole hosts keep later placements simple (they just skip pinned hosts); the price is
        holding a little more than reserved, which the budget cap below accounts for.
        """
        table = self.table
        for host, _ in table.widest_hosts(klass, count, blocked | state.pinned):
            state.pinned |= 1 << host
            state.open_free[klass] -= table.free_count[host]
        cap = max(0, state.open_free[klass] - state.floating[klass])
        if state.budget[klass] > cap:
            state.take_budget(klass, state.budget[klass] - cap)


def _uses_only_active(signature: tuple[int, ...], active: int) -> bool:
    """True when every profile of the signature fits some class in the `active` bitmask."""
    for fit_mask in signature:
        if not fit_mask & active:
            return False
    return True


__all__ = ["PassState", "Passes"]
