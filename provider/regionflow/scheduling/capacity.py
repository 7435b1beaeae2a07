"""Free-slot bookkeeping for the slot pool: slot classes, per-host free slots, packing, matching.

Hosts whose slots offer the same `ResourceProfile` form a *slot class*. For a request, every
slot of a class is interchangeable, so the pool decides "how many slots of which class" with
plain counts and only then picks hosts inside each class. That keeps a decision independent of
the number of hosts:

* `SlotTable` holds, per class, host bitsets bucketed by free-slot count, so "the fullest host
  with room for k" (best fit) and "the emptiest hosts first" (fewest hosts) are a few bit
  operations, with ties going to the lower host index (host order). Bitset operations cost
  O(hosts / 64) machine words, i.e. constant for any realistic cluster. Each host keeps its free
  slot indices in ascending order, so a grant takes the lowest ones.
* `Demand` is the shape of a bulk (distinct request profiles with counts), shared by all bulks
  of the same shape, with the classes each profile fits (cheapest class first, so plain cpu
  work does not land on gpu hosts while cheaper slots exist).
* `Demand.assign` decides counts per (profile, class) against per-class budgets: a greedy fill,
  completed by augmenting paths when profiles compete for classes, so it is exact (it finds an
  assignment whenever one exists) in O(size x profiles x classes).
"""
from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Sequence
from typing import NamedTuple

from ..core.resources import ResourceProfile
from .hosts import Host


class SlotRef(NamedTuple):
    """One slot: the host's name and the slot's index on that host (0-based)."""

    host: str
    index: int  # type: ignore[assignment]  # a field named index shadows tuple.index; a rename would break callers


Placement = tuple[int, int, int]  # (demand item, host index, slot count)


def iter_bits(mask: int) -> Iterator[int]:
    """Indices of the set bits of `mask`, lowest first."""
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


def _offer_cost(offer: ResourceProfile) -> tuple[float, ...]:
    """Order classes cheapest first: fewer/smaller extended resources, then less memory, then cpu."""
    extended = offer.extended
    return (len(extended), sum(v for _, v in extended), offer.managed_mib, offer.off_heap_mib,
            offer.heap_mib, offer.cpu)


