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

Decided again at grant time (`at_grant`). When a unit starts, its logical region's adaptive vertices
are decided once more, from the slots the unit's Spark application actually got and, for a vertex
with ``target_bytes_per_subtask``, from the bytes the unit reads from blocking partitions (Flink's
adaptive batch scheduler: ``ceil(bytes / target)``). The same rule as above, over the one region:
start at the granted slots, cap each declaration by its bytes, clamp to [min, max], halve while the
region needs more slots than granted. The unit then runs on a plan built for those values.

That is safe only when nothing outside the unit depends on the values. `grant_time_blocker` names
what keeps the planned value instead: the logical region is cut into several shards (each its own
grant), an edge wires it pointwise (FORWARD, RESCALE) to another region (the wiring needs both ends'
parallelism), or the new values would move or rename another unit. Consumers downstream keep reading
by unit and bucket, which do not depend on a producer's parallelism; the region reads every row its
unit was sent (one shard), whatever bucket count the producers wrote for.
"""
from __future__ import annotations

import dataclasses
import math
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


@dataclasses.dataclass(frozen=True)
class GrantDecision:
    """The values one unit runs its region's adaptive vertices at, the plan built for them, and one
    line saying how they were decided (or why the planned values stay)."""

    values: dict[str, int]  # the region's adaptive vertices ({} when it has none)
    plan: Plan  # built for `values` (the planned one when nothing changed)
    logical: int  # the region's index in `plan`
    reason: str
    changed: bool = False


def grant_time_blocker(plan: Plan, logical: int, max_shards: int | None) -> str | None:
    """Why the adaptive vertices of logical region `logical` keep their planned values when its unit is
    granted; None when they are decided again then (`at_grant`)."""
    names = plan.topology.vertex_names
    members = {names[v] for v in plan.region_set.logical[logical].vertices}
    adaptive = {name for name in members if plan.graph.vertices[name].parallelism_range is not None}
    if not adaptive:
        return "the region has no adaptive vertex"
    if _shard_count(plan, logical, max_shards) != 1:
        return "the region runs as several shards, each with its own grant"
    for edge in plan.graph.edges:
        crosses = (edge.src in members) != (edge.dst in members)
        if crosses and edge.distribution.is_pointwise and (edge.src in adaptive or edge.dst in adaptive):
            return (f"edge {edge.label} wires it pointwise to another region, and that wiring needs both ends' "
                    f"parallelism")
    return None


def at_grant(plan: Plan, logical: int, max_shards: int | None, slots: int,
             input_bytes: int | None = None) -> GrantDecision:
    """The values of logical region `logical`'s adaptive vertices for a unit granted `slots` slots that
    reads `input_bytes` bytes of blocking partitions (None: it reads none), and the plan built for
    them; the planned values, with the reason, when `grant_time_blocker` names one or nothing changes."""
    blocker = grant_time_blocker(plan, logical, max_shards)
    if blocker is not None:
        return GrantDecision(planned_values(plan, logical), plan, logical, f"planned values kept: {blocker}")
    if slots < 1:
        raise JobGraphError(f"cannot decide adaptive parallelism for a grant of {slots} slots; a grant has slots")
    return _decide(plan, logical, max_shards, slots, input_bytes)


def smaller_grants(plan: Plan, logical: int, max_shards: int | None, full: int) -> list[GrantDecision]:
    """What `at_grant` decides for a unit of logical region `logical` granted half, a quarter, ... of
    `full`, the slots it asks for as planned, largest first, one per distinct set of values ([] when
    its values are not decided at grant time): the smaller requests a unit may start with when its
    full request is not free (an elastic request, `scheduling.elastic`)."""
    if grant_time_blocker(plan, logical, max_shards) is not None:
        return []
    decisions: list[GrantDecision] = []
    seen: set[tuple[tuple[str, int], ...]] = set()
    slots = full // 2
    while slots >= 1:
        decision = _decide(plan, logical, max_shards, slots, None)
        values = tuple(sorted(decision.values.items()))
        if decision.changed and values not in seen:
            seen.add(values)
            decisions.append(decision)
        slots //= 2
    return decisions


def planned_values(plan: Plan, logical: int) -> dict[str, int]:
    """The planned values of the adaptive vertices of logical region `logical`."""
    vertices = plan.graph.vertices
    names = (plan.topology.vertex_names[v] for v in plan.region_set.logical[logical].vertices)
    return {name: vertices[name].parallelism for name in names if vertices[name].parallelism_range is not None}


def _decide(plan: Plan, logical: int, max_shards: int | None, slots: int, input_bytes: int | None) -> GrantDecision:
    """`at_grant` for a region no `grant_time_blocker` holds back."""
    planned = planned_values(plan, logical)
    values, candidate, region, how = fitted(plan, logical, slots, input_bytes)
    if values == planned:
        return GrantDecision(planned, plan, logical, f"{how}: as planned")
    if units_moved(plan, candidate, logical, region, max_shards):
        return GrantDecision(planned, plan, logical,
                             f"planned values kept: {how} would move or rename another unit of the run")
    return GrantDecision(values, candidate, region, f"{how} (planned {listed(planned)})", changed=True)


def fitted(plan: Plan, logical: int, slots: int, input_bytes: int | None,
           start: int | None = None) -> tuple[dict[str, int], Plan, int, str]:
    """The rule for one logical region's adaptive vertices: start at `start` (default `slots`), cap each
    declaration by the bytes read (`target_bytes_per_subtask`), clamp to [min, max], halve while one of the
    region's pipelined regions needs more than `slots`. Returns the values, the plan built for them, the region's index
    there, and how they were decided (a line for the log)."""
    from .plan import Plan  # the plan module imports this one

    planned = planned_values(plan, logical)
    ranges = {name: span for name in planned if (span := plan.graph.vertices[name].parallelism_range) is not None}
    caps = _byte_caps(plan, ranges, input_bytes)
    first = None
    target = slots if start is None else start
    while True:
        values = {name: _clamp(min(target, caps.get(span, target)), span) for name, span in ranges.items()}
        candidate = plan if values == planned else Plan(apply(plan.graph, values), plan.mode)
        region = _same_logical(candidate, plan, logical)
        if all(candidate.slots(candidate.regions[r]) <= slots for r in candidate.region_set.logical[region].regions):
            break
        first = first or (values, candidate, region)
        if target == 1 or all(values[name] == span[0] for name, span in ranges.items()):
            values, candidate, region = first  # no value fits: the fixed vertices need more; do not shrink
            break
        target = max(1, target // 2)
    return values, candidate, region, _explained(values, ranges, caps, slots, input_bytes)


def _byte_caps(plan: Plan, ranges: Mapping[str, tuple[int, int]],
               input_bytes: int | None) -> dict[tuple[int, int], int]:
    """Per declared range, the parallelism its bytes allow: ceil(bytes / target), with the smallest
    target among the vertices of that range (one value per range keeps FORWARD edges between them)."""
    if input_bytes is None:
        return {}
    caps: dict[tuple[int, int], int] = {}
    for name, span in ranges.items():
        target = plan.graph.vertices[name].target_bytes_per_subtask
        if target is not None:
            caps[span] = max(caps.get(span, 0), max(1, math.ceil(input_bytes / target)))
    return caps


def _clamp(value: int, span: tuple[int, int]) -> int:
    return max(span[0], min(span[1], value))


def _shard_count(plan: Plan, logical: int, max_shards: int | None) -> int:
    regions = len(plan.region_set.logical[logical].regions)
    return regions if max_shards is None else min(regions, max_shards)


def _same_logical(candidate: Plan, plan: Plan, logical: int) -> int:
    """The index in `candidate` of `plan`'s logical region `logical` (the one with the same vertices)."""
    wanted = plan.region_set.logical[logical].vertices
    if logical < len(candidate.region_set.logical) and candidate.region_set.logical[logical].vertices == wanted:
        return logical
    return next(other.index for other in candidate.region_set.logical if other.vertices == wanted)


