"""The execution topology: subtasks and grouped partitions, O(vertices + subtasks + pointwise groups).

Subtasks get global integer ids: the subtasks of each vertex are contiguous, vertices laid out in
topological order, so ``id = offset[vertex] + index`` and the name ``"<vertex>#<index>"`` is made
only when asked for. Connections are never stored per subtask pair. Each job edge is split into
`PartitionGroup`s (seed 004's ConsumedPartitionGroup with its ConsumerVertexGroup): a contiguous
range of producer subtasks whose partitions are all read by a contiguous range of consumer subtasks.
An all-to-all edge (HASH, REBALANCE, BROADCAST) is one group whatever its parallelism; a pointwise
edge S -> T is min(S, T) groups following Flink's wiring:

- S >= T: consumer i reads producers [floor(i*S/T), floor((i+1)*S/T))   (T groups)
- S <  T: producer p feeds consumers [ceil(p*T/S), ceil((p+1)*T/S))     (S groups)
"""
from __future__ import annotations

import gc
from bisect import bisect_right
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from .graph import Edge, Exchange, JobGraph
from .modes import ExchangeMode


def pointwise_producers(consumer: int, producers: int, consumers: int) -> tuple[int, int]:
    """Half-open range of producer indices that consumer `consumer` reads on a pointwise edge."""
    if producers >= consumers:
        return consumer * producers // consumers, (consumer + 1) * producers // consumers
    source = consumer * producers // consumers
    return source, source + 1


def pointwise_consumers(producer: int, producers: int, consumers: int) -> tuple[int, int]:
    """Half-open range of consumer indices that read producer `producer`'s partition on a pointwise edge."""
    if producers >= consumers:
        target = _ceil_div((producer + 1) * consumers, producers) - 1
        return target, target + 1
    return _ceil_div(producer * consumers, producers), _ceil_div((producer + 1) * consumers, producers)


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while building: the build allocates O(n) small containers
    that hold no cycles, and each collection triggered on the way rescans all of them (quadratic)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class PartitionGroup:
    """Producers [prod_lo, prod_hi) all feed consumers [cons_lo, cons_hi) (global subtask ids)."""

    __slots__ = ("index", "edge", "prod_lo", "prod_hi", "cons_lo", "cons_hi")

    def __init__(self, index: int, edge: int, prod_lo: int, prod_hi: int, cons_lo: int, cons_hi: int) -> None:
        self.index = index
        self.edge = edge
        self.prod_lo = prod_lo
        self.prod_hi = prod_hi
        self.cons_lo = cons_lo
        self.cons_hi = cons_hi

    @property
    def producers(self) -> range:
        return range(self.prod_lo, self.prod_hi)

    @property
    def consumers(self) -> range:
        return range(self.cons_lo, self.cons_hi)

    def __repr__(self) -> str:
        return (f"PartitionGroup(#{self.index}, edge={self.edge}, producers={self.producers}, "
                f"consumers={self.consumers})")


@dataclass(frozen=True)
class ExecutionEdge:
    """A job edge with its exchange decided by the mode and its groups [group_lo, group_hi)."""

    index: int
    edge: Edge
    exchange: Exchange
    src: int  # vertex index
    dst: int
    group_lo: int
    group_hi: int

    @property
    def blocking(self) -> bool:
        return self.exchange is Exchange.BLOCKING

    @property
    def all_to_all(self) -> bool:
        return not self.edge.distribution.is_pointwise


