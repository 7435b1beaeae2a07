"""The slot pool's grant book: which granted bulk holds which slots on which host.

The book takes slots from the `SlotTable` when a bulk is granted (or restored after a restart),
gives them back when it is released or its host is lost, and keeps the requirement ledger's
acquired counts (FLIP-138) in step. Grants list their slots in the order of the bulk's requests.
Each host has an index of the bulks holding slots on it, so losing a host costs O(its grants).
"""
from __future__ import annotations

from collections.abc import Sequence

from .capacity import Demand, Placement, SlotRef, SlotTable
from .errors import SchedulingError
from .pool_bulks import Bulk, Grant
from .pool_queue import Queued
from .requirements import RequirementLedger


class Held:
    """A granted bulk: its shape, its grant and the slots it took, as (host index, slot indices)."""

    __slots__ = ("bulk", "demand", "grant", "taken")

    def __init__(self, bulk: Bulk, demand: Demand, grant: Grant, taken: list[tuple[int, list[int]]]) -> None:
        self.bulk = bulk
        self.demand = demand
        self.grant = grant
        self.taken = taken


class GrantBook:
    """Granted bulks by id and by host; takes and returns their slots in the table."""

    __slots__ = ("table", "ledger", "running", "on_host")

    def __init__(self, table: SlotTable, ledger: RequirementLedger) -> None:
        self.table = table
        self.ledger = ledger
        self.running: dict[str, Held] = {}
        self.on_host: list[dict[str, None]] = []  # per host index: ids of the bulks holding slots there

    def host_added(self) -> None:
        """Open the per-host index of a host just added to the table."""
        self.on_host.append({})

    def grant(self, waiting: Queued, placements: list[Placement]) -> Grant:
        """Take the slots of `placements` for a waiting bulk and record its grant."""
        table = self.table
        bulk = waiting.bulk
        bulk_id = bulk.bulk_id
        on_host = self.on_host
        taken: list[tuple[int, list[int]]] = []
        for _, host, count in placements:
            taken.append((host, table.take(host, count)))
            on_host[host][bulk_id] = None
        if waiting.positions is None and len(taken) == 1:
            host, indices = taken[0]
            slots = tuple(map(table.slot_refs[host].__getitem__, indices))
        elif waiting.positions is None:
            slot_refs = table.slot_refs
            listed: list[SlotRef] = []
            for host, indices in taken:
                listed.extend(map(slot_refs[host].__getitem__, indices))
            slots = tuple(listed)
        else:
            slots = self._slots_in_request_order(waiting, placements, taken)
        grant = Grant(bulk_id, waiting.job_id, bulk.label, slots)
        self.running[bulk_id] = Held(bulk, waiting.demand, grant, taken)
        self.ledger.bulk_granted(bulk.job_id, bulk_id, waiting.demand)
        return grant

    def restore(self, bulk: Bulk, demand: Demand, slots: Sequence[SlotRef]) -> Grant:
        """Re-take exactly `slots` (those on hosts still in the table); SchedulingError if one is taken."""
        table = self.table
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
            self.on_host[host][bulk.bulk_id] = None
        kept = tuple(slot for slot in slots if slot.host in table.index_of)
        grant = Grant(bulk.bulk_id, bulk.job_id, bulk.label, kept)
        self.running[bulk.bulk_id] = Held(bulk, demand, grant, taken)
        self.ledger.bulk_restored(bulk.job_id, demand)
        return grant

    def drop(self, held: Held) -> None:
        """Give a granted bulk's slots back (released, or lost with one of its hosts)."""
        bulk_id = held.bulk.bulk_id
        del self.running[bulk_id]
        table = self.table
        on_host = self.on_host
        for host, indices in held.taken:
            table.give_back(host, indices)
            on_host[host].pop(bulk_id, None)
        self.ledger.slots_returned(held.bulk.job_id, held.demand)

    def holding(self, host: int) -> list[Held]:
        """The granted bulks with slots on host `host`, oldest grant first."""
        return [self.running[bulk_id] for bulk_id in list(self.on_host[host])]

    def _slots_in_request_order(self, waiting: Queued, placements: list[Placement],
                                taken: list[tuple[int, list[int]]]) -> tuple[SlotRef, ...]:
        """Deal each profile's slots out to the positions of that profile's requests."""
        slot_refs = self.table.slot_refs
        positions = waiting.positions
        assert positions is not None
        slots: list[SlotRef | None] = [None] * waiting.demand.size
        cursors = [0] * len(positions)
        for (item, _, _), (host, indices) in zip(placements, taken, strict=False):
            for index in indices:
                slots[positions[item][cursors[item]]] = slot_refs[host][index]
                cursors[item] += 1
        return tuple(slots)  # type: ignore[arg-type]


__all__ = ["GrantBook", "Held"]
