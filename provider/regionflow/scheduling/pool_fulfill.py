"""The slot pool's fulfillability check: bulk shapes, and whether a shape can ever be served.

Bulks of the same *shape* (the same profiles with the same counts) share one `Demand`, so the
classes each profile fits and the verdict "the cluster can hold it" are computed once per shape
and cached until the cluster's capacity changes (O(1) per submit in the common case).

A bulk is *unfulfillable* when no state of the cluster can satisfy it: more requests than slots,
a profile no host offers, or a profile whose fitting hosts are all (or too many of them)
blocklisted for its job at submit time. The check is pure: it reads the `SlotTable` (the slot
supplier: host capacities per slot class), the blocklist (for the message) and a clock, and
decides; it never changes them. The message names the region, its need, the cluster's capacity
and the blocklisted hosts with their expiry (`UnfulfillableExplainer`).

After submission the blocklist never rejects a bulk (entries are temporary); only a host leaving
makes the pool re-check waiting bulks, once per shape (`never_fitting`).
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..core.resources import ResourceProfile
from .blocklist import Blocklist, Clock
from .capacity import Demand, SlotTable, iter_bits
from .errors import UnfulfillableBulk
from .fit import UnfulfillableExplainer
from .pool_bulks import Bulk

Positions = tuple[tuple[int, ...], ...]


class Fulfillability:
    """Shapes of bulks (shared `Demand`s) and the check whether a bulk can ever be granted."""

    __slots__ = ("table", "blocklist", "clock", "demands")

    def __init__(self, table: SlotTable, blocklist: Blocklist, clock: Clock) -> None:
        self.table = table
        self.blocklist = blocklist
        self.clock = clock
        self.demands: dict[object, Demand] = {}

    def demand_of(self, bulk: Bulk) -> tuple[Demand, Positions | None]:
        """The shared Demand of the bulk's shape, and its request positions per profile (None when
        all requests have one profile)."""
        requests = bulk.requests
        first = requests[0]
        if requests.count(first) == len(requests):
            key: object = (first, len(requests))
            demand = self.demands.get(key)
            if demand is not None:  # the common case: a known one-profile shape
                if demand.layout_version != self.table.layout_version:
                    demand.refresh(self.table)
                return demand, None
            positions = None
            items: Sequence[tuple[ResourceProfile, int]] = ((first, len(requests)),)
        else:
            by_profile: dict[ResourceProfile, list[int]] = {}
            for position, request in enumerate(requests):
                by_profile.setdefault(request, []).append(position)
            key = frozenset((profile, len(where)) for profile, where in by_profile.items())
            demand = self.demands.get(key)
            order = demand.profiles if demand is not None else tuple(by_profile)
            positions = tuple(tuple(by_profile[profile]) for profile in order)
            items = tuple((profile, len(by_profile[profile])) for profile in order)
        demand = self.demands.get(key)
        if demand is None:
            demand = self.demands[key] = Demand(key, items)
        demand.refresh(self.table)
        return demand, positions

    def refresh_shapes(self) -> None:
        """Recompute which classes every known shape fits (a new slot class appeared)."""
        for demand in self.demands.values():
            demand.refresh(self.table)

    def check(self, bulk: Bulk, demand: Demand, blocked: int) -> None:
        """Raise UnfulfillableBulk when no state of the cluster, without the hosts in the bitmask
        `blocked` (the job's blocklisted hosts), can hold the bulk."""
        table = self.table
        if demand.capacity_version != table.capacity_version:
            demand.fulfillable = demand.assign(table.class_capacity) is not None
            demand.capacity_version = table.capacity_version
        if demand.fulfillable and not blocked:
            return
        capacity = self.capacity_without(blocked)
        if demand.assign(capacity) is None:
            raise self.unfulfillable(bulk, demand, self.blocklist.hosts_for(bulk.job_id) if blocked else {})

    def capacity_without(self, blocked: int) -> list[int]:
        """Slots per class of the live hosts outside the bitmask `blocked`."""
        table = self.table
        capacity = list(table.class_capacity)
        for host in iter_bits(blocked & table.live_hosts):
            capacity[table.class_of_host[host]] -= table.hosts[host].slots  # type: ignore[union-attr]
        return capacity

    def never_fitting(self, shape_keys: Iterable[object]) -> list[Demand]:
        """The shapes among `shape_keys` that the cluster, as it is now, can never hold."""
        capacity = self.table.class_capacity
        return [demand for demand in (self.demands[key] for key in shape_keys) if demand.assign(capacity) is None]

    def unfulfillable(self, bulk: Bulk, demand: Demand, blocked_hosts: dict[str, float]) -> UnfulfillableBulk:
        """The error for a bulk that can never be granted, its message explaining why."""
        message = UnfulfillableExplainer(self.table, bulk, demand, blocked_hosts, self.clock()).message()
        return UnfulfillableBulk(message, bulk_id=bulk.bulk_id, job_id=bulk.job_id, label=bulk.label)


__all__ = ["Fulfillability", "Positions"]
