"""Adaptive parallelism: a vertex declared with ``parallelism=(min, max)`` gets its value from the slots
the cluster has, before the job's plan is built.

The rule. Every adaptive vertex starts at the cluster's slot count, clamped to its own [min, max]. If a
pipelined region of the resulting plan then needs more slots than the cluster has (several slot
sharing groups in one region add up), the common target is halved and the vertices clamped again,
until every region fits or every adaptive vertex is at its min. Vertices with the same declaration get
the same value, so a FORWARD edge between two of them stays FORWARD. Fixed vertices keep theirs.

`decide` returns a new graph whose adaptive vertices carry their decided `parallelism` (their
`parallelism_range` stays, so the plan JSON shows both) and the decisions, ``{vertex: value}``. The
plan, the topology and every descriptor are then built for the decided values; a region program that
rebuilds the graph from its reference applies the same decisions (`apply`).

What is not done: the value is decided when the plan is built (``regionflow run`` start, DAG parse),
from the cluster's total slots, not per grant from the slots a region actually got, and not from the
bytes a blocking producer wrote (``target_bytes_per_subtask``).
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING

from .errors import JobGraphError
from .graph import JobGraph
from .modes import ExchangeMode

if TYPE_CHECKING:
    from .plan import Plan


def decide(graph: JobGraph, slots: int, mode: ExchangeMode | str | None = None) -> tuple[JobGraph, dict[str, int]]:
    """`graph` with each adaptive vertex's parallelism decided for a cluster of `slots` slots, and the
    decisions; `graph` itself when no vertex is adaptive."""
    if not decided(graph):
        return graph, {}
    plan = decided_plan(graph, slots, mode)
    return plan.graph, decided(plan.graph)


def decided_plan(graph: JobGraph, slots: int, mode: ExchangeMode | str | None = None) -> Plan:
    """The plan of `graph` with its adaptive vertices decided for `slots` slots: the plan the decision
    built last, so a caller (DAG parse, ``regionflow run``) does not build it again. Without adaptive
    vertices, simply ``Plan(graph, mode)``."""
    from .plan import Plan  # the plan module imports this one (references carry the decisions)

    adaptive = {name: vertex.parallelism_range for name, vertex in graph.vertices.items()
                if vertex.parallelism_range is not None}
    if not adaptive:
        return Plan(graph, mode)
    if slots < 1:
        raise JobGraphError(f"cannot decide adaptive parallelism for a cluster of {slots} slots; give it slots")
    target = slots
    while True:
        decisions = {name: max(low, min(high, target)) for name, (low, high) in adaptive.items()}
        plan = Plan(apply(graph, decisions), mode)
        fits = all(plan.slots(region) <= slots for region in plan.regions)
        if fits or target == 1 or all(decisions[name] == low for name, (low, _) in adaptive.items()):
            return plan
        target = max(1, target // 2)


def decided(graph: JobGraph) -> dict[str, int]:
    """The current parallelism of each adaptive vertex of `graph` (its decisions, once `decide` ran)."""
    return {name: vertex.parallelism for name, vertex in graph.vertices.items()
            if vertex.parallelism_range is not None}


def apply(graph: JobGraph, decisions: Mapping[str, int]) -> JobGraph:
    """A copy of `graph` whose named adaptive vertices run at the given parallelism (each within its
    declared [min, max]; a `JobGraphError` names a vertex that is not adaptive or a value outside)."""
    if not decisions:
        return graph
    copy = JobGraph(graph.name, graph.default_mode)
    for name, vertex in graph.vertices.items():
        if name in decisions:
            span = vertex.parallelism_range
            value = decisions[name]
            if span is None or not span[0] <= value <= span[1]:
                raise JobGraphError(f"vertex {name!r}: parallelism {value} was decided for it, but it declares "
                                    f"{vertex.declared_parallelism}; plan and program must come from the same job")
            vertex = dataclasses.replace(vertex, parallelism=value)
        copy.vertices[name] = vertex
    copy.edges = list(graph.edges)
    return copy


__all__ = ["apply", "decide", "decided", "decided_plan"]
