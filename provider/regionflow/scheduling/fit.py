"""Which slot requests of a plan no host of a cluster can ever serve, said per vertex and per resource;
and, for the slot pool, why a bulk can never be granted (`UnfulfillableExplainer`).

The slot pool rejects an unfulfillable bulk when it arrives; this check says the same earlier (when a
DAG is parsed, before ``regionflow run`` starts) and more precisely: the vertices whose slot sharing
group asks too much, the resource (cpu, heap_mib, off_heap_mib, managed_mib, gpu or another extended
resource), what they ask per slot and the most any host's slot offers of it. Every resource counts:
a GPU request on a cluster without GPUs fails here, as does more memory than any host's slot has.
An extended resource no host declares whose name is close to a known one (``cpus``, ``heap_mb``) gets a
"did you mean" (`core.resources.suspicious_resources`) in both messages.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from ..core.plan import DEFAULT_SLOT_SHARING_GROUP, Plan
from ..core.resources import ResourceProfile, describe_suspicious, suspicious_resources
from .capacity import Demand, SlotTable
from .hosts import Host, describe_slot_counts


class _Bulk(Protocol):
    """What the explainer reads of a pool's bulk."""

    @property
    def label(self) -> str: ...

    @property
    def job_id(self) -> str: ...


def shortfall(profile: ResourceProfile, hosts: Sequence[Host]) -> str:
    """Why no slot of `hosts` fits `profile`: each resource it asks more of than the largest slot offer
    in that resource, with that offer and its host; or, when each resource alone is offered somewhere,
    that no single host's slot has them all. Empty when a slot fits."""
    if not hosts or any(profile.fits_in(host.slot_profile) for host in hosts):
        return ""
    parts = []
    for name, asked, _ in _dimensions_short_everywhere(profile, hosts):
        best = max(hosts, key=lambda host: host.slot_profile.amount(name))
        parts.append(f"{name}: asked {asked:g} per slot, the largest slot offers {best.slot_profile.amount(name):g} "
                     f"(host '{best.name}')")
    if parts:
        return "; ".join(parts)
    return "each resource is offered by some host, but no single host's slot has all of them"


def misfits(plan: Plan, hosts: Sequence[Host]) -> list[str]:
    """One message per (vertices, profile) of `plan` whose slot request no slot of `hosts` fits,
    naming the vertices, the resource, what was asked and the largest offer. Empty when all fit."""
    verdicts: dict[ResourceProfile, str] = {}
    messages: dict[tuple[str, ResourceProfile], str] = {}
    for region in plan.regions:
        for request in plan.slot_requests(region):
            verdict = verdicts.get(request.profile)
            if verdict is None:
                verdict = verdicts[request.profile] = shortfall(request.profile, hosts)
            if not verdict:
                continue
            names = _vertices_of_group(plan, region.members, request.slot_sharing_group)
            key = (", ".join(names), request.profile)
            if key not in messages:
                who = f"vertex '{names[0]}'" if len(names) == 1 else "vertices " + ", ".join(
                    f"'{n}'" for n in names) + f" (slot sharing group '{request.slot_sharing_group}')"
                messages[key] = (f"{who} asks {request.profile.describe()} per slot, which no host offers: {verdict}; "
                                 f"{misspelt(request.profile, hosts)}lower the vertex's resources or add a host whose "
                                 f"slots offer them (hosts: {_offers(hosts)})")
    return list(messages.values())


def misspelt(profile: ResourceProfile, hosts: Iterable[Host]) -> str:
    """``resource 'cpus' is not a known name (did you mean 'cpu'?); `` for each extended resource of
    `profile` that looks like a typo of a known name or of one some host of `hosts` declares; "" if none."""
    declared = {name for host in hosts for name, _ in host.profile.extended}
    text = describe_suspicious(suspicious_resources((name for name, _ in profile.extended), declared))
    return f"{text}; " if text else ""