def units_moved(plan: Plan, candidate: Plan, logical: int, region: int, max_shards: int | None, *,
                count_may_change: bool = False) -> bool:
    """Whether the candidate plan (logical region `logical` of `plan` is `region` there) renames a unit
    outside the region, or, unless `count_may_change` (a decision per run), changes the region's unit count
    or where its units sit among the others: the rows' routing and the commits of the run go by a unit's
    name and position."""
    before = [(shard.logical == logical, plan.shard_name(shard)) for shard in plan.shards(max_shards)]
    after = [(shard.logical == region, candidate.shard_name(shard)) for shard in candidate.shards(max_shards)]
    if [name for inside, name in before if not inside] != [name for inside, name in after if not inside]:
        return True
    return not count_may_change and [inside for inside, _ in before] != [inside for inside, _ in after]


def _explained(values: Mapping[str, int], ranges: Mapping[str, tuple[int, int]],
               caps: Mapping[tuple[int, int], int], slots: int, input_bytes: int | None) -> str:
    text = f"{listed(values)} for {slots} granted slot(s)"
    if caps:
        text += f" and {input_bytes} bytes read (at most {', '.join(str(c) for c in caps.values())} by " \
                f"target_bytes_per_subtask)"
    declared = sorted({f"[{span[0]}, {span[1]}]" for span in ranges.values()})
    return f"{text}, declared {', '.join(declared)}"


def listed(values: Mapping[str, int]) -> str:
    return ", ".join(f"{name}={value}" for name, value in values.items())


__all__ = ["GrantDecision", "apply", "at_grant", "decide", "decided", "decided_plan", "fitted", "grant_time_blocker",
           "listed", "planned_values", "smaller_grants", "units_moved"]
