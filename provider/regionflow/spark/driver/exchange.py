"""How rows travel along a job edge when a vertex runs as one Spark computation per unit.

A vertex's output in a unit is one DataFrame; its partitions are the unit's subtasks of the vertex
(partition ``i`` is subtask ``first + i % count``). Along an edge each row goes to exactly one
consumer subtask, its *bucket*, except on a BROADCAST edge, where every consumer reads every row:

- HASH(keys): ``pmod(hash(keys), consumers)``, which is also the partition Spark's own hash
  partitioning gives, so ``repartition(consumers, *keys)`` delivers bucket ``i`` as partition ``i``;
- REBALANCE: ``pmod(hash(row), consumers)``;
- FORWARD and RESCALE: Flink's pointwise wiring from the producer subtask (`pointwise_consumers`);
  a producer that feeds several consumers spreads its rows over them by a hash of the row.

A blocking edge is stored as one Parquet dataset per producer unit, partitioned by the consumer
*unit* each row goes to (``_rf_unit``, computed from the bucket; a unit is named there by its shard
index within its logical region, which no other region's cut moves): a consumer unit reads its own
directory of each producer unit's dataset (partition pruning, no file lists), and a producer unit
writes at most one file per core and consumer unit, whatever P is. Writing one file per subtask
would make the cost grow with P again: a Parquet file costs tens of milliseconds to open and commit.

On a key-grouped edge (`core.keygroups`: a HASH or REBALANCE edge into an adaptive region of several
shards) a row's bucket is its key group instead, ``pmod(hash(keys), K)``, whatever parallelism the consumer
is given after the producers wrote. Each producer unit then writes one directory (``_rf_unit=0``), its rows
carrying their key group (the bucket column) and sorted by it, and a consumer span reads the key groups of
its subtasks as a range of that column: Parquet's statistics and page index skip the pages of the other
groups. This is the layout of Flink's sort-merge shuffle (one data file per producer, its subpartitions in
order) rather than of a file per key group: both cost about 2x one plain directory to write, the sort being
what both pay (`benchmarks/keygroup_writes.py`), but the sorted file is one file per core instead of K, a
consumer reading one key group out of it reads less than from that group's own directory (0.86x), and one
reading every key group, as one decided at parallelism 1 does, reads it like any single directory.
A consumer decided as one shard needs no sort at all: the producers of a region whose last run was decided so
write their key groups unsorted (`spark.data.history`: the sort is ~0.4 s per 2M rows here).
"""
from __future__ import annotations

from dataclasses import dataclass

from ...core.graph import Distribution
from ...core.keygroups import key_group_range
from ...core.topology import ExecutionEdge, ExecutionTopology
from ..data.store import BUCKET_COLUMN, SUBTASK_COLUMN, UNIT_COLUMN

ROUTING_COLUMNS = (UNIT_COLUMN, BUCKET_COLUMN)
KEY_GROUPED_DIRECTORY = 0  # the one ``_rf_unit`` directory of a producer unit's dataset of a key-grouped edge
__all__ = ["BUCKET_COLUMN", "KEY_GROUPED_DIRECTORY", "ROUTING_COLUMNS", "SUBTASK_COLUMN", "UNIT_COLUMN", "Span"]


@dataclass(frozen=True)
class Span:
    """Subtasks ``[first, end)`` of one vertex (local indices)."""

    first: int
    end: int

    @property
    def count(self) -> int:
        return self.end - self.first

    def covers(self, other: Span) -> bool:
        return self.first <= other.first and other.end <= self.end

    def overlaps(self, other: Span) -> bool:
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


def with_bucket(frame, topology: ExecutionTopology, exec_edge: ExecutionEdge, producers: Span,
                columns: list[str] | None = None):
    """`frame` with the bucket column of `exec_edge` (0 on a BROADCAST edge: every consumer reads
    every row). `columns`: the frame's columns when known (asking Spark costs an analysis). Rows
    written for a single consumer unit go without it (`UnitComputer._write`)."""
    if columns is None:  # asked only where the bucket hashes or wires by them
        by_keys_or_none = exec_edge.edge.distribution in (Distribution.HASH, Distribution.BROADCAST)
        columns = [] if by_keys_or_none else frame.columns
    return frame.withColumn(BUCKET_COLUMN, bucket_of_rows(topology, exec_edge, producers, columns))


