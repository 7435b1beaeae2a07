"""The slot pool's host choice: where a bulk's requests go, avoiding its job's blocklisted hosts.

Counts per slot class come first, cheapest class first (plain cpu work does not take gpu slots
while cheaper ones are free), exact when profiles compete (augmenting paths, `Demand.assign`).
Inside a class, the class's share goes on one host if one has room (the fullest such host,
keeping empty hosts whole), else on the emptiest hosts first: a region lands on as few hosts as
possible. A bulk mixing profiles goes on a single host whenever one host fits all of it. Ties go
to host order, so every choice is deterministic.

Hosts are bits of a bitmask (their index in the `SlotTable`): a job's blocklisted hosts are one
mask (`BlockMasks`), and host choices are bit operations, O(hosts / 64) machine words.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence

from .blocklist import EVERY_JOB, Blocklist
from .capacity import Demand, Placement, SlotTable, assign_one, iter_bits


def choose_slots(table: SlotTable, demand: Demand, budget: Sequence[int], excluded: int) -> list[Placement] | None:
    """Where the bulk's requests go - (demand item, host index, slot count) triples - within the
    per-class `budget` and outside the hosts of the bitmask `excluded`; None when the budget
    cannot hold the bulk."""
    if demand.single:
        plan = assign_one(demand.size, demand.fit0, budget)
    else:
        for klass in demand.common:
            if budget[klass] >= demand.size:
                host = table.best_fit_host(klass, demand.size, excluded)
                if host >= 0:
                    return [(item, host, count) for item, count in enumerate(demand.counts)]
        plan = demand.assign(budget)
    if plan is None:
        return None
    return place_plan(table, plan, excluded)


def place_plan(table: SlotTable, plan: list[tuple[int, int, int]], excluded: int) -> list[Placement]:
    """Hosts for a plan of (demand item, class, count) triples, outside the hosts in `excluded`."""
    if len(plan) == 1:
        item, klass, count = plan[0]
        return [(item, host, n) for host, n in table.widest_hosts(klass, count, excluded)]
    return split_among_items(plan, table, excluded)


def split_among_items(plan: list[tuple[int, int, int]], table: SlotTable, excluded: int) -> list[Placement]:
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


def free_by_class(table: SlotTable, hosts: int) -> dict[int, int]:
    """Free slots per class on the live hosts of the bitmask `hosts` (classes with none left out)."""
    free: dict[int, int] = {}
    for host in iter_bits(hosts & table.live_hosts):
        if table.free_count[host]:
            klass = table.class_of_host[host]
            free[klass] = free.get(klass, 0) + table.free_count[host]
    return free


class BlockMasks:
    """Per job, the bitmask of live hosts its own blocklist entries exclude (jobs without any left out),
    and `every`: the hosts blocked for every job (`EVERY_JOB` entries). A job's blocked hosts are its
    mask OR `every` (`of`), so an entry for every job changes one mask, not one per job."""

    __slots__ = ("table", "blocklist", "masks", "every")

    def __init__(self, table: SlotTable, blocklist: Blocklist) -> None:
        self.table = table
        self.blocklist = blocklist
        self.masks: dict[str, int] = {}
        self.every = 0

    def of(self, job_id: str) -> int:
        """The job's blocklisted hosts as a bitmask (0: none)."""
        return (self.masks.get(job_id, 0) if self.masks else 0) | self.every

    def refresh(self, job_id: str) -> None:
        """Re-read one job's entries (one was added, lifted or expired); `EVERY_JOB` re-reads `every`."""
        mask = self._mask(self.blocklist.own_hosts(job_id))
        if job_id == EVERY_JOB:
            self.every = mask
        elif mask:
            self.masks[job_id] = mask
        else:
            self.masks.pop(job_id, None)

    def refresh_all(self) -> None:
        """Re-read every job's entries (a host joined or left)."""
        for job_id in {entry.job_id for entry in self.blocklist.entries()} | set(self.masks) | {EVERY_JOB}:
            self.refresh(job_id)

    def _mask(self, hosts: Iterable[str]) -> int:
        index_of = self.table.index_of
        mask = 0
        for host in hosts:
            index = index_of.get(host)
            if index is not None:
                mask |= 1 << index
        return mask


__all__ = ["BlockMasks", "choose_slots", "free_by_class", "place_plan", "split_among_items"]
