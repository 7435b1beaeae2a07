"""One unit's vertices as Spark computations: each vertex function is called once per unit.

The unit's subtasks of a vertex are the partitions of one DataFrame (see `exchange`). Vertices are
visited in topological order; an input whose producer runs in this unit is the producer's DataFrame
(no write, one Spark plan across the region), an input from another unit is read from the partition
store, pruned to this unit's buckets. Only then are the outputs materialised, one Spark job per
blocking output edge and one per sink (its figures are observed by the write), whatever the
parallelism.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ...core.graph import Distribution, Vertex
from ...core.keygroups import key_grouped_edges
from ...core.plan import Plan
from ...core.run_context import RunContext
from ...core.templates import vertex_reads
from ...core.topology import ExecutionEdge
from ..data.descriptors import load_descriptor
from ..data.filesystems import join
from ..data.integrity import VERIFY_PAGE_CHECKSUMS, check_partition
from ..data.sinks import SinkCommitter
from ..data.store import PartitionStore, partition_relpath
from ..data.task import UnitTask
from .api import TaskContext
from .exchange import (
    BUCKET_COLUMN,
    KEY_GROUPED_DIRECTORY,
    ROUTING_COLUMNS,
    SUBTASK_COLUMN,
    UNIT_COLUMN,
    Span,
    bucket_of_rows,
    consumers_fed,
    directories_read,
    key_groups_read,
    missing_keys,
    only_buckets,
    unit_of_rows,
    with_bucket,
)
from .figures import SinkFigures

SCHEMA_FILE = "_rf_schema.json"
BROADCAST_UNIT = -1  # the one directory of a BROADCAST edge's dataset: every consumer unit reads it whole


class VertexFailure(Exception):
    """A vertex function (or the Spark work it defined) failed for the subtasks of one unit."""

    def __init__(self, vertex: str, subtasks: str, attempt: str, error: BaseException) -> None:
        super().__init__(f"vertex {vertex!r} subtask {subtasks} failed in attempt {attempt}: "
                         f"{type(error).__name__}: {error}")
        self.vertex = vertex
        self.subtask = subtasks


class WiringError(ValueError):
    """A vertex's output does not fit an edge (a HASH key column it does not have)."""


@dataclass
class _Part:
    """One call of a vertex function: its span, context and output."""

    vertex: Vertex
    index: int  # vertex index in the topology
    span: Span
    ctx: TaskContext
    frame: Any = None
    uses: int = 0
    writes: list[ExecutionEdge] = field(default_factory=list)
    routed: bool = False  # some in-unit consumer takes only some of its buckets
    persisted: bool = False
    schema: Any = None  # fetched once, for the parts whose rows regionflow routes or writes


