"""Key groups: the rows of a blocking edge stored so that any parallelism of its consumer reads the same files.

A blocking HASH edge is normally stored by consumer unit: each producer unit writes one directory per consumer
unit, computed from ``hash(keys) mod parallelism`` (a REBALANCE edge: from a hash of the whole row). That
routing needs the consumer's parallelism and its cut into units when the producer runs. A consumer whose
parallelism may still change after its producers ran (an adaptive vertex, ``parallelism=(min, max)``, whose
logical region is cut into several shards) cannot be served that way. Flink's answer is a fixed number K of
*key groups* (its max parallelism): a row's key group is ``hash mod K``, fixed when it is written; consumer
subtask ``i`` of ``p`` reads the contiguous key groups ``[ceil(i K / p), ceil((i + 1) K / p))``, and a run
of consecutive subtasks (a unit) reads the union, again contiguous. Every parallelism from 1 to K then reads
the same files, each key group whole, so the rows of one key still meet in one subtask. How the groups are
stored (one directory per producer unit, sorted by key group unless the consumer's region was last decided as
one shard) is the driver's (`spark.driver.exchange`, `spark.data.history`).

An edge is key-grouped when it is a blocking HASH or REBALANCE edge between two logical regions into an
adaptive vertex whose logical region runs as several shards with its adaptive vertices at their declared max
(`max_shards` cuts it). That test depends only on the declared ranges, never on a decided value, so every
process that builds the plan, before or after a decision, agrees on which edges are key-grouped. K is the
consumer's declared max: at least every parallelism it may get, and no more directories than that. A region
that stays one shard (its values are then decided when it is granted, `core.adaptive.at_grant`) keeps the
cheaper routing by unit: its single unit reads every row.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from .graph import Distribution

if TYPE_CHECKING:
    from .graph import Edge, Vertex
    from .plan import Plan

# The distributions that spread rows by a hash (of the keys, of the whole row): key groups serve them alike.
SPREAD = (Distribution.HASH, Distribution.REBALANCE)


def key_group_range(first: int, end: int, parallelism: int, key_groups: int) -> range:
    """The key groups read by subtasks ``[first, end)`` of a vertex at `parallelism`, out of `key_groups`."""
    if not 0 <= first <= end <= parallelism <= key_groups:
        raise ValueError(f"subtasks [{first}, {end}) of {parallelism} cannot read {key_groups} key groups; "
                         f"a vertex stored by key group has at most as many subtasks as key groups")
    return range(_ceil_div(first * key_groups, parallelism), _ceil_div(end * key_groups, parallelism))


def key_grouped_edges(plan: Plan, max_shards: int | None) -> dict[int, int]:
    """``{execution edge index: K}`` for each key-grouped edge of `plan` (see the module's docstring)."""
    topology = plan.topology
    names = topology.vertex_names
    logical_of = plan.logical_of_vertex
    grouped: dict[int, int] = {}
    for exec_edge in topology.edges:
        k = key_groups_of(exec_edge.edge, plan.graph.vertices[names[exec_edge.dst]])
        logical = logical_of[exec_edge.dst]
        if k is not None and logical_of[exec_edge.src] != logical and several_shards_at_max(plan, logical, max_shards):
            grouped[exec_edge.index] = k
    return grouped


def key_groups_of(edge: Edge, consumer: Vertex) -> int | None:
    """K of `edge` into `consumer` when it crosses into a logical region that runs as several shards at its
    max (the caller's to know): the consumer's declared max for a HASH or REBALANCE edge into an adaptive
    vertex of max >= 2; None for any other edge, which is stored per consumer unit."""
    span = consumer.parallelism_range
    if edge.distribution not in SPREAD or span is None or span[1] < 2:
        return None
    return span[1]


def several_shards_at_max(plan: Plan, logical: int, max_shards: int | None) -> bool:
    """Whether logical region `logical` runs as more than one shard with its adaptive vertices at their max."""
    if max_shards == 1:
        return False
    regions = plan.regions_at_max[logical]
    return (regions if max_shards is None else min(regions, max_shards)) > 1


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


__all__ = ["key_group_range", "key_grouped_edges", "key_groups_of", "several_shards_at_max"]
