"""Adaptive parallelism decided once per DAG run, for a logical region cut into several shards.

A logical region that runs as one shard has its adaptive vertices decided again when its one unit is
granted (`core.adaptive.at_grant`). A region cut into several shards cannot be decided that way: each
shard is its own task instance with its own grant, and the number of shards itself follows from the
value. Such a region is decided once per run instead, after its producers have committed and before any
of its shards starts (in Airflow, by the region's decision task, whose result its shards are mapped over):
from the bytes the region reads, the declared ranges and the cluster. Its shards, and every task after
them that reads their partitions, then build the plan with the run's decision (`core.adaptive.apply`).

Which regions (`run_time_blocker` is None): the region has an adaptive vertex; with its adaptive vertices at
their declared max it runs as several shards; it reads blocking partitions (a source region has no bytes to
decide from: the cluster decides its values at parse time); no pointwise edge (FORWARD, RESCALE) crosses its
border, since that wiring needs both ends' parallelism; and every blocking edge into it is stored by key group
(`core.keygroups`) or broadcast, so what its producers wrote serves any value it may get.

The rule (`for_run`, with `core.adaptive.fitted`): a declaration with ``target_bytes_per_subtask`` gets
``ceil(bytes read / target)``, one without gets the cluster's slot count; clamped to [min, max]; halved
while one of the region's pipelined regions needs more slots than the largest host has. The shards queue
in the FIFO pool one bulk each and need not run at once, so the cluster's size does not cap a value
decided from bytes. The same inputs and cluster give the same decision, so a cleared run decides again
and gets the same answer.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .adaptive import fitted, listed, planned_values, units_moved
from .graph import Distribution
from .keygroups import key_groups_of, several_shards_at_max

if TYPE_CHECKING:
    from .plan import Plan


@dataclass(frozen=True)
class RunDecision:
    """The run's values of one logical region's adaptive vertices, its shard count with them, why, the
    bytes they were decided from (None: it read none) and the vertices' declared ranges ``(min, max)``."""

    values: dict[str, int]
    shards: int
    reason: str
    input_bytes: int | None = None
    ranges: dict[str, tuple[int, int]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        return {"values": dict(self.values), "shards": self.shards, "reason": self.reason,
                "input_bytes": self.input_bytes, "ranges": {k: list(v) for k, v in self.ranges.items()}}


def run_time_blocker(plan: Plan, logical: int, max_shards: int | None) -> str | None:
    """Why logical region `logical` is not decided per run (see the module docstring); None when it is."""
    names = plan.topology.vertex_names
    members = {names[v] for v in plan.region_set.logical[logical].vertices}
    if not any(plan.graph.vertices[name].parallelism_range is not None for name in members):
        return "the region has no adaptive vertex"
    if not several_shards_at_max(plan, logical, max_shards):
        return "the region runs as one shard (its values are decided when it is granted)"
    if not any(edge.dst in members and edge.src not in members for edge in plan.graph.edges):
        return "the region reads no blocking partition (its values are decided for the cluster at parse time)"
    for edge in plan.graph.edges:
        if (edge.src in members) == (edge.dst in members):
            continue
        if edge.distribution.is_pointwise:
            return f"edge {edge.label} wires it pointwise to another region, and that wiring needs both ends' " \
                   f"parallelism"
        if (edge.dst in members and edge.distribution is not Distribution.BROADCAST
                and key_groups_of(edge, plan.graph.vertices[edge.dst]) is None):  # several at max: known above
            return f"edge {edge.label} into it is stored per consumer unit, for a parallelism fixed when its " \
                   f"producer runs (only a HASH or REBALANCE edge into an adaptive vertex is stored by key group)"
    return None


def for_run(plan: Plan, logical: int, max_shards: int | None, cluster_slots: int, host_slots: int,
            input_bytes: int | None) -> RunDecision:
    """The run's decision for logical region `logical` of `plan` (built with the DAG's parse-time values),
    which reads `input_bytes` bytes of committed partitions; `cluster_slots`: every host's slots,
    `host_slots`: the largest host's."""
    planned = planned_values(plan, logical)
    vertices = [plan.graph.vertices[name] for name in planned]
    ranges = {vertex.name: span for vertex in vertices if (span := vertex.parallelism_range) is not None}
    tops = [span[1] for span in ranges.values()]
    byte_targets = input_bytes is not None and any(vertex.target_bytes_per_subtask for vertex in vertices)
    start = max(tops) if byte_targets else cluster_slots
    values, candidate, region, how = fitted(plan, logical, host_slots, input_bytes, start=start)
    if units_moved(plan, candidate, logical, region, max_shards, count_may_change=True):
        values, candidate, region = planned, plan, logical
        how = f"planned values kept: {how} would rename another unit of the run"
    elif values != planned:
        how = f"{how} (planned {listed(planned)})"
    shards = sum(1 for shard in candidate.shards(max_shards) if shard.logical == region)
    return RunDecision(values, shards, f"{how}: {shards} shard(s)", input_bytes, ranges)


__all__ = ["RunDecision", "for_run", "run_time_blocker"]
