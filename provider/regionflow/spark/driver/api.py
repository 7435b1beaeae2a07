"""What a vertex function sees: ``fn(spark, inputs, ctx) -> DataFrame``.

A vertex function is called **once per vertex and unit** (a unit is one Spark submission: a region,
or a shard of a logical region's regions), not once per subtask. The subtasks the unit computes are
the partitions of that one Spark computation, so the cost of a vertex does not grow with its
parallelism.

`inputs` maps each upstream vertex name to one DataFrame holding exactly the rows this call's
subtasks consume (a second edge from the same vertex appears as ``"<name>[<edge index>]"``):

- HASH(keys): the rows whose ``pmod(hash(keys), parallelism)`` is one of this call's subtasks, so
  every key this call sees is whole; `ctx.hash_subtask(*keys)` gives each row's subtask;
- FORWARD and RESCALE (pointwise): the rows of the producer subtasks wired to this call's subtasks;
- REBALANCE: this call's share of the rows;
- BROADCAST: the producer's whole output (wrap it in ``F.broadcast`` to make Spark broadcast it).

regionflow does not repartition an input inside a call: Spark's own ``groupBy`` or ``join`` then
shuffles once, with its partial aggregation, as in a plain PySpark program.

`ctx` is a `TaskContext`: which subtasks of how many this call computes, in which attempt and
region, and its run as Airflow gives it to an operator (`RunContext`): ``ctx.logical_date``,
``ctx.data_interval_start`` / ``ctx.data_interval_end`` (timezone-aware, or None), ``ctx.ds`` /
``ctx.ds_nodash``, ``ctx.params`` (the DAG's params merged with ``dag_run.conf``), ``ctx.dag_id``,
``ctx.run_id``, ``ctx.try_number``, ``ctx.map_index``; ``ctx.reads`` are the vertex's input paths as
rendered for the run. A speculative copy sees exactly its original's values.

A source takes its share of the input with `ctx.range` (generated ids) or `ctx.share` (a table read
whole), so that the units of one vertex never produce the same rows twice.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ...core.run_context import RunContext


@dataclass(frozen=True)
class TaskContext:
    """The subtasks ``[first, end)`` of one vertex that one call of its function computes."""

    job: str
    vertex: str
    first: int
    end: int
    parallelism: int
    attempt_id: str
    region: str
    run_id: str  # the Airflow run id (`regionflow run`: its run id)
    run: RunContext = field(default_factory=RunContext)
    reads: tuple[str, ...] = ()  # the vertex's input paths, rendered for the run

    @property
    def logical_date(self) -> datetime | None:
        return self.run.logical_date

    @property
    def data_interval_start(self) -> datetime | None:
        return self.run.data_interval_start

    @property
    def data_interval_end(self) -> datetime | None:
        return self.run.data_interval_end

    @property
    def ds(self) -> str | None:
        return self.run.ds

    @property
    def ds_nodash(self) -> str | None:
        return self.run.ds_nodash

    @property
    def params(self) -> Mapping[str, Any]:
        return self.run.params

    @property
    def dag_id(self) -> str:
        return self.run.dag_id or self.job

    @property
    def try_number(self) -> int | None:
        return self.run.try_number

    @property
    def map_index(self) -> int:
        return self.run.map_index

    @property
    def subtasks(self) -> range:
        return range(self.first, self.end)

    @property
    def subtask_count(self) -> int:
        """How many subtasks (partitions) this call computes."""
        return self.end - self.first

    @property
    def whole(self) -> bool:
        """True when this call computes every subtask of the vertex."""
        return self.first == 0 and self.end == self.parallelism

    @property
    def subtask(self) -> str:
        """A name for log and error messages: ``vertex#3`` or ``vertex#0-7``."""
        if self.subtask_count == 1:
            return f"{self.vertex}#{self.first}"
        return f"{self.vertex}#{self.first}-{self.end - 1}"

    def split(self, total: int) -> tuple[int, int]:
        """The half-open share ``[start, end)`` of `total` items that this call's subtasks own, when
        the items are split evenly over all the vertex's subtasks."""
        return self.first * total // self.parallelism, self.end * total // self.parallelism

    def range(self, spark: Any, total: int):
        """``spark.range`` over this call's share of ``total`` ids, one partition per subtask."""
        start, end = self.split(total)
        return spark.range(start, end, numPartitions=max(1, self.subtask_count))

    def share(self, frame: Any, *columns: str):
        """This call's share of a frame every unit reads whole (a table scan): the rows whose
        ``pmod(hash(columns), parallelism)`` is one of its subtasks; the frame itself when the call
        computes every subtask."""
        if self.whole:
            return frame
        if not columns:
            raise ValueError(f"vertex {self.vertex!r}: ctx.share(frame) needs the columns to split the rows by, "
                             f"e.g. ctx.share(frame, 'l_orderkey')")
        from pyspark.sql import functions as F

        bucket = F.pmod(F.hash(*[F.col(c) for c in columns]), F.lit(self.parallelism))
        return frame.where((bucket >= self.first) & (bucket < self.end))

    @property
    def subtask_column(self):
        """A Column with each row's subtask index by partition: ``first + spark_partition_id()``.
        Exact for a source built with `range`; for rows of a HASH input use `hash_subtask`."""
        from pyspark.sql import functions as F

        return F.spark_partition_id() + F.lit(self.first)

    def hash_subtask(self, *keys: str):
        """A Column with the subtask a HASH edge by `keys` routes each row to (and so the subtask
        of this call that consumes it)."""
        from pyspark.sql import functions as F

        return F.pmod(F.hash(*[F.col(k) for k in keys]), F.lit(self.parallelism))


def reference_context(job: str, vertex: str, run_id: str, parallelism: int = 1, run: RunContext | None = None,
                      reads: tuple[str, ...] = ()) -> TaskContext:
    """The context of a vertex run whole in `regionflow run --reference` (plain PySpark): the same run
    values as the regionflow run."""
    run = run or RunContext()
    return TaskContext(job, vertex, 0, parallelism, parallelism, "reference", "reference", run.run_id or run_id,
                       run, reads)
