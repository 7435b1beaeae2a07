"""Pipelined regions: logical regions over vertices, execution regions over subtasks, cycle merge.

Steps, all O(vertices + subtasks + groups):

1. Logical regions: vertices joined by pipelined edges (union-find).
2. Execution regions per logical region (seed 004): a logical region holding a pipelined all-to-all
   edge is one execution region; a pointwise-only one is split by its pipelined groups (union-find
   over subtasks; each group joins its producer range with its consumer range).
3. Region graph: nodes are the execution regions and the blocking partition groups (region ->
   group when the region produces into it, group -> region when the region consumes it), so an
   all-to-all blocking edge costs O(S + T) edges rather than O(S x T).
4. Cycle merge: Kahn's algorithm orders the graph; if anything is left, one iterative Tarjan pass
   over the whole region graph merges every strongly connected component into one region (across
   logical regions too), and its output order is the schedule order.
5. Logical regions that now share an execution region are merged, and so are logical regions that
   depend on each other in a cycle, so that one Airflow task per logical region has acyclic
   dependencies.

The graph algorithms of steps 1 to 5 (union-find, the region graph, Kahn, Tarjan) are in `region_graph`.
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import groupby, islice
from operator import eq

from .region_graph import Members, find, kahn_order, merge_components, region_group_edges, tarjan_components, union
from .topology import ExecutionEdge, ExecutionTopology, gc_paused


class Region:
    """An execution (scheduling) pipelined region: subtasks that must run together."""

    __slots__ = ("index", "members", "logical", "consumed")

    def __init__(self, index: int, members: Members, logical: int) -> None:
        self.index = index
        self.members = members  # sorted global subtask ids: a list, or a range (one subtask, or a whole region)
        self.logical = logical
        # blocking groups read from outside: (group index, whether this region also produces into it);
        # a shared tuple while it reads none or one (most regions of a large job), then a list
        self.consumed: list[tuple[int, bool]] | tuple[tuple[int, bool], ...] = ()

    def __len__(self) -> int:
        return len(self.members)

    def __repr__(self) -> str:
        return f"Region(#{self.index}, {len(self.members)} subtasks, logical={self.logical})"


@dataclass
class LogicalRegion:
    index: int
    vertices: list[int]  # vertex indices in topological order
    regions: list[int]  # execution region indices in schedule order


class RegionSet:
    """Execution regions in schedule order, their logical regions and the blocking group wiring."""

    def __init__(self, topology: ExecutionTopology, regions: list[Region], logical: list[LogicalRegion],
                 region_of: list[int], group_producers: dict[int, list[int]],
                 group_consumers: dict[int, list[int]]) -> None:
        self.topology = topology
        self.regions = regions
        self.logical = logical
        self.region_of = region_of
        self.group_producers: dict[int, list[int]] = {}  # blocking group read across regions -> producer regions
        self.group_consumers: dict[int, list[int]] = {}  # ... -> consumer regions
        self.internal_groups: dict[int, int] = {}  # blocking group produced and read inside one region -> region
        for group, producers in group_producers.items():
            self._wire_group(group, producers, group_consumers[group])

    def _wire_group(self, group: int, producers: list[int], consumers: list[int]) -> None:
        if len(producers) == 1 and producers == consumers:
            self.internal_groups[group] = producers[0]
            return
        producer_set: list[int] | set[int] | tuple[()]
        if min(consumers) > max(producers) or max(consumers) < min(producers):
            producer_set = ()  # no consumer region also produces into the group (the usual case)
        else:
            producer_set = set(producers) if len(producers) > 1 else producers
        # two entries and their one-entry tuples per group, shared by its consumers: most regions read
        # one group, and a large all-to-all group has one consumer region per subtask
        entries = ((group, False), (group, True))
        alone = ((entries[0],), (entries[1],))
        regions = self.regions
        for consumer in consumers:
            also_produces = consumer in producer_set
            region = regions[consumer]
            consumed = region.consumed
            if not consumed:
                region.consumed = alone[also_produces]
            elif isinstance(consumed, tuple):
                region.consumed = [*consumed, entries[also_produces]]
            else:
                consumed.append(entries[also_produces])
        self.group_producers[group] = producers
        self.group_consumers[group] = consumers

    def __len__(self) -> int:
        return len(self.regions)

    def __iter__(self) -> Iterator[Region]:
        return iter(self.regions)

    def region_of_subtask(self, subtask: int) -> Region:
        return self.regions[self.region_of[subtask]]


def build_regions(topology: ExecutionTopology) -> RegionSet:
    with gc_paused():
        return _build_regions(topology)


def _build_regions(topology: ExecutionTopology) -> RegionSet:
    logical_parent = _logical_regions(topology)
    ids = _shared_ids(topology, logical_parent)
    region_of, member_lists, region_logical = _execution_regions(topology, logical_parent, ids)
    group_ids, producers_of, consumers_of = region_group_edges(topology, region_of)
    order = kahn_order(len(member_lists), producers_of, consumers_of, ids)
    if order is None:
        components = tarjan_components(len(member_lists), producers_of, consumers_of)
        for component in components:
            for region in component[1:]:
                union(logical_parent, region_logical[component[0]], region_logical[region])
        region_of, member_lists = merge_components(components, member_lists, len(region_of))
        region_logical = [region_logical[component[0]] for component in components]
        group_ids, producers_of, consumers_of = region_group_edges(topology, region_of)
        order = list(range(len(member_lists)))
    _merge_cyclic_logical_regions(topology, logical_parent)
    rank = _rank(order)
    if rank is not None:
        region_of = [rank[r] for r in region_of]
        producers_of = [[rank[r] for r in regions] for regions in producers_of]
        consumers_of = [[rank[r] for r in regions] for regions in consumers_of]
        member_lists = list(map(member_lists.__getitem__, order))
        region_logical = list(map(region_logical.__getitem__, order))
    logical, logical_of_root = _number_logical_regions(topology, logical_parent)
    # each region's logical root (before step 5's merges) -> the index of its final logical region
    final = {root: logical_of_root[find(logical_parent, root)] for root in set(region_logical)}
    region_logical = list(map(final.__getitem__, region_logical))
    regions = list(map(Region, ids, member_lists, region_logical))
    for index, positions in groupby(islice(ids, len(regions)), region_logical.__getitem__):
        logical[index].regions.extend(positions)
    return RegionSet(topology, regions, logical, region_of,
                     dict(zip(group_ids, producers_of, strict=False)), dict(zip(group_ids, consumers_of, strict=False)))


def _shared_ids(topology: ExecutionTopology, logical_parent: list[int]) -> Sequence[int]:
    """One int object per id, shared by every list that holds subtask ids or region indices
    (region_of, members, the order, Region.index), when most subtasks are regions of their own: a
    large job otherwise makes each of those lists allocate its own ints, and the fresh memory costs
    more than the work (page faults). A job of few large regions keeps a range (no list to build)."""
    sizes: dict[int, int] = {}
    for root in logical_parent:
        sizes[root] = sizes.get(root, 0) + 1
    alone = sum(topology.parallelism[v] for v, root in enumerate(logical_parent) if sizes[root] == 1)
    ids = range(topology.subtask_count + 1)
    return list(ids) if 2 * alone >= topology.subtask_count else ids


def _rank(order: list[int]) -> list[int] | None:
    """Position of each old region index in `order`, or None when the order is the identity."""
    if all(map(eq, order, range(len(order)))):
        return None
    rank = [0] * len(order)
    for position, old in enumerate(order):
        rank[old] = position
    return rank


# ---- step 1: logical regions ------------------------------------------------------------------


def _logical_regions(topology: ExecutionTopology) -> list[int]:
    """Union-find parents over vertex indices, fully compressed: parent[v] is v's logical root."""
    parent = list(range(len(topology.vertex_names)))
    for exec_edge in topology.edges:
        if not exec_edge.blocking:
            union(parent, exec_edge.src, exec_edge.dst)
    for vertex in range(len(parent)):
        find(parent, vertex)
    return parent