class ExecutionTopology:
    """Subtasks, edges and partition groups of a job graph under one exchange mode."""

    def __init__(self, graph: JobGraph, mode: ExchangeMode | str | None = None) -> None:
        graph.validate()
        self.graph = graph
        self.mode = ExchangeMode.parse(mode)
        self.vertex_names: list[str] = graph.topological_order()
        self.vertex_index: dict[str, int] = {name: i for i, name in enumerate(self.vertex_names)}
        self.parallelism: list[int] = [graph.vertices[name].parallelism for name in self.vertex_names]
        self.offsets: list[int] = _prefix_sums(self.parallelism)
        self.subtask_count: int = self.offsets[-1]
        self.groups: list[PartitionGroup] = []
        with gc_paused():
            self.edges: list[ExecutionEdge] = [self._add_edge(i, edge) for i, edge in enumerate(graph.edges)]
        self.in_edges: list[list[ExecutionEdge]] = [[] for _ in self.vertex_names]
        self.out_edges: list[list[ExecutionEdge]] = [[] for _ in self.vertex_names]
        for exec_edge in self.edges:
            self.in_edges[exec_edge.dst].append(exec_edge)
            self.out_edges[exec_edge.src].append(exec_edge)

    def _add_edge(self, index: int, edge: Edge) -> ExecutionEdge:
        src, dst = self.vertex_index[edge.src], self.vertex_index[edge.dst]
        first_group = len(self.groups)
        if edge.distribution.is_pointwise:
            self._add_pointwise_groups(index, src, dst)
        else:
            self.groups.append(
                PartitionGroup(first_group, index, self.offsets[src], self.offsets[src + 1],
                               self.offsets[dst], self.offsets[dst + 1])
            )
        return ExecutionEdge(index, edge, self.mode.exchange_for(edge), src, dst, first_group, len(self.groups))

    def _add_pointwise_groups(self, edge_index: int, src: int, dst: int) -> None:
        groups, s, t = self.groups, self.parallelism[src], self.parallelism[dst]
        src_base, dst_base = self.offsets[src], self.offsets[dst]
        if s >= t:
            for consumer in range(t):
                lo, hi = consumer * s // t, (consumer + 1) * s // t
                groups.append(PartitionGroup(len(groups), edge_index, src_base + lo, src_base + hi,
                                             dst_base + consumer, dst_base + consumer + 1))
        else:
            for producer in range(s):
                lo, hi = _ceil_div(producer * t, s), _ceil_div((producer + 1) * t, s)
                groups.append(PartitionGroup(len(groups), edge_index, src_base + producer, src_base + producer + 1,
                                             dst_base + lo, dst_base + hi))

    # ---- subtask ids ---------------------------------------------------------------------------

    def vertex_of(self, subtask: int) -> int:
        return bisect_right(self.offsets, subtask) - 1

    def subtask_name(self, subtask: int) -> str:
        vertex = self.vertex_of(subtask)
        return f"{self.vertex_names[vertex]}#{subtask - self.offsets[vertex]}"

    def subtask_id(self, name: str) -> int:
        vertex, _, index = name.rpartition("#")
        return self.offsets[self.vertex_index[vertex]] + int(index)

    def subtasks_of(self, vertex_name: str) -> range:
        v = self.vertex_index[vertex_name]
        return range(self.offsets[v], self.offsets[v + 1])

    # ---- groups ----------------------------------------------------------------------------------

    def consumed_group(self, exec_edge: ExecutionEdge, consumer_index: int) -> PartitionGroup:
        """The group of `exec_edge` read by consumer subtask `consumer_index` (local index), in O(1)."""
        if exec_edge.all_to_all:
            return self.groups[exec_edge.group_lo]
        s, t = self.parallelism[exec_edge.src], self.parallelism[exec_edge.dst]
        offset = consumer_index if s >= t else consumer_index * s // t
        return self.groups[exec_edge.group_lo + offset]

    def produced_group(self, exec_edge: ExecutionEdge, producer_index: int) -> PartitionGroup:
        """The group of `exec_edge` that producer subtask `producer_index` (local index) writes into."""
        if exec_edge.all_to_all:
            return self.groups[exec_edge.group_lo]
        s, t = self.parallelism[exec_edge.src], self.parallelism[exec_edge.dst]
        offset = pointwise_consumers(producer_index, s, t)[0] if s >= t else producer_index
        return self.groups[exec_edge.group_lo + offset]

    def inputs_of(self, subtask: int) -> list[tuple[ExecutionEdge, range]]:
        """For each input edge of `subtask`, the producer subtask ids it reads."""
        vertex = self.vertex_of(subtask)
        local = subtask - self.offsets[vertex]
        return [(e, self.consumed_group(e, local).producers) for e in self.in_edges[vertex]]


def _prefix_sums(values: list[int]) -> list[int]:
    sums = [0]
    for value in values:
        sums.append(sums[-1] + value)
    return sums
