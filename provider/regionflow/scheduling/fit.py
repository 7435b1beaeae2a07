"""Which slot requests of a plan no host of a cluster can ever serve, said per vertex and per resource.

The slot pool rejects an unfulfillable bulk when it arrives; this check says the same earlier (when a
DAG is parsed, before ``regionflow run`` starts) and more precisely: the vertices whose slot sharing
group asks too much, the resource (cpu, heap_mib, off_heap_mib, managed_mib, gpu or another extended
resource), what they ask per slot and the most any host's slot offers of it. Every resource counts:
a GPU request on a cluster without GPUs fails here, as does more memory than any host's slot has.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..core.plan import DEFAULT_SLOT_SHARING_GROUP, Plan
from ..core.resources import ResourceProfile
from .hosts import Host


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
                                 f"lower the vertex's resources or add a host whose slots offer them "
                                 f"(hosts: {_offers(hosts)})")
    return list(messages.values())


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