class UnitComputer:
    """Computes every vertex of a unit inside one Spark session, then writes its outputs."""

    def __init__(self, spark, plan: Plan, task: UnitTask, store: PartitionStore, attempt_dir: str) -> None:
        self.spark = spark
        self._manifests: dict[str, Any] = {}  # producer unit dir -> its manifest (read once per attempt)
        self.plan = plan
        self.topology = plan.topology
        self.task = task
        self.store = store
        self.attempt_dir = attempt_dir.rstrip("/")
        self.in_unit = {s for r in task.regions for s in plan.regions[r].members}
        # A row's directory names its consumer unit by the unit's shard index within its own logical region
        # (`Shard.index`), not by its position among all the plan's units, which another region's shard count
        # would move.
        self.shard_of_region = {r: shard.index for shard in plan.shards(task.max_shards) for r in shard.regions}
        self.shard_index = self.shard_of_region[task.regions[0]] if task.regions else -1
        self.key_groups = key_grouped_edges(plan, task.max_shards)  # edge index -> K
        self.unsorted_key_groups = set(task.unsorted_key_groups)
        self.files = max(1, task.slots)  # at most this many files per output: one per core
        self._unit_runs: dict[int, list[tuple[int, int]]] = {}
        self.spans = self._unit_spans()
        self.parts: dict[int, list[_Part]] = {}
        self.sink_figures: dict[str, dict[str, dict[str, int]]] = {}
        self.run_context = RunContext.from_dict(task.context)

    # ---- the unit ------------------------------------------------------------------------------

    def run(self) -> None:
        """Define every vertex's DataFrame (no Spark job yet), check the keys regionflow routes by,
        then materialise the outputs.

        Asking Spark for a frame's columns costs an analysis of its whole plan (~0.1 s per vertex of
        a TPC-H query, more than a pipelined region's own overhead), so keys are checked up front
        only for the parts whose rows regionflow routes or writes; the keys of an edge whose
        producer and consumers are all in this unit (no routing: the consumer reads the frame as it
        is) are checked only when the unit fails, to name the dropped key instead of Spark's error."""
        for vertex_index, spans in sorted(self.spans.items()):
            self.parts[vertex_index] = [self._define(vertex_index, span) for span in spans]
        parts = [part for vertex_parts in self.parts.values() for part in vertex_parts]
        for part in parts:
            self._count_uses(part)
        for part in parts:
            if part.writes or part.routed:
                self._check_keys(part)
        try:
            for part in parts:
                self._materialise(part)
        except VertexFailure:
            for part in parts:  # a dropped key explains the failure better than Spark's analysis error
                if part.schema is None:
                    self._check_keys(part, failing=True)
            raise
        for part in parts:
            if part.persisted:  # not `frame.is_cached`: on Spark Connect that is an analysis RPC per frame
                part.frame.unpersist()

    def _unit_spans(self) -> dict[int, list[Span]]:
        """Per vertex, the unit's subtasks as runs of consecutive local indices (one run in every plan
        the planner makes: shards are contiguous)."""
        spans: dict[int, list[Span]] = {}
        topology = self.topology
        for subtask in sorted(self.in_unit):
            vertex = topology.vertex_of(subtask)
            index = subtask - topology.offsets[vertex]
            runs = spans.setdefault(vertex, [])
            if runs and runs[-1].end == index:
                runs[-1] = Span(runs[-1].first, index + 1)
            else:
                runs.append(Span(index, index + 1))
        return spans

    def _define(self, vertex_index: int, span: Span) -> _Part:
        name = self.topology.vertex_names[vertex_index]
        vertex = self.plan.graph.vertices[name]
        ctx = TaskContext(self.plan.graph.name, name, span.first, span.end, vertex.parallelism,
                          self.task.attempt_id, self._region_name(vertex_index, span),
                          self.run_context.run_id or self.task.run_id, self.run_context,
                          vertex_reads(self.task.rendered, vertex))
        part = _Part(vertex, vertex_index, span, ctx)
        try:
            inputs = self._inputs(vertex_index, span)
            part.frame = vertex.resolve_fn()(self.spark, inputs, ctx)
            check_frame(part.frame)
        except Exception as error:  # noqa: BLE001 - any user or Spark error fails this vertex
            raise VertexFailure(name, ctx.subtask, self.task.attempt_id, error) from error
        return part

    def _region_name(self, vertex_index: int, span: Span) -> str:
        subtask = self.topology.offsets[vertex_index] + span.first
        region = self.plan.region_set.region_of[subtask]
        return self.plan.region_name(self.plan.regions[region])

    def _check_keys(self, part: _Part, failing: bool = False) -> None:
        """Raise a VertexFailure naming the vertex, the edge and the column when the part's output
        lacks a HASH key of one of its edges. `failing`: the unit already failed; a frame Spark
        cannot even analyse is left to that failure."""
        edges = [e for e in self.topology.out_edges[part.index] if e.edge.distribution is Distribution.HASH]
        if not edges and not part.writes:
            return
        try:
            part.schema = part.frame.schema
        except Exception as error:  # noqa: BLE001 - the vertex's own plan does not analyse
            if failing:
                return
            raise VertexFailure(part.vertex.name, part.ctx.subtask, self.task.attempt_id, error) from error
        columns = part.schema.fieldNames()
        for exec_edge in edges:
            missing = missing_keys(exec_edge, columns)
            if missing:
                wiring = WiringError(
                    f"edge {exec_edge.edge.src} -> {exec_edge.edge.dst} is HASH by {list(exec_edge.edge.keys)} "
                    f"but the output of {part.vertex.name!r} has no column {missing[0]!r} (its columns: "
                    f"{columns}); keep the key column in the vertex's result or hash by another key")
                raise VertexFailure(part.vertex.name, part.ctx.subtask, self.task.attempt_id, wiring) from wiring

    # ---- inputs --------------------------------------------------------------------------------

    def _inputs(self, vertex_index: int, span: Span) -> dict[str, Any]:
        inputs: dict[str, Any] = {}
        for exec_edge in self.topology.in_edges[vertex_index]:
            src = exec_edge.edge.src
            key = src if src not in inputs else f"{src}[{exec_edge.index}]"
            frames = [self._from_memory(exec_edge, part, span) for part in self.parts.get(exec_edge.src, [])
                      if consumers_fed(self.topology, exec_edge, part.span).overlaps(span)]
            stored = self._from_store(exec_edge, span)
            if stored is not None:
                frames.append(stored)
            inputs[key] = _union_all(frames)
        return inputs

    def _from_memory(self, exec_edge: ExecutionEdge, producer: _Part, consumers: Span):
        if exec_edge.edge.distribution is Distribution.BROADCAST:
            return producer.frame
        if consumers.covers(consumers_fed(self.topology, exec_edge, producer.span)):
            return producer.frame
        producer.routed = True
        routed = with_bucket(producer.frame, self.topology, exec_edge, producer.span)
        return only_buckets(routed, consumers).drop(BUCKET_COLUMN)

    def _from_store(self, exec_edge: ExecutionEdge, consumers: Span):
        """This span's rows of `exec_edge` written by producer units other than this one, or None."""
        datasets = self._producer_datasets(exec_edge, consumers)
        if not datasets:
            return None
        schema = self._schema(datasets[0])
        key_groups = self.key_groups.get(exec_edge.index)
        read = directories_read(exec_edge, self.shard_index, key_groups)
        groups = key_groups_read(consumers, self.topology.parallelism[exec_edge.dst], key_groups)
        several_spans = key_groups is None and len(self.spans[exec_edge.dst]) > 1  # key groups are per span
        frames = []
        for dataset in datasets:  # each checked against its producer's commit first (`integrity`)
            for part in ([None] if read is None else [f"{UNIT_COLUMN}={value}" for value in read]):
                check_partition(self.store.fs, dataset, part, self._manifests)
            frame = (self.spark.read.schema(schema).options(**VERIFY_PAGE_CHECKSUMS).option("basePath", dataset)
                     .parquet(dataset))
            if read is not None:  # these directories only: partition pruning
                frame = frame.where(frame[UNIT_COLUMN].between(read.start, read.stop - 1))
                if groups is not None:  # sorted by key group (usually): the page index skips the others' pages
                    frame = frame.where(frame[BUCKET_COLUMN].between(groups.start, groups.stop - 1))
                elif several_spans:
                    frame = only_buckets(frame, consumers)
            frames.append(frame.drop(*ROUTING_COLUMNS))
        return _union_all(frames)

    def _producer_datasets(self, exec_edge: ExecutionEdge, consumers: Span) -> list[str]:
        """The per-unit datasets (``units/<unit>/e<edge>``) holding what `consumers` read, in
        producer order, from the input descriptors the task carries."""
        topology = self.topology
        first = topology.consumed_group(exec_edge, consumers.first).index
        last = topology.consumed_group(exec_edge, consumers.end - 1).index
        datasets: dict[str, None] = {}
        for group in range(first, last + 1):
            ref = self.task.inputs.get(str(group))
            for location in (load_descriptor(ref) if ref is not None else []):
                if location.producer not in self.in_unit:
                    datasets.setdefault(location.path, None)
            if ref is None and any(p not in self.in_unit for p in topology.groups[group].producers):
                raise RuntimeError(f"the unit task names no input descriptor for partition group {group}")
        return list(datasets)

    def _schema(self, dataset: str):
        from pyspark.sql.types import IntegerType, StructField, StructType

        schema = StructType.fromJson(json.loads(self.store.fs.read_text(join(dataset, SCHEMA_FILE))))
        schema = schema.add(StructField(BUCKET_COLUMN, IntegerType(), True))
        return schema.add(StructField(UNIT_COLUMN, IntegerType(), True))

    # ---- outputs -------------------------------------------------------------------------------

    def _count_uses(self, part: _Part) -> None:
        """In-memory readers, store writes and the sink; a frame used more than once is cached."""
        offset = self.topology.offsets
        for exec_edge in self.topology.out_edges[part.index]:
            fed = consumers_fed(self.topology, exec_edge, part.span)
            consumers = range(offset[exec_edge.dst] + fed.first, offset[exec_edge.dst] + fed.end)
            inside = sum(1 for c in consumers if c in self.in_unit)
            part.uses += len(self.parts.get(exec_edge.dst, [])) if inside else 0
            if inside < len(consumers):
                part.writes.append(exec_edge)
        total = part.uses + len(part.writes) + (1 if part.vertex.sink else 0)
        if total > 1:
            part.frame = part.frame.persist()
            part.persisted = True

    def _materialise(self, part: _Part) -> None:
        try:
            for exec_edge in part.writes:
                self._write(exec_edge, part)
            if part.vertex.sink:
                self._stage_sink(part)
        except Exception as error:  # noqa: BLE001
            raise VertexFailure(part.vertex.name, part.ctx.subtask, self.task.attempt_id, error) from error

    def _write(self, exec_edge: ExecutionEdge, part: _Part) -> None:
        """One dataset per edge and unit, a directory per consumer unit, at most one file per core
        in each. With several consumer units, each row's unit follows from its bucket, computed
        before the coalesce on the vertex's own partitions (a pointwise bucket depends on the
        producer subtask). With one (a BROADCAST edge, or every consumer subtask in one unit, the
        default), that unit reads every row as one span: the rows carry no bucket, which would only
        cost its hash and its bytes (all-blocking Q9 and Q18: 9-12 % faster at SF 0.1, 1-3 % at SF 1).
        On a key-grouped edge (`core.keygroups`) every row goes to one directory carrying its key group as its
        bucket, each file sorted by it, so a consumer's range of key groups skips the other pages; unsorted
        when the consumer's region was last decided as one shard, which reads every group
        (`spark.data.history`)."""
        dataset = join(self.attempt_dir, partition_relpath(exec_edge.index))
        broadcast = exec_edge.edge.distribution is Distribution.BROADCAST
        key_groups = self.key_groups.get(exec_edge.index)
        sort_by = None
        if key_groups is not None:  # one directory of key groups, whatever the consumer's units
            routed = part.frame.withColumn(BUCKET_COLUMN, bucket_of_rows(  # a hash of the row's own columns
                self.topology, exec_edge, part.span, part.schema.fieldNames(), key_groups))
            unit = KEY_GROUPED_DIRECTORY
            sort_by = None if exec_edge.index in self.unsorted_key_groups else BUCKET_COLUMN
        else:
            unit = BROADCAST_UNIT if broadcast else unit_of_rows(self._consumer_units(exec_edge.dst))
            routed = part.frame if isinstance(unit, int) else with_bucket(
                part.frame, self.topology, exec_edge, part.span, part.schema.fieldNames())
        write_directories(routed, dataset, UNIT_COLUMN, unit, self.files, sort_by=sort_by)
        self.store.fs.write_text(join(dataset, SCHEMA_FILE), part.schema.json())

    def _consumer_units(self, vertex_index: int) -> list[tuple[int, int]]:
        """``(first local subtask, shard index)`` runs of a vertex's subtasks over the units of its region."""
        runs = self._unit_runs.get(vertex_index)
        if runs is None:
            region_of = self.plan.region_set.region_of
            base = self.topology.offsets[vertex_index]
            runs = []
            for local in range(self.topology.parallelism[vertex_index]):
                unit = self.shard_of_region[region_of[base + local]]
                if not runs or runs[-1][1] != unit:
                    runs.append((local, unit))
            self._unit_runs[vertex_index] = runs
        return runs

    def _stage_sink(self, part: _Part) -> None:
        """At most one Parquet file per core (and per subtask), numbered ``first``, ``first + 1``, ...
        so that no two units' files share a name; the figures per file are observed by the write
        itself (`SinkFigures`), not read back by a second job."""
        from pyspark.sql import functions as F

        staging = SinkCommitter.staging_root(self.attempt_dir, part.vertex.name)
        files = min(self.files, part.span.count)
        first = part.span.first  # one file: all of it is subtask `first`'s
        figures = SinkFigures(part.frame, range(first, first + files))
        subtask = first if files == 1 else F.spark_partition_id() + F.lit(first)
        write_directories(part.frame, staging, SUBTASK_COLUMN, subtask, files, observe=figures.observe)
        self.sink_figures[part.vertex.name] = figures.per_subtask()


