"""The Plan: what every later layer reads about a job under one exchange mode.

A `Plan` bundles the validated graph, the execution topology, the regions in schedule order and each
region's slot request. Slot sharing (FLIP-53): all vertices of a region share slots unless a vertex
names a slot sharing group; a region asks, per group, for as many slots as the largest number of
subtasks one vertex of the group has in the region, each slot sized to the sum of the group's vertex
resources. The job's minimum slots is the largest region demand. A plan is rebuilt deterministically
from ``(job spec, mode)`` in O(n), so that pair (`Plan.reference`) is what crosses process boundaries.
"""
from __future__ import annotations

import hashlib
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import chain
from typing import Any

from .adaptive import apply, decided
from .errors import ResourceError
from .graph import Edge, JobGraph
from .modes import ExchangeMode
from .regions import Region, RegionSet, build_regions
from .resources import UNKNOWN, ResourceProfile
from .topology import ExecutionTopology

DEFAULT_SLOT_SHARING_GROUP = "default"
# the longest region task id (Airflow's limit is 250; the transformer appends suffixes such as "__speculation")
MAX_TASK_ID = 200


def graph_of_reference(reference: Mapping[str, Any]) -> JobGraph:
    """The job graph of a `Plan.reference`, its adaptive vertices at their decided parallelism."""
    return apply(JobGraph.from_spec(reference["job"]), reference.get("parallelism") or {})


@dataclass(frozen=True)
class SlotRequest:
    """`count` slots, each offering at least `profile`, for one slot sharing group of a region."""

    slot_sharing_group: str
    count: int
    profile: ResourceProfile

    def expand(self) -> tuple[ResourceProfile, ...]:
        return (self.profile,) * self.count


@dataclass(frozen=True)
class Shard:
    """Consecutive execution regions of one logical region run by one Spark submission: in schedule
    order, `width` of them at a time, each with its own share of the shard's slots."""

    logical: int
    index: int  # position among the shards of its logical region
    regions: tuple[int, ...]