# ---- step 2: execution regions ----------------------------------------------------------------


def _execution_regions(topology: ExecutionTopology, logical_of_vertex: list[int],
                       ids: Sequence[int]) -> tuple[list[int], list[Members], list[int]]:
    """Assign every subtask a region; return (region_of, member lists, logical root per region)."""
    vertices_by_logical: dict[int, list[int]] = {}
    for vertex, root in enumerate(logical_of_vertex):
        vertices_by_logical.setdefault(root, []).append(vertex)
    pipelined_by_logical: dict[int, list[ExecutionEdge]] = {}
    for exec_edge in topology.edges:
        if not exec_edge.blocking:
            pipelined_by_logical.setdefault(logical_of_vertex[exec_edge.src], []).append(exec_edge)
    region_of = [0] * topology.subtask_count
    member_lists: list[Members] = []
    region_logical: list[int] = []
    for root, vertices in vertices_by_logical.items():
        pipelined = pipelined_by_logical.get(root, [])
        if len(vertices) == 1:
            _singleton_regions(topology, vertices[0], root, region_of, member_lists, region_logical, ids)
        elif any(e.all_to_all for e in pipelined):
            _whole_region(topology, vertices, root, region_of, member_lists, region_logical)
        else:
            _pointwise_regions(topology, vertices, pipelined, root, region_of, member_lists, region_logical)
    return region_of, member_lists, region_logical