class SlotTable:
    """Hosts, their free slots, and slot classes. Host indices are stable and never reused."""

    def __init__(self) -> None:
        self.hosts: list[Host | None] = []
        self.index_of: dict[str, int] = {}
        self.class_of_host: list[int] = []
        self.free_count: list[int] = []
        self.free_slots: list[list[int]] = []  # free slot indices per host, ascending
        self.slot_refs: list[tuple[SlotRef, ...]] = []
        self.class_offer: list[ResourceProfile] = []
        self.class_index: dict[ResourceProfile, int] = {}
        self.class_free: list[int] = []
        self.class_capacity: list[int] = []
        self.class_hosts: list[int] = []
        self.classes_cheap_first: list[int] = []
        self.live_hosts = 0
        self._buckets: list[list[int]] = []
        self._nonempty: list[int] = []
        self.layout_version = 0
        self.capacity_version = 0

    # -- hosts ------------------------------------------------------------------------------------

    def add_host(self, host: Host) -> int:
        index = len(self.hosts)
        klass = self._class_for(host.slot_profile)
        self.hosts.append(host)
        self.index_of[host.name] = index
        self.class_of_host.append(klass)
        self.free_count.append(host.slots)
        self.free_slots.append(list(range(host.slots)))
        self.slot_refs.append(tuple(SlotRef(host.name, i) for i in range(host.slots)))
        buckets = self._buckets[klass]
        if len(buckets) <= host.slots:
            buckets.extend([0] * (host.slots + 1 - len(buckets)))
        self.class_capacity[klass] += host.slots
        self.class_free[klass] += host.slots
        self.class_hosts[klass] |= 1 << index
        self.live_hosts |= 1 << index
        self._move(index, 0, host.slots)
        self.capacity_version += 1
        return index

    def remove_host(self, index: int) -> None:
        host = self.hosts[index]
        assert host is not None
        klass = self.class_of_host[index]
        free = self.free_count[index]
        self._move(index, free, 0)
        self.class_capacity[klass] -= host.slots
        self.class_free[klass] -= free
        self.class_hosts[klass] &= ~(1 << index)
        self.live_hosts &= ~(1 << index)
        self.free_count[index] = 0
        self.free_slots[index] = []
        self.hosts[index] = None
        del self.index_of[host.name]
        self.capacity_version += 1

    def live(self) -> Iterator[tuple[int, Host]]:
        for index in iter_bits(self.live_hosts):
            host = self.hosts[index]
            assert host is not None
            yield index, host

    def _class_for(self, offer: ResourceProfile) -> int:
        klass = self.class_index.get(offer)
        if klass is not None:
            return klass
        klass = len(self.class_offer)
        self.class_index[offer] = klass
        self.class_offer.append(offer)
        self.class_free.append(0)
        self.class_capacity.append(0)
        self.class_hosts.append(0)
        self._buckets.append([0])
        self._nonempty.append(0)
        self.classes_cheap_first = sorted(range(len(self.class_offer)),
                                          key=lambda c: (_offer_cost(self.class_offer[c]), c))
        self.layout_version += 1
        return klass

    # -- taking and returning slots ---------------------------------------------------------------

    def take(self, host: int, count: int) -> list[int]:
        """Mark the `count` lowest free slots of `host` used and return their indices."""
        free_slots = self.free_slots[host]
        taken = free_slots[:count]
        del free_slots[:count]
        free = self.free_count[host]
        left = free - count
        self.free_count[host] = left
        self.class_free[self.class_of_host[host]] -= count
        self._move(host, free, left)
        return taken

    def take_specific(self, host: int, indices: Sequence[int]) -> list[int]:
        """Mark exactly `indices` of `host` used; returns those that were not free (nothing taken then)."""
        free_slots = self.free_slots[host]
        free = set(free_slots)
        busy = [index for index in indices if index not in free]
        if busy:
            return busy
        wanted = set(indices)
        free_slots[:] = [index for index in free_slots if index not in wanted]
        count = len(wanted)
        old = self.free_count[host]
        self.free_count[host] = old - count
        self.class_free[self.class_of_host[host]] -= count
        self._move(host, old, old - count)
        return []

    def give_back(self, host: int, slots: Sequence[int]) -> None:
        if self.hosts[host] is None:
            return  # the host is gone; its slots went with it
        free_slots = self.free_slots[host]
        free_slots.extend(slots)
        free_slots.sort()
        free = self.free_count[host]
        count = len(slots)
        now_free = free + count
        self.free_count[host] = now_free
        self.class_free[self.class_of_host[host]] += count
        self._move(host, free, now_free)

    def _move(self, host: int, old_free: int, new_free: int) -> None:
        klass = self.class_of_host[host]
        buckets = self._buckets[klass]
        bit = 1 << host
        if old_free:
            remaining = buckets[old_free] & ~bit
            buckets[old_free] = remaining
            if not remaining:
                self._nonempty[klass] &= ~(1 << old_free)
        if new_free:
            buckets[new_free] |= bit
            self._nonempty[klass] |= 1 << new_free

    # -- choosing hosts inside a class ------------------------------------------------------------

    def best_fit_host(self, klass: int, count: int, excluded: int) -> int:
        """The host of `klass` with the fewest free slots >= `count` (lowest index on ties), or -1."""
        buckets = self._buckets[klass]
        candidates = self._nonempty[klass] >> count << count
        while candidates:
            low = candidates & -candidates
            hosts = buckets[low.bit_length() - 1] & ~excluded
            if hosts:
                return (hosts & -hosts).bit_length() - 1
            candidates ^= low
        return -1

    def widest_hosts(self, klass: int, count: int, excluded: int) -> list[tuple[int, int]]:
        """(host, slots) covering `count` slots of `klass` on as few hosts as possible.

        The emptiest hosts go first; the last, partial host is the best fit for what is left.
        """
        chosen: list[tuple[int, int]] = []
        buckets = self._buckets[klass]
        levels = self._nonempty[klass]
        used = excluded
        while count:
            tail = self.best_fit_host(klass, count, used)
            if tail >= 0:
                chosen.append((tail, count))
                return chosen
            while levels:
                free = levels.bit_length() - 1
                hosts = buckets[free] & ~used
                if hosts:
                    break
                levels ^= 1 << free
            else:
                raise RuntimeError(
                    f"slot pool bookkeeping is inconsistent: class {klass} lacks {count} usable free slots "
                    f"its budget promised; this is a bug in regionflow, please report it"
                )
            host = (hosts & -hosts).bit_length() - 1
            chosen.append((host, free))
            used |= 1 << host
            count -= free
        return chosen