def write_directories(frame, root: str, column: str, value, files: int, observe=None,
                      sort_by: str | None = None) -> None:
    """`frame` as Parquet under `root` in Hive-style ``column=<v>`` directories, at most `files` files
    in each. `value` is each row's directory: a Column (computed after the coalesce, so a partition id
    is the file's) split by ``partitionBy``, or an int when every row goes to one directory, which is
    then written directly: the same layout without partitionBy's per-row routing and its
    dynamic-partition commit (~0.3 s a write on this project's 2-core box). `observe`: applied to the
    frame as written (`SinkFigures.observe`), after the directory column is computed. `sort_by`: a column
    each file's rows are sorted by."""
    one_directory = isinstance(value, int)
    frame = frame.coalesce(files)
    if sort_by is not None:
        frame = frame.sortWithinPartitions(sort_by)
    if not one_directory:
        frame = frame.withColumn(column, value)
    writer = (observe(frame) if observe else frame).write.mode("overwrite")
    if one_directory:
        writer.parquet(join(root, f"{column}={value}"))
    else:
        writer.partitionBy(column).parquet(root)


def _union_all(frames: list):
    result = frames[0]
    for frame in frames[1:]:
        result = result.unionByName(frame)
    return result


def check_frame(frame) -> None:
    """Raise TypeError unless `frame` is a DataFrame (classic or Spark Connect)."""
    from pyspark.sql import DataFrame

    if not isinstance(frame, DataFrame):
        raise TypeError(f"the vertex function returned {type(frame).__name__}; it must return a DataFrame")