def _singleton_regions(topology: ExecutionTopology, vertex: int, root: int, region_of: list[int],
                       member_lists: list[Members], region_logical: list[int], ids: Sequence[int]) -> None:
    first = len(member_lists)
    lo, hi = topology.offsets[vertex], topology.offsets[vertex + 1]
    region_of[lo:hi] = ids[first:first + hi - lo]
    # range(s, s + 1) for each subtask s: no new int (both ends come from `ids`), and unlike a one-item
    # list a range is not tracked by the garbage collector, which otherwise scans every one after the build
    member_lists.extend(map(range, ids[lo:hi], ids[lo + 1:hi + 1]))
    region_logical.extend([root] * (hi - lo))


def _whole_region(topology: ExecutionTopology, vertices: list[int], root: int, region_of: list[int],
                  member_lists: list[Members], region_logical: list[int]) -> None:
    index = len(member_lists)
    ordered = sorted(vertices)
    for vertex in ordered:
        lo, hi = topology.offsets[vertex], topology.offsets[vertex + 1]
        region_of[lo:hi] = [index] * (hi - lo)
    if ordered[-1] - ordered[0] == len(ordered) - 1:  # consecutive vertices: their ids form one range
        members: range | list[int] = range(topology.offsets[ordered[0]], topology.offsets[ordered[-1] + 1])
    else:
        members = [s for vertex in ordered for s in range(topology.offsets[vertex], topology.offsets[vertex + 1])]
    member_lists.append(members)
    region_logical.append(root)


def _pointwise_regions(topology: ExecutionTopology, vertices: list[int], pipelined: list[ExecutionEdge], root: int,
                       region_of: list[int], member_lists: list[Members], region_logical: list[int]) -> None:
    # region_of doubles as the union-find parent array over subtask ids until regions are numbered
    parent = region_of
    for vertex in vertices:
        lo, hi = topology.offsets[vertex], topology.offsets[vertex + 1]
        parent[lo:hi] = range(lo, hi)
    for exec_edge in pipelined:
        for group in topology.groups[exec_edge.group_lo:exec_edge.group_hi]:
            anchor = group.prod_lo
            for subtask in range(group.prod_lo + 1, group.prod_hi):
                union(parent, anchor, subtask)
            for subtask in range(group.cons_lo, group.cons_hi):
                union(parent, anchor, subtask)
    index_of_root: dict[int, int] = {}
    ordered = sorted(vertices)
    roots = [find(parent, s) for v in ordered for s in range(topology.offsets[v], topology.offsets[v + 1])]
    subtasks = [s for v in ordered for s in range(topology.offsets[v], topology.offsets[v + 1])]
    built: dict[int, list[int]] = {}  # index -> the member list being built
    for subtask, rep in zip(subtasks, roots, strict=True):
        index = index_of_root.get(rep)
        if index is None:
            index = index_of_root[rep] = len(member_lists)
            built[index] = [subtask]
            member_lists.append(built[index])
            region_logical.append(root)
        else:
            built[index].append(subtask)
        region_of[subtask] = index
    for members in built.values():
        members.sort()


# ---- step 5: logical regions for Airflow -------------------------------------------


def _merge_cyclic_logical_regions(topology: ExecutionTopology, logical_parent: list[int]) -> None:
    """Merge logical regions that depend on each other in a cycle (vertex level, cheap)."""
    roots = sorted({find(logical_parent, v) for v in range(len(logical_parent))})
    position = {root: i for i, root in enumerate(roots)}
    producers: list[list[int]] = []
    consumers: list[list[int]] = []
    for exec_edge in topology.edges:
        src = position[find(logical_parent, exec_edge.src)]
        dst = position[find(logical_parent, exec_edge.dst)]
        if exec_edge.blocking and src != dst:
            producers.append([src])
            consumers.append([dst])
    if kahn_order(len(roots), producers, consumers) is not None:
        return
    for component in tarjan_components(len(roots), producers, consumers):
        for member in component[1:]:
            union(logical_parent, roots[component[0]], roots[member])


def _number_logical_regions(topology: ExecutionTopology,
                            logical_parent: list[int]) -> tuple[list[LogicalRegion], dict[int, int]]:
    """Logical regions numbered by their first vertex (their region lists still empty), and the index
    of each logical root."""
    index_of_root: dict[int, int] = {}
    logical: list[LogicalRegion] = []
    for vertex in range(len(topology.vertex_names)):
        root = find(logical_parent, vertex)
        if root not in index_of_root:
            index_of_root[root] = len(logical)
            logical.append(LogicalRegion(len(logical), [], []))
        logical[index_of_root[root]].vertices.append(vertex)
    return logical, index_of_root
