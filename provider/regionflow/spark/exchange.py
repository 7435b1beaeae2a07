"""How rows travel along a job edge when a vertex runs as one Spark computation per unit.

A vertex's output in a unit is one DataFrame; its partitions are the unit's subtasks of the vertex
(partition ``i`` is subtask ``first + i % count``). Along an edge each row goes to exactly one
consumer subtask, its *bucket*, except on a BROADCAST edge, where every consumer reads every row:

- HASH(keys): ``pmod(hash(keys), consumers)``, which is also the partition Spark's own hash
  partitioning gives, so ``repartition(consumers, *keys)`` delivers bucket ``i`` as partition ``i``;
- REBALANCE: ``pmod(hash(row), consumers)``;
- FORWARD and RESCALE: Flink's pointwise wiring from the producer subtask (`pointwise_consumers`);
  a producer that feeds several consumers spreads its rows over them by a hash of the row.

A blocking edge stores the rows with two partition columns, ``_rf_group`` (the topology's partition
group, the unit of release) and ``_rf_bucket``, so a unit writes one Parquet dataset per edge with
at most one file per (group, bucket) and a reader prunes to its own buckets by a range filter: no
file lists, O(P) files per edge and unit.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..core.graph import Distribution
from ..core.topology import ExecutionEdge, ExecutionTopology
from .store import BUCKET_COLUMN, GROUP_COLUMN, SUBTASK_COLUMN

ROUTING_COLUMNS = (GROUP_COLUMN, BUCKET_COLUMN)
__all__ = ["BUCKET_COLUMN", "GROUP_COLUMN", "ROUTING_COLUMNS", "SUBTASK_COLUMN", "Span"]


@dataclass(frozen=True)
class Span:
    """Subtasks ``[first, end)`` of one vertex (local indices)."""

    first: int
    end: int

    @property
    def count(self) -> int:
        return self.end - self.first

    def covers(self, other: "Span") -> bool:
        return self.first <= other.first and other.end <= self.end

    def overlaps(self, other: "Span") -> bool:
        return self.first < other.end and other.first < self.end


def subtask_expression(span: Span):
    """Each row's producer subtask (local index) from the partition it sits in."""
    from pyspark.sql import functions as F

    return F.lit(span.first) + F.pmod(F.spark_partition_id(), F.lit(span.count))


def consumers_fed(topology: ExecutionTopology, exec_edge: ExecutionEdge, producers: Span) -> Span:
    """The consumer subtasks that read anything the producer span writes on this edge."""
    consumers = topology.parallelism[exec_edge.dst]
    if exec_edge.all_to_all:
        return Span(0, consumers)
    first = topology.produced_group(exec_edge, producers.first)
    last = topology.produced_group(exec_edge, producers.end - 1)
    offset = topology.offsets[exec_edge.dst]
    return Span(first.cons_lo - offset, last.cons_hi - offset)


def with_routing(frame, topology: ExecutionTopology, exec_edge: ExecutionEdge, producers: Span):
    """`frame` with the group and bucket columns of `exec_edge` (bucket 0 on a BROADCAST edge)."""
    from pyspark.sql import functions as F

    distribution = exec_edge.edge.distribution
    consumers = topology.parallelism[exec_edge.dst]
    group_lo = exec_edge.group_lo
    if distribution is Distribution.BROADCAST:
        return frame.withColumns({GROUP_COLUMN: F.lit(group_lo), BUCKET_COLUMN: F.lit(0)})
    if distribution is Distribution.HASH:
        bucket = F.pmod(F.hash(*[F.col(k) for k in exec_edge.edge.keys]), F.lit(consumers))
        return frame.withColumns({GROUP_COLUMN: F.lit(group_lo), BUCKET_COLUMN: bucket})
    if distribution is Distribution.REBALANCE:
        bucket = F.pmod(F.hash(*[F.col(c) for c in frame.columns]), F.lit(consumers))
        return frame.withColumns({GROUP_COLUMN: F.lit(group_lo), BUCKET_COLUMN: bucket})
    return _pointwise_routing(frame, topology, exec_edge, producers)


def _pointwise_routing(frame, topology: ExecutionTopology, exec_edge: ExecutionEdge, producers: Span):
    """FORWARD / RESCALE: Flink's wiring (see `core.topology`), as integer column arithmetic."""
    from pyspark.sql import functions as F

    s, t = topology.parallelism[exec_edge.src], topology.parallelism[exec_edge.dst]
    columns = frame.columns
    producer = subtask_expression(producers)
    if s >= t:  # consumer = ceil((p + 1) * t / s) - 1; one group per consumer
        consumer = F.floor(((producer + 1) * t + (s - 1)) / s) - 1
        consumer = consumer.cast("int")
        return frame.withColumns({GROUP_COLUMN: F.lit(exec_edge.group_lo) + consumer, BUCKET_COLUMN: consumer})
    # fan-out: producer p feeds [ceil(p t / s), ceil((p + 1) t / s)); one group per producer
    lo = F.floor((producer * t + (s - 1)) / s).cast("int")
    hi = F.floor(((producer + 1) * t + (s - 1)) / s).cast("int")
    spread = F.pmod(F.hash(*[F.col(c) for c in columns]), hi - lo) if columns else F.lit(0)
    return frame.withColumns({GROUP_COLUMN: F.lit(exec_edge.group_lo) + producer, BUCKET_COLUMN: lo + spread})


def only_buckets(frame, consumers: Span):
    """Rows routed to the consumer subtasks of `consumers` (by the bucket column)."""
    from pyspark.sql import functions as F

    bucket = F.col(BUCKET_COLUMN)
    return frame.where((bucket >= consumers.first) & (bucket < consumers.end))


def deliver(frame, exec_edge: ExecutionEdge, consumers: Span):
    """An input as the consumer function receives it: one partition per consumer subtask, laid out
    as the edge's distribution says (HASH by key; pointwise and BROADCAST as produced)."""
    distribution = exec_edge.edge.distribution
    if distribution is Distribution.HASH:
        return frame.repartition(consumers.count, *exec_edge.edge.keys)
    if distribution is Distribution.REBALANCE:
        return frame.repartition(consumers.count)
    return frame


def missing_keys(exec_edge: ExecutionEdge, columns: list[str]) -> list[str]:
    """The HASH keys of `exec_edge` that the producer's output does not have."""
    if exec_edge.edge.distribution is not Distribution.HASH:
        return []
    return [key for key in exec_edge.edge.keys if key not in columns]
