"""The graph algorithms under `regions.build_regions`: union-find (steps 1, 2 and 5), the region graph
through blocking partition groups (step 3), its order by Kahn's algorithm and the merge of its strongly
connected components found by one iterative Tarjan pass (step 4). Pure Python, over plain int lists.
"""
from __future__ import annotations

from collections.abc import Sequence
from itertools import compress
from operator import eq, not_

from .topology import ExecutionTopology

Members = list[int] | range  # a region's sorted subtask ids (a range for one subtask or a whole region)


# ---- union-find ---------------------------------------------------------------------------------


def find(parent: list[int], node: int) -> int:
    while parent[node] != node:
        parent[node] = parent[parent[node]]
        node = parent[node]
    return node


def union(parent: list[int], a: int, b: int) -> None:
    ra, rb = find(parent, a), find(parent, b)
    if ra != rb:
        parent[max(ra, rb)] = min(ra, rb)


# ---- step 3: region graph through blocking groups ---------------------------------------------


def region_group_edges(topology: ExecutionTopology,
                        region_of: list[int]) -> tuple[list[int], list[list[int]], list[list[int]]]:
    """Blocking group ids with, for each, its distinct producer regions and consumer regions."""
    group_ids: list[int] = []
    producers_of: list[list[int]] = []
    consumers_of: list[list[int]] = []
    for exec_edge in topology.edges:
        if not exec_edge.blocking:
            continue
        for group in topology.groups[exec_edge.group_lo:exec_edge.group_hi]:
            group_ids.append(group.index)
            producers_of.append(_distinct(region_of, group.prod_lo, group.prod_hi))
            consumers_of.append(_distinct(region_of, group.cons_lo, group.cons_hi))
    return group_ids, producers_of, consumers_of


def _distinct(region_of: list[int], lo: int, hi: int) -> list[int]:
    if hi - lo == 1:
        return [region_of[lo]]
    regions = region_of[lo:hi]
    if all(map(eq, regions, range(regions[0], regions[0] + hi - lo))):  # one region per subtask, in order
        return regions
    return list(dict.fromkeys(regions))


# ---- step 4: order, and merge cycles ----------------------------------------------------------


def kahn_order(region_count: int, producers_of: list[list[int]], consumers_of: list[list[int]],
                ids: Sequence[int] | None = None) -> list[int] | None:
    """Regions in topological order over the region+group graph, or None if it has a cycle.

    FIFO Kahn: the order list is its own queue (a region is appended when it becomes ready and
    visited in that order). `ids`, when given, supplies the int objects of the region indices."""
    waiting_groups = [len(p) for p in producers_of]  # unfinished producer regions per group
    region_inputs = [0] * region_count
    for consumers in consumers_of:
        for region in consumers:
            region_inputs[region] += 1
    out_group, out_groups = _groups_by_producer(region_count, producers_of)
    order = list(compress(ids if ids is not None else range(region_count), map(not_, region_inputs)))
    append = order.append
    for region in order:  # grows while it is walked
        first = out_group[region]
        if first == _NO_GROUP:
            continue
        for g in (first,) if first != _SEVERAL_GROUPS else out_groups[region]:
            waiting_groups[g] -= 1
            if waiting_groups[g] == 0:
                for consumer in consumers_of[g]:
                    region_inputs[consumer] -= 1
                    if region_inputs[consumer] == 0:
                        append(consumer)
    return order if len(order) == region_count else None


_NO_GROUP, _SEVERAL_GROUPS = -1, -2


def _groups_by_producer(region_count: int, producers_of: list[list[int]]) -> tuple[list[int], dict[int, list[int]]]:
    """Region -> the groups it produces into, in group order: most regions produce into one group
    or none, so a flat list holds that group (or _NO_GROUP), and a region producing into several
    has _SEVERAL_GROUPS there and its groups in the dict. No list and no new int per region."""
    out_group = [_NO_GROUP] * region_count
    several: dict[int, list[int]] = {}
    for g, producers in enumerate(producers_of):
        for region in producers:
            first = out_group[region]
            if first == _NO_GROUP:
                out_group[region] = g
            elif first == _SEVERAL_GROUPS:
                several[region].append(g)
            else:
                out_group[region] = _SEVERAL_GROUPS
                several[region] = [first, g]
    return out_group, several


def tarjan_components(region_count: int, producers_of: list[list[int]],
                       consumers_of: list[list[int]]) -> list[list[int]]:
    """Strongly connected components of the region+group graph, as region lists, in topological
    order. Nodes 0..R-1 are regions, R.. are groups. Iterative: no recursion limit at 10k x 10k."""
    group_count = len(producers_of)
    successors: list[list[int]] = [[] for _ in range(region_count + group_count)]
    for g in range(group_count):
        node = region_count + g
        for region in producers_of[g]:
            successors[region].append(node)
        successors[node] = consumers_of[g]
    total = region_count + group_count
    index_of = [-1] * total
    low = [0] * total
    on_stack = [False] * total
    stack: list[int] = []
    components: list[list[int]] = []
    counter = 0
    for start in range(total):
        if index_of[start] != -1:
            continue
        work = [(start, 0)]
        index_of[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack[start] = True
        while work:
            node, position = work[-1]
            succ = successors[node]
            if position < len(succ):
                work[-1] = (node, position + 1)
                nxt = succ[position]
                if index_of[nxt] == -1:
                    index_of[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack[nxt] = True
                    work.append((nxt, 0))
                elif on_stack[nxt] and index_of[nxt] < low[node]:
                    low[node] = index_of[nxt]
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                if low[node] < low[parent]:
                    low[parent] = low[node]
            if low[node] == index_of[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack[member] = False
                    if member < region_count:
                        component.append(member)
                    if member == node:
                        break
                if component:
                    components.append(component)
    components.reverse()  # Tarjan emits sinks first
    return components


def merge_components(components: list[list[int]], member_lists: list[Members],
                      subtask_count: int) -> tuple[list[int], list[Members]]:
    """One region per component, indexed in the components' (topological) order."""
    region_of = [0] * subtask_count
    merged: list[Members] = []
    for index, component in enumerate(components):
        members: Members
        if len(component) == 1:
            members = member_lists[component[0]]
        else:
            members = sorted(s for r in component for s in member_lists[r])
        for subtask in members:
            region_of[subtask] = index
        merged.append(members)
    return region_of, merged


__all__ = ["Members", "find", "kahn_order", "merge_components", "region_group_edges", "tarjan_components", "union"]