def bucket_of_rows(topology: ExecutionTopology, exec_edge: ExecutionEdge, producers: Span, columns: list[str],
                   key_groups: int | None = None):
    """Each row's bucket on `exec_edge`, a Column over the frame's `columns`; with `key_groups` (K of a
    key-grouped HASH or REBALANCE edge), its key group."""
    from pyspark.sql import functions as F

    distribution = exec_edge.edge.distribution
    consumers = key_groups or topology.parallelism[exec_edge.dst]
    if distribution is Distribution.BROADCAST:
        return F.lit(0)
    if distribution is Distribution.HASH:
        return F.pmod(F.hash(*[F.col(k) for k in exec_edge.edge.keys]), F.lit(consumers))
    if distribution is Distribution.REBALANCE:
        return F.pmod(F.hash(*[F.col(c) for c in columns]), F.lit(consumers))
    return _pointwise_bucket(columns, topology, exec_edge, producers)


def _pointwise_bucket(columns: list[str], topology: ExecutionTopology, exec_edge: ExecutionEdge, producers: Span):
    """FORWARD / RESCALE: Flink's wiring (see `core.topology`), as integer column arithmetic."""
    from pyspark.sql import functions as F

    s, t = topology.parallelism[exec_edge.src], topology.parallelism[exec_edge.dst]
    producer = subtask_expression(producers)
    if s >= t:  # consumer = ceil((p + 1) * t / s) - 1
        return (F.floor(((producer + 1) * t + (s - 1)) / s) - 1).cast("int")
    # fan-out: producer p feeds [ceil(p t / s), ceil((p + 1) t / s)), its rows spread by a row hash
    lo = F.floor((producer * t + (s - 1)) / s).cast("int")
    hi = F.floor(((producer + 1) * t + (s - 1)) / s).cast("int")
    return lo + (F.pmod(F.hash(*[F.col(c) for c in columns]), hi - lo) if columns else F.lit(0))


def unit_of_rows(unit_runs: list[tuple[int, int]]):
    """The consumer unit of each row of a frame with a bucket column: `unit_runs` lists
    ``(first bucket, unit)`` runs in bucket order (a vertex's units hold contiguous subtasks). The
    unit itself (an int) when there is one run: every row goes there; otherwise a Column."""
    from pyspark.sql import functions as F

    if len(unit_runs) == 1:
        return unit_runs[0][1]
    bucket = F.col(BUCKET_COLUMN)
    unit = F.when(bucket < unit_runs[1][0], F.lit(unit_runs[0][1]))
    for (_, current), (following, _) in zip(unit_runs[1:], unit_runs[2:], strict=False):
        unit = unit.when(bucket < following, F.lit(current))
    return unit.otherwise(F.lit(unit_runs[-1][1]))


def directories_read(exec_edge: ExecutionEdge, shard: int, key_groups: int | None) -> range | None:
    """The ``_rf_unit`` values the consumer unit that is shard `shard` of its logical region reads of a
    producer unit's dataset: None for every row (BROADCAST), the one directory on a key-grouped edge
    (`key_groups_read` says which of its rows), else the unit's own."""
    if exec_edge.edge.distribution is Distribution.BROADCAST:
        return None
    if key_groups is not None:
        return range(KEY_GROUPED_DIRECTORY, KEY_GROUPED_DIRECTORY + 1)
    return range(shard, shard + 1)


def key_groups_read(consumers: Span, parallelism: int, key_groups: int | None) -> range | None:
    """The key groups (bucket column values) subtasks `consumers` of `parallelism` read on an edge of
    `key_groups` key groups; None when they read every row: an edge that is not key-grouped, or a span that
    reads every key group (parallelism 1), which then filters nothing and reads no bucket column."""
    if key_groups is None:
        return None
    groups = key_group_range(consumers.first, consumers.end, parallelism, key_groups)
    return None if len(groups) == key_groups else groups


def share_of_bytes(size: int, groups: range | None, key_groups: int) -> int:
    """The bytes of a key-grouped dataset of `size` bytes counted for reading `groups` of its `key_groups`
    (None: every one): its share by key groups (the file does not say where each group's pages are); the
    shares of a partition of the key groups add up to `size` exactly."""
    if groups is None:
        return size
    return size * groups.stop // key_groups - size * groups.start // key_groups


def only_buckets(frame, consumers: Span):
    """Rows routed to the consumer subtasks of `consumers` (by the bucket column)."""
    from pyspark.sql import functions as F

    bucket = F.col(BUCKET_COLUMN)
    return frame.where((bucket >= consumers.first) & (bucket < consumers.end))


def missing_keys(exec_edge: ExecutionEdge, columns: list[str]) -> list[str]:
    """The HASH keys of `exec_edge` that the producer's output does not have."""
    if exec_edge.edge.distribution is not Distribution.HASH:
        return []
    return [key for key in exec_edge.edge.keys if key not in columns]