class UnfulfillableExplainer:
    """Builds the message of an UnfulfillableBulk: the region, its need, what the cluster has."""

    def __init__(self, table: SlotTable, bulk: _Bulk, demand: Demand, blocked_hosts: dict[str, float],
                 now: float) -> None:
        self.table = table
        self.bulk = bulk
        self.demand = demand
        self.blocked = blocked_hosts
        self.now = now

    def message(self) -> str:
        head = f"region '{self.bulk.label}' needs {self._need_text()}"
        live = list(self.table.live())
        total = sum(host.slots for _, host in live)
        if self.demand.size > total:
            return (f"{head} but the cluster has {describe_slot_counts((h.name, h.slots) for _, h in live)}; "
                    f"lower the parallelism or add hosts")
        for profile, count in self.demand.items:
            fitting = [(host.name, host.slots) for _, host in live if profile.fits_in(host.slot_profile)]
            if not fitting:
                hosts = [host for _, host in live]
                return (f"{head} but no host offers a slot that fits {profile.describe()}: "
                        f"{shortfall(profile, hosts)} (slots offered: {self._offers_text(live)}); "
                        f"{misspelt(profile, hosts)}lower the request or add a host that offers it")
            usable = [(name, slots) for name, slots in fitting if name not in self.blocked]
            if not usable:
                return (f"{head} but every host whose slots fit {profile.describe()} is blocklisted for job "
                        f"'{self.bulk.job_id}' ({self._blocked_text(name for name, _ in fitting)}); wait for the "
                        f"entries to expire, unblock them or add hosts")
            if sum(slots for _, slots in usable) < count:
                return (f"{head} but only {describe_slot_counts(usable)} fit {profile.describe()}"
                        f"{self._blocked_note(name for name, _ in fitting)}; lower the parallelism or add hosts")
        capacity = self._capacity_for_job(live)
        placeable = self.demand.max_placeable(capacity)
        return (f"{head} but at most {placeable} of these requests fit the cluster at once "
                f"({self._offers_text(live)}){self._blocked_note(self.blocked)}; lower the parallelism or add hosts")

    def _need_text(self) -> str:
        items = self.demand.items
        if len(items) == 1:
            profile, count = items[0]
            return f"{count} slot{'s' if count != 1 else ''} of {profile.describe()}"
        parts = " + ".join(f"{count} of {profile.describe()}" for profile, count in items)
        return f"{self.demand.size} slots ({parts})"

    def _offers_text(self, live: list[tuple[int, Host]]) -> str:
        offers = [f"{host.name}: {host.slots} x {host.slot_profile.describe()}" for _, host in live]
        return "; ".join(offers) or "no hosts"

    def _blocked_text(self, names: Iterable[str]) -> str:
        return ", ".join(f"{name} for another {max(0.0, self.blocked[name] - self.now):.0f} s"
                         for name in names if name in self.blocked)

    def _blocked_note(self, names: Iterable[str]) -> str:
        text = self._blocked_text(names)
        return f"; blocklisted for job '{self.bulk.job_id}': {text}" if text else ""

    def _capacity_for_job(self, live: list[tuple[int, Host]]) -> list[int]:
        capacity = [0] * len(self.table.class_offer)
        for index, host in live:
            if host.name not in self.blocked:
                capacity[self.table.class_of_host[index]] += host.slots
        return capacity


def _dimensions_short_everywhere(profile: ResourceProfile, hosts: Iterable[Host]) -> list[tuple[str, float, float]]:
    """The resources of `profile` that no host's slot offers enough of."""
    short: dict[str, tuple[str, float, float]] | None = None
    for host in hosts:
        here = {name: (name, asked, offered) for name, asked, offered in profile.exceeding(host.slot_profile)}
        short = here if short is None else {name: value for name, value in short.items() if name in here}
    return list((short or {}).values())


def _vertices_of_group(plan: Plan, members: Sequence[int], group: str) -> list[str]:
    topology = plan.topology
    names = dict.fromkeys(topology.vertex_names[topology.vertex_of(subtask)] for subtask in members)
    return [name for name in names
            if (plan.graph.vertices[name].slot_sharing_group or DEFAULT_SLOT_SHARING_GROUP) == group]


def _offers(hosts: Iterable[Host]) -> str:
    return "; ".join(f"{host.name}: {host.slots} x {host.slot_profile.describe()}" for host in hosts)