class Demand:
    """The shape of a bulk: distinct request profiles with counts, and the classes each fits."""

    __slots__ = ("profiles", "counts", "items", "size", "fits", "needs", "common", "signature",
                 "layout_version", "fulfillable", "capacity_version", "key", "single", "fit0")

    def __init__(self, key: object, items: Sequence[tuple[ResourceProfile, int]]) -> None:
        self.key = key
        self.items = tuple(items)
        self.profiles = tuple(profile for profile, _ in self.items)
        self.counts = tuple(count for _, count in self.items)
        self.size = sum(self.counts)
        self.single = len(self.counts) == 1  # one profile: `assign` is `assign_one` on `fit0`
        self.fits: tuple[tuple[int, ...], ...] = ()
        self.fit0: tuple[int, ...] = ()
        self.needs: tuple[tuple[int, int], ...] = ()
        self.common: tuple[int, ...] = ()
        self.signature: tuple[int, ...] = ()  # distinct bitmasks of the classes each profile fits
        self.layout_version = -1
        self.fulfillable = False
        self.capacity_version = -1

    def refresh(self, table: SlotTable) -> None:
        """Recompute which classes fit which profile (after a new slot class appeared)."""
        if self.layout_version == table.layout_version:
            return
        order = table.classes_cheap_first
        offers = table.class_offer
        self.fits = tuple(tuple(c for c in order if p.fits_in(offers[c])) for p in self.profiles)
        self.fit0 = self.fits[0]
        self.common = tuple(c for c in self.fits[0] if all(c in fit for fit in self.fits[1:]))
        needs: dict[int, int] = {}
        for count, fit in zip(self.counts, self.fits, strict=False):
            for klass in fit:
                needs[klass] = needs.get(klass, 0) + count
        self.needs = tuple(sorted(needs.items()))
        self.signature = tuple(sorted({sum(1 << klass for klass in fit) for fit in self.fits}))
        self.layout_version = table.layout_version

    def assign(self, budget: Sequence[int]) -> list[tuple[int, int, int]] | None:
        """(item, class, count) triples covering the demand within per-class `budget`, or None."""
        if len(self.counts) == 1:
            return assign_one(self.size, self.fits[0], budget)
        for count, fit in zip(self.counts, self.fits, strict=False):
            if sum(budget[klass] for klass in fit) < count:
                return None
        return _assign_many(self.counts, self.fits, budget)

    def max_placeable(self, budget: Sequence[int]) -> int:
        """How many of the requests could be placed at once within `budget` (for messages)."""
        room = {c: budget[c] for fit in self.fits for c in fit}
        flow: list[dict[int, int]] = [{} for _ in self.counts]
        short = list(self.counts)
        _fill_greedily(self.counts, self.fits, room, flow, short)
        for item in range(len(short)):
            while short[item] and _augment(item, self.fits, room, flow, short):
                pass
        return self.size - sum(short)


def assign_one(size: int, fit: Sequence[int], budget: Sequence[int]) -> list[tuple[int, int, int]] | None:
    """`Demand.assign` for a one-profile demand of `size` requests fitting the classes `fit`."""
    plan = []
    left = size
    for klass in fit:
        room = budget[klass]
        if room:
            take = room if room < left else left
            plan.append((0, klass, take))
            left -= take
            if not left:
                return plan
    return None


def _assign_many(counts: Sequence[int], fits: Sequence[Sequence[int]],
                 budget: Sequence[int]) -> list[tuple[int, int, int]] | None:
    room = {c: budget[c] for fit in fits for c in fit}
    flow: list[dict[int, int]] = [{} for _ in counts]
    short = list(counts)
    _fill_greedily(counts, fits, room, flow, short)
    for item in range(len(counts)):
        while short[item]:
            if not _augment(item, fits, room, flow, short):
                return None
    return [(item, klass, n) for item, per_class in enumerate(flow) for klass, n in per_class.items() if n]


def _fill_greedily(counts: Sequence[int], fits: Sequence[Sequence[int]], room: dict[int, int],
                   flow: list[dict[int, int]], short: list[int]) -> None:
    """Most constrained profile first, cheapest class first: usually already a full assignment."""
    for item in sorted(range(len(counts)), key=lambda i: (len(fits[i]), i)):
        for klass in fits[item]:
            take = min(room[klass], short[item])
            if take:
                flow[item][klass] = flow[item].get(klass, 0) + take
                room[klass] -= take
                short[item] -= take
                if not short[item]:
                    break


def _augment(start: int, fits: Sequence[Sequence[int]], room: dict[int, int],
             flow: list[dict[int, int]], short: list[int]) -> bool:
    """Move `start`'s demand along one augmenting path (item -> class <- other item -> class ...)."""
    came_from: dict[int, int] = {}   # class -> item that would move into it
    displaced_from: dict[int, int] = {}  # item -> class it would leave
    queue = deque([start])
    seen_items = {start}
    while queue:
        item = queue.popleft()
        for klass in fits[item]:
            if klass in came_from:
                continue
            came_from[klass] = item
            if room[klass] > 0:
                _push_along(start, klass, came_from, displaced_from, room, flow, short)
                return True
            for other, per_class in enumerate(flow):
                if other not in seen_items and per_class.get(klass):
                    seen_items.add(other)
                    displaced_from[other] = klass
                    queue.append(other)
    return False


def _push_along(start: int, end: int, came_from: dict[int, int], displaced_from: dict[int, int],
                room: dict[int, int], flow: list[dict[int, int]], short: list[int]) -> None:
    amount = min(short[start], room[end])
    klass = end
    item = came_from[klass]
    while item != start:
        left_class = displaced_from[item]
        amount = min(amount, flow[item][left_class])
        item = came_from[left_class]
    klass = end
    item = came_from[klass]
    while True:
        flow[item][klass] = flow[item].get(klass, 0) + amount
        if item == start:
            break
        klass = displaced_from[item]
        flow[item][klass] -= amount
        item = came_from[klass]
    room[end] -= amount
    short[start] -= amount


__all__ = ["SlotRef", "SlotTable", "Demand", "Placement", "assign_one", "iter_bits"]