class Plan:
    def __init__(self, graph: JobGraph, mode: ExchangeMode | str | None = None) -> None:
        self.topology = ExecutionTopology(graph, mode if mode is not None else graph.default_mode)
        self.graph = graph
        self.mode = self.topology.mode
        _check_resource_declarations(graph)
        self.region_set: RegionSet = build_regions(self.topology)
        self._requests: dict[int, tuple[SlotRequest, ...]] = {}
        self._requests_by_shape: dict[tuple[Any, ...], tuple[SlotRequest, ...]] = {}

    @classmethod
    def from_reference(cls, reference: Mapping[str, Any]) -> Plan:
        return cls(graph_of_reference(reference), reference.get("mode"))

    @property
    def reference(self) -> dict[str, Any]:
        """The job spec (without functions), the mode, and adaptive vertices' decided parallelism."""
        reference: dict[str, Any] = {"job": self.graph.to_spec(), "mode": self.mode.value}
        decisions = decided(self.graph)
        if decisions:
            reference["parallelism"] = decisions
        return reference

    @property
    def regions(self) -> list[Region]:
        return self.region_set.regions

    @cached_property
    def regions_at_max(self) -> list[int]:
        """Each logical region's region count (by logical region index) with every adaptive vertex at its declared
        max (`core.keygroups`: which regions may run as several shards). One plan for all of them: a logical
        region's regions follow from its own vertices' parallelism alone (edges between logical regions are
        blocking), so setting the others' does not change its count, and the plan at max has the same logical
        regions, found by any of their vertices."""
        vertices = self.graph.vertices
        tops = {name: span[1] for name, vertex in vertices.items() if (span := vertex.parallelism_range)}
        at_max = self if all(vertices[n].parallelism == top for n, top in tops.items()) else \
            Plan(apply(self.graph, tops), self.mode)
        logical_at_max, of = at_max.region_set.logical, at_max.logical_of_vertex
        return [len(logical_at_max[of[logical.vertices[0]]].regions) for logical in self.region_set.logical]

    @cached_property
    def logical_of_vertex(self) -> list[int]:
        """Each vertex's logical region, by vertex index."""
        of = [0] * len(self.topology.vertex_names)
        for logical in self.region_set.logical:
            for vertex in logical.vertices:
                of[vertex] = logical.index
        return of

    # ---- names ------------------------------------------------------------------------------------

    def logical_region_name(self, logical: int) -> str:
        return self._logical_names[logical]

    @cached_property
    def _logical_names(self) -> list[str]:
        names = self.topology.vertex_names
        return ["+".join(names[v] for v in logical.vertices) for logical in self.region_set.logical]

    def region_task_id(self, logical: int) -> str:
        """The id of the task that runs logical region `logical` once a DAG is transformed: its vertex
        names joined by ``__`` (``source__count``). Longer than `MAX_TASK_ID` (Airflow allows 250
        characters; the transformer appends suffixes such as ``__speculation``): the first and last
        vertex with the count between (``step00__88_more__step89``), unique since a vertex is in one
        region, and cut with a digest of the whole name where even that is too long."""
        names = [self.topology.vertex_names[v] for v in self.region_set.logical[logical].vertices]
        joined = "__".join(names)
        if len(joined) <= MAX_TASK_ID:
            return joined
        short = f"{names[0]}__{len(names) - 2}_more__{names[-1]}"
        if len(short) <= MAX_TASK_ID:
            return short
        return f"{joined[:MAX_TASK_ID - 10]}__{hashlib.sha1(joined.encode()).hexdigest()[:8]}"

    def region_name(self, region: Region) -> str:
        """``<logical name>[k]``: the k-th execution region of its logical region."""
        first, positions = self._sibling_positions[region.logical]
        position = region.index - first if positions is None else positions[region.index]
        return f"{self._logical_names[region.logical]}[{position}]"

    @cached_property
    def _sibling_positions(self) -> list[tuple[int, dict[int, int] | None]]:
        """Per logical region: its first region, and each region's position among its siblings
        unless they are contiguous (then the position is index - first)."""
        return [(logical.regions[0] if logical.regions else 0,
                 None if not logical.regions or _is_contiguous(logical.regions)
                 else {index: position for position, index in enumerate(logical.regions)})
                for logical in self.region_set.logical]

    def subtask_names(self, region: Region) -> list[str]:
        return [self.topology.subtask_name(s) for s in region.members]

    # ---- edges --------------------------------------------------------------------------------------

    @cached_property
    def blocking_edges(self) -> list[Edge]:
        return [e.edge for e in self.topology.edges if e.blocking]

    # ---- slots --------------------------------------------------------------------------------------

    def slot_requests(self, region: Region) -> tuple[SlotRequest, ...]:
        members = region.members
        if len(members) == 1:  # one subtask: its vertex's shape, shared by all such regions of the vertex
            vertex = self.topology.vertex_of(members[0])
            requests = self._requests_by_shape.get(((vertex, 1),))
            if requests is None:
                requests = self._requests_by_shape[((vertex, 1),)] = self._requests_for_shape({vertex: 1})
            return requests
        cached = self._requests.get(region.index)
        if cached is None:
            cached = self._requests[region.index] = self._compute_requests(region)
        return cached

    def slots(self, region: Region) -> int:
        if len(region.members) == 1:
            return 1
        return sum(request.count for request in self.slot_requests(region))

    @cached_property
    def min_slots(self) -> int:
        # only regions of several subtasks need their requests worked out: a one-subtask region
        # needs one slot, and every region at least one
        return max((self.slots(region) for region in self.regions if len(region.members) > 1), default=1)

    def _compute_requests(self, region: Region) -> tuple[SlotRequest, ...]:
        # regions of one logical region mostly share a shape (subtasks per vertex): compute it once
        shape = tuple(self.vertex_counts(region).items())
        requests = self._requests_by_shape.get(shape)
        if requests is None:
            requests = self._requests_by_shape[shape] = self._requests_for_shape(dict(shape))
        return requests

    def _requests_for_shape(self, counts: dict[int, int]) -> tuple[SlotRequest, ...]:
        largest: dict[str, int] = {}
        profile: dict[str, ResourceProfile] = {}
        for vertex_index, count in counts.items():
            vertex = self.graph.vertices[self.topology.vertex_names[vertex_index]]
            group = vertex.slot_sharing_group or DEFAULT_SLOT_SHARING_GROUP
            largest[group] = max(largest.get(group, 0), count)
            profile[group] = profile[group] + vertex.resources if group in profile else vertex.resources
        return tuple(SlotRequest(group, largest[group], profile[group]) for group in largest)

    def vertex_counts(self, region: Region) -> dict[int, int]:
        """Number of subtasks per vertex index in `region`. Members are sorted and each vertex's
        subtasks are contiguous ids, so bisecting the vertex boundaries counts in O(V log n)."""
        members, offsets = region.members, self.topology.offsets
        first, last = self.topology.vertex_of(members[0]), self.topology.vertex_of(members[-1])
        if first == last:
            return {first: len(members)}
        counts: dict[int, int] = {}
        for vertex in range(first, last + 1):
            count = bisect_left(members, offsets[vertex + 1]) - bisect_left(members, offsets[vertex])
            if count:
                counts[vertex] = count
        return counts

    def managed_memory_fractions(self, region: Region) -> dict[str, float]:
        """FLIP-53: each vertex's share of its slot's managed memory. Specified: its managed memory
        over the group's; unknown: an equal share among the group's vertices in the region."""
        members: dict[str, list[str]] = {}
        for vertex_index in self.vertex_counts(region):
            name = self.topology.vertex_names[vertex_index]
            group = self.graph.vertices[name].slot_sharing_group or DEFAULT_SLOT_SHARING_GROUP
            members.setdefault(group, []).append(name)
        fractions: dict[str, float] = {}
        for names in members.values():
            total = sum(self.graph.vertices[n].resources.managed_mib for n in names)
            for name in names:
                resources = self.graph.vertices[name].resources
                if resources.unknown or total == 0:
                    fractions[name] = 1.0 / len(names)
                else:
                    fractions[name] = resources.managed_mib / total
        return fractions

    # ---- shards ---------------------------------------------------------------------------------------

    def shards(self, max_shards: int | None = None) -> list[Shard]:
        """Each logical region's execution regions cut into at most `max_shards` chunks of near-equal
        size (None: one shard per region), listed in schedule order of their first region."""
        if max_shards is not None and max_shards < 1:
            raise ResourceError(f"max_shards is {max_shards}; it must be at least 1")
        shards: list[Shard] = []
        for logical in self.region_set.logical:
            regions = logical.regions
            count = len(regions) if max_shards is None else min(len(regions), max_shards)
            for index in range(count):
                chunk = regions[index * len(regions) // count:(index + 1) * len(regions) // count]
                shards.append(Shard(logical.index, index, tuple(chunk)))
        shards.sort(key=lambda shard: shard.regions[0])
        return shards

    def shard_name(self, shard: Shard) -> str:
        if len(shard.regions) == 1:
            return self.region_name(self.regions[shard.regions[0]])
        return f"{self.logical_region_name(shard.logical)}[shard {shard.index}: {len(shard.regions)} regions]"

    def shard_requests(self, shard: Shard, width: int = 1) -> tuple[SlotRequest, ...]:
        """Slot requests of a shard running `width` regions at a time: its largest region's requests,
        `width` times over (capped by the number of regions)."""
        largest = max((self.regions[r] for r in shard.regions), key=self.slots)
        width = max(1, min(width, len(shard.regions)))
        return tuple(SlotRequest(r.slot_sharing_group, r.count * width, r.profile) for r in self.slot_requests(largest))

    # ---- rendering ------------------------------------------------------------------------------------

    def to_dict(self, inputs: bool = False) -> dict[str, Any]:
        data: dict[str, Any] = {
            "job": self.graph.name,
            "mode": self.mode.value,
            "logical_regions": [
                [self.topology.vertex_names[v] for v in logical.vertices] for logical in self.region_set.logical
            ],
            "regions": [self.subtask_names(region) for region in self.regions],
            "region_names": [self.region_name(region) for region in self.regions],
            "region_count": len(self.regions),
            "blocking_edges": [_edge_dict(edge) for edge in self.blocking_edges],
            "min_slots": self.min_slots,
            "slots": [self.slots(region) for region in self.regions],
            "slot_requests": [
                [{"slot_sharing_group": r.slot_sharing_group, "count": r.count, "profile": r.profile.to_dict()}
                 for r in self.slot_requests(region)]
                for region in self.regions
            ],
        }
        if inputs:
            data["inputs"] = self.inputs_dict()
        return data

    def inputs_dict(self) -> dict[str, dict[str, list[str]]]:
        """For every subtask, the producer subtasks it reads, per input edge (keyed ``src->dst``)."""
        topology = self.topology
        pairs = [(e.src, e.dst) for e in self.graph.edges]
        result: dict[str, dict[str, list[str]]] = {}
        for subtask in range(topology.subtask_count):
            reads = {}
            for exec_edge, producers in topology.inputs_of(subtask):
                edge = exec_edge.edge
                key = f"{edge.src}->{edge.dst}"
                if pairs.count((edge.src, edge.dst)) > 1:
                    key += f" (edge {exec_edge.index}, {edge.distribution.name})"
                reads[key] = [topology.subtask_name(p) for p in producers]
            result[topology.subtask_name(subtask)] = reads
        return result

    def to_text(self, inputs: bool = False, max_regions: int = 200) -> str:
        lines = [
            f"job {self.graph.name}: mode {self.mode.value}, {self.topology.subtask_count} subtasks, "
            f"{len(self.regions)} regions, {len(self.blocking_edges)} blocking edges, min slots {self.min_slots}",
            "",
            "logical regions:",
        ]
        for logical in self.region_set.logical:
            lines.append(f"  {self.logical_region_name(logical.index)}: {len(logical.regions)} execution region(s)")
        if self.blocking_edges:
            lines += ["", "blocking edges:"] + [f"  {edge.label}" for edge in self.blocking_edges]
        lines += ["", f"{'#':>5}  {'region':<28} {'slots':>5}  subtasks"]
        for region in self.regions[:max_regions]:
            lines.append(f"{region.index:>5}  {self.region_name(region):<28} {self.slots(region):>5}  "
                         f"{compact_subtasks(self.topology, region.members)}")
        if len(self.regions) > max_regions:
            lines.append(f"  ... {len(self.regions) - max_regions} more regions (use --format json for all)")
        if inputs:
            lines += ["", "inputs:"]
            for subtask, reads in self.inputs_dict().items():
                for edge, producers in reads.items():
                    lines.append(f"  {subtask} <- {edge}: {', '.join(producers)}")
        return "\n".join(lines)


def compact_subtasks(topology: ExecutionTopology, members: Sequence[int]) -> str:
    """``A#0, B#0..3``: consecutive subtasks of one vertex folded into a range."""
    parts: list[str] = []
    start = previous = members[0]
    for subtask in chain(members[1:], [None]):
        if subtask is not None and subtask == previous + 1 and topology.vertex_of(subtask) == topology.vertex_of(start):
            previous = subtask
            continue
        first = topology.subtask_name(start)
        parts.append(first if start == previous else f"{first}..{previous - start + int(first.rpartition('#')[2])}")
        if subtask is not None:
            start = previous = subtask
    return ", ".join(parts)


def _edge_dict(edge: Edge) -> dict[str, Any]:
    return {"src": edge.src, "dst": edge.dst, "distribution": edge.distribution.name}


def _is_contiguous(indices: list[int]) -> bool:
    return indices[-1] - indices[0] == len(indices) - 1


def _check_resource_declarations(graph: JobGraph) -> None:
    """FLIP-53: either every vertex declares resources or none does."""
    specified = [v.name for v in graph.vertices.values() if not v.resources.unknown]
    unknown = [v.name for v in graph.vertices.values() if v.resources.unknown]
    if specified and unknown:
        raise ResourceError(
            f"vertices {', '.join(specified)} declare resources but {', '.join(unknown)} do not; "
            "declare resources on every vertex or on none"
        )


__all__ = ["Plan", "Shard", "SlotRequest", "DEFAULT_SLOT_SHARING_GROUP", "compact_subtasks", "UNKNOWN"]
