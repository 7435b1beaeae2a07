"""The region program: what one Spark submission runs for a unit (a region or a shard of regions).

Inside one Spark application it computes every subtask of the unit's regions, in schedule order:

- an edge whose producer runs in this unit stays in memory (DataFrames flow from subtask to subtask;
  shuffles are Spark's own); the consumer gets the slice of the producer's output its wiring gives:
  HASH by key, REBALANCE and a pointwise fan-out by a hash of the whole row, FORWARD / pointwise
  fan-in / BROADCAST whole;
- an edge whose producer ran in another unit is read from the partition store, through the input
  descriptor of its partition group;
- an output with a consumer outside the unit is written to the attempt's directory, bucketed the
  same way (one bucket per consumer subtask, or per fan-out share);
- a sink subtask's output is staged as one Parquet file inside the attempt.

Then the attempt commits: one atomic rename publishes all of it, the first attempt to commit wins,
and the winner publishes its sink files. A failing vertex function fails the unit with the vertex,
the subtask and the Python error; nothing of a failed attempt is ever visible to a reader.
`--reference` instead runs each vertex once, whole, as a plain PySpark program (the ground truth).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
import traceback
from dataclasses import dataclass
from typing import Any

from ..core.graph import Distribution, Vertex, load_job
from ..core.plan import Plan
from ..core.topology import ExecutionEdge, pointwise_consumers
from .api import TaskContext, reference_context
from .descriptors import load_descriptor
from .store import PartitionStore, SinkCommitter
from .task import UnitTask

BUCKET_COLUMN = "_rf_bucket"
SCHEMA_FILE = "_rf_schema.json"
CHECKSUM_MODULUS = 1 << 64
EXIT_VERTEX_FAILED = 3


class VertexFailure(Exception):
    """A vertex function (or the Spark work it defined) failed for one subtask."""

    def __init__(self, subtask: str, attempt: str, error: BaseException) -> None:
        super().__init__(f"vertex {subtask.rpartition('#')[0]!r} subtask {subtask} failed in attempt {attempt}: "
                         f"{type(error).__name__}: {error}")
        self.subtask = subtask


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="regionflow-region-program")
    parser.add_argument("--task", required=True, help="unit task JSON file written by the runner")
    args = parser.parse_args(argv)
    task = UnitTask.read(args.task)
    plan = Plan(load_job(task.job), task.mode)
    spark = _session(task)
    try:
        if task.reference:
            _write_result(task, run_reference(spark, plan, task))
        else:
            run_unit(spark, plan, task)
    except VertexFailure as failure:
        print(f"regionflow: error: {failure}", file=sys.stderr, flush=True)
        traceback.print_exc()
        return EXIT_VERTEX_FAILED
    finally:
        spark.stop()
    return 0


def _session(task: UnitTask):
    from pyspark.sql import SparkSession

    from .connect import CONNECT_CLIENT_VARIABLES

    # This is a classic Spark driver: a parent that used Spark Connect client sessions (the session
    # backend's process, a test run) passes on variables that would make our SparkSession a client.
    for variable in CONNECT_CLIENT_VARIABLES:
        os.environ.pop(variable, None)

    return SparkSession.builder.appName(f"regionflow {task.unit_name} {task.attempt_id}").getOrCreate()


# ---- one unit ----------------------------------------------------------------------------------------


def run_unit(spark, plan: Plan, task: UnitTask) -> dict[str, Any]:
    store = PartitionStore(task.data_dir, task.run_id, spark=spark)
    committed = store.committed(task.unit_key)
    if committed is not None:  # an earlier attempt committed, then its process died: finish its publishing
        _log(f"unit {task.unit_name} was already committed by attempt {committed.manifest.get('attempt_id')}")
        _publish_sinks(spark, plan, task, committed.path, committed.manifest)
        return committed.manifest
    started = time.time()
    attempt_dir = store.attempt_dir(task.unit_key, task.attempt_id)
    computer = UnitComputer(spark, plan, task, store, attempt_dir)
    try:
        for wave in _waves(plan, task):
            computer.run_regions(wave)
    except BaseException:
        store.discard(task.unit_key, task.attempt_id)
        raise
    manifest = {
        "attempt_id": task.attempt_id,
        "host": task.host,
        "unit": task.unit_name,
        "regions": task.regions,
        "started": started,
        "finished": time.time(),
        "sinks": computer.sink_figures,
    }
    result = store.commit(task.unit_key, task.attempt_id, manifest)
    if not result.won:
        _log(f"attempt {task.attempt_id} lost the commit of {task.unit_name} to attempt {result.winner}; discarded")
        return manifest
    winner = store.committed(task.unit_key)
    _publish_sinks(spark, plan, task, winner.path, winner.manifest)
    _log(f"attempt {task.attempt_id} committed {task.unit_name}")
    return manifest


def _publish_sinks(spark, plan: Plan, task: UnitTask, committed_dir: str, manifest: dict) -> None:
    for vertex_name, figures in manifest.get("sinks", {}).items():
        vertex = plan.graph.vertices[vertex_name]
        committer = SinkCommitter(resolve_sink_path(vertex, task.data_dir), plan.graph.name, task.run_id,
                                  vertex=vertex_name, spark=spark)
        committer.publish(committed_dir, vertex_name, sorted(int(s) for s in figures))


def resolve_sink_path(vertex: Vertex, data_dir: str) -> str:
    """A relative sink path lives under the data dir's ``sinks/``; absolute paths and URIs as given."""
    sink = vertex.sink
    if sink is None:
        raise ValueError(f"vertex {vertex.name!r} has no sink")
    if sink.is_absolute:
        return sink.path
    return f"{data_dir.rstrip('/')}/sinks/{os.path.normpath(sink.path)}"  # Sink checked it stays inside


def _waves(plan: Plan, task: UnitTask) -> list[list[int]]:
    """The unit's regions in schedule order, `width` at a time; one at a time when a region of the
    unit reads from another region of the same unit (possible after a logical-region merge)."""
    regions = list(task.regions)
    if task.width <= 1 or _depends_within(plan, regions):
        return [[r] for r in regions]
    return [regions[i:i + task.width] for i in range(0, len(regions), task.width)]


def _depends_within(plan: Plan, regions: list[int]) -> bool:
    inside = set(regions)
    producers = plan.region_set.group_producers
    return any(p in inside and p != r for r in regions for g, _ in plan.regions[r].consumed for p in producers[g])


@dataclass
class _Output:
    frame: Any
    uses: int


class UnitComputer:
    """Computes the subtasks of a unit's regions inside one Spark application."""

    def __init__(self, spark, plan: Plan, task: UnitTask, store: PartitionStore, attempt_dir: str) -> None:
        self.spark = spark
        self.plan = plan
        self.topology = plan.topology
        self.task = task
        self.store = store
        self.attempt_dir = attempt_dir.rstrip("/")
        self.in_unit = self._subtasks_in_unit()
        self.outputs: dict[int, _Output] = {}
        self.sink_figures: dict[str, dict[str, dict[str, int]]] = {}
        self.descriptors: dict[int, dict[int, str]] = {}
        self.lock = threading.Lock()

    def _subtasks_in_unit(self) -> set[int]:
        return {s for r in self.task.regions for s in self.plan.regions[r].members}

    def run_regions(self, regions: list[int]) -> None:
        if len(regions) == 1:
            self.run_region(regions[0])
            return
        threads = [_Worker(self.run_region, r) for r in regions]
        for worker in threads:
            worker.start()
        for worker in threads:
            worker.join_and_raise()

    def run_region(self, region_index: int) -> None:
        region = self.plan.regions[region_index]
        region_name = self.plan.region_name(region)
        for subtask in region.members:
            self.run_subtask(subtask, region_name)
        for subtask in region.members:
            self._release(subtask)

    def run_subtask(self, subtask: int, region_name: str) -> None:
        topology = self.topology
        vertex_index = topology.vertex_of(subtask)
        local = subtask - topology.offsets[vertex_index]
        vertex = self.plan.graph.vertices[topology.vertex_names[vertex_index]]
        ctx = TaskContext(self.plan.graph.name, vertex.name, local, vertex.parallelism,
                          self.task.attempt_id, region_name, self.task.run_id)
        try:
            inputs = self._inputs(vertex_index, local)
            frame = vertex.resolve_fn()(self.spark, inputs, ctx)
            _check_frame(frame, ctx)
            uses = self._in_memory_uses(vertex_index, local)
            writes = self._outgoing_writes(vertex_index, local)
            if uses + len(writes) + (1 if vertex.sink else 0) > 1:
                frame = frame.persist()
            for exec_edge in writes:
                self._write_partition(exec_edge, subtask, local, frame)
            if vertex.sink:
                self._stage_sink(vertex, local, frame)
        except VertexFailure:
            raise
        except Exception as error:  # noqa: BLE001 - any user or Spark error fails this subtask
            raise VertexFailure(ctx.subtask, self.task.attempt_id, error) from error
        with self.lock:
            self.outputs[subtask] = _Output(frame, uses)
        _log(f"{ctx.subtask} done")

    # ---- inputs -----------------------------------------------------------------------------------

    def _inputs(self, vertex_index: int, local: int) -> dict[str, Any]:
        inputs: dict[str, Any] = {}
        for exec_edge in self.topology.in_edges[vertex_index]:
            group = self.topology.consumed_group(exec_edge, local)
            key = exec_edge.edge.src if exec_edge.edge.src not in inputs else f"{exec_edge.edge.src}[{exec_edge.index}]"
            inside = [p for p in group.producers if p in self.in_unit]
            outside = [p for p in group.producers if p not in self.in_unit]
            frames = [self._slice(exec_edge, p, local) for p in inside]
            if outside:
                frames.append(self._read_partitions(exec_edge, group.index, outside, local))
            inputs[key] = _union_all(frames)
        return inputs

    def _slice(self, exec_edge: ExecutionEdge, producer: int, consumer_local: int):
        with self.lock:
            output = self.outputs.get(producer)
        if output is None:
            raise RuntimeError(f"{self.topology.subtask_name(producer)} has not run in this unit yet")
        bucket, buckets = _bucket_of(self.topology, exec_edge, producer, consumer_local)
        if buckets is None:
            return output.frame
        return output.frame.where(_bucket_expression(exec_edge, output.frame, buckets) == bucket)

    def _read_partitions(self, exec_edge: ExecutionEdge, group: int, producers: list[int], consumer_local: int):
        locations = self._locations(group)
        paths = []
        for producer in producers:
            base = locations[producer]
            bucket, buckets = _bucket_of(self.topology, exec_edge, producer, consumer_local)
            paths.append(base if buckets is None else f"{base}/{BUCKET_COLUMN}={bucket}")
        schema = self._schema(locations[producers[0]])
        existing = [p for p in paths if self.store.fs.exists(p)]
        if not existing:
            return self.spark.createDataFrame([], schema)
        return self.spark.read.schema(schema).parquet(*existing)

    def _locations(self, group: int) -> dict[int, str]:
        with self.lock:
            cached = self.descriptors.get(group)
        if cached is None:
            ref = self.task.inputs.get(str(group))
            if ref is None:
                raise RuntimeError(f"the unit task names no input descriptor for partition group {group}")
            cached = {location.producer: location.path for location in load_descriptor(ref)}
            with self.lock:
                self.descriptors[group] = cached
        return cached

    def _schema(self, partition_path: str):
        from pyspark.sql.types import StructType

        return StructType.fromJson(json.loads(self.store.fs.read_text(f"{partition_path}/{SCHEMA_FILE}")))

    # ---- outputs ----------------------------------------------------------------------------------

    def _in_memory_uses(self, vertex_index: int, local: int) -> int:
        uses = 0
        for exec_edge in self.topology.out_edges[vertex_index]:
            group = self.topology.produced_group(exec_edge, local)
            uses += sum(1 for c in group.consumers if c in self.in_unit)
        return uses

    def _outgoing_writes(self, vertex_index: int, local: int) -> list[ExecutionEdge]:
        writes = []
        for exec_edge in self.topology.out_edges[vertex_index]:
            group = self.topology.produced_group(exec_edge, local)
            if any(c not in self.in_unit for c in group.consumers):
                writes.append(exec_edge)
        return writes

    def _write_partition(self, exec_edge: ExecutionEdge, producer: int, local: int, frame) -> None:
        path = f"{self.attempt_dir}/e{exec_edge.index}/p{producer}"
        _, buckets = _bucket_of(self.topology, exec_edge, producer, None)
        if buckets is None:
            frame.write.mode("overwrite").parquet(path)
        else:
            bucketed = frame.withColumn(BUCKET_COLUMN, _bucket_expression(exec_edge, frame, buckets))
            bucketed.write.mode("overwrite").partitionBy(BUCKET_COLUMN).parquet(path)
        self.store.fs.write_text(f"{path}/{SCHEMA_FILE}", frame.schema.json())

    def _stage_sink(self, vertex: Vertex, local: int, frame) -> None:
        staging = SinkCommitter.staging_dir(self.attempt_dir, vertex.name, local)
        frame.coalesce(1).write.mode("overwrite").parquet(staging)
        rows, checksum = frame_figures(self.spark.read.parquet(staging))
        with self.lock:
            self.sink_figures.setdefault(vertex.name, {})[str(local)] = {"rows": rows, "checksum": checksum}

    def _release(self, subtask: int) -> None:
        """Unpersist outputs no later region of the unit reads."""
        with self.lock:
            output = self.outputs.get(subtask)
        if output is not None and output.uses == 0 and output.frame.is_cached:
            output.frame.unpersist()


class _Worker(threading.Thread):
    def __init__(self, target, *args) -> None:
        super().__init__(daemon=True)
        self._call = (target, args)
        self.error: BaseException | None = None

    def run(self) -> None:
        target, args = self._call
        try:
            target(*args)
        except BaseException as error:  # noqa: BLE001 - re-raised in the joining thread
            self.error = error

    def join_and_raise(self) -> None:
        self.join()
        if self.error is not None:
            raise self.error


# ---- wiring ---------------------------------------------------------------------------------------------


def _bucket_of(topology, exec_edge: ExecutionEdge, producer: int, consumer_local: int | None):
    """(bucket this consumer reads, number of buckets the producer writes) — None buckets: whole."""
    distribution = exec_edge.edge.distribution
    consumers = topology.parallelism[exec_edge.dst]
    if distribution in (Distribution.HASH, Distribution.REBALANCE):
        return consumer_local, consumers
    if distribution is Distribution.RESCALE:
        producers = topology.parallelism[exec_edge.src]
        lo, hi = pointwise_consumers(producer - topology.offsets[exec_edge.src], producers, consumers)
        if hi - lo > 1:
            return (None if consumer_local is None else consumer_local - lo), hi - lo
    return None, None


def _bucket_expression(exec_edge: ExecutionEdge, frame, buckets: int):
    from pyspark.sql import functions as F

    if exec_edge.edge.distribution is Distribution.HASH:
        columns = [F.col(key) for key in exec_edge.edge.keys]
    else:
        columns = [F.col(name) for name in frame.columns]
    return F.pmod(F.hash(*columns), F.lit(buckets))


def _union_all(frames: list):
    result = frames[0]
    for frame in frames[1:]:
        result = result.unionByName(frame)
    return result


def _check_frame(frame, ctx: TaskContext) -> None:
    from pyspark.sql import DataFrame

    if not isinstance(frame, DataFrame):
        raise TypeError(f"the vertex function returned {type(frame).__name__}; it must return a DataFrame")


def frame_figures(frame) -> tuple[int, int]:
    """Row count and an order-independent checksum: the sum of every row's xxhash64, mod 2^64."""
    from pyspark.sql import functions as F

    row = frame.agg(
        F.count(F.lit(1)).alias("rows"),
        F.sum(F.xxhash64(*[F.col(c) for c in frame.columns]).cast("decimal(38,0)")).alias("checksum"),
    ).collect()[0]
    return int(row["rows"]), int(row["checksum"] or 0) % CHECKSUM_MODULUS


# ---- reference ----------------------------------------------------------------------------------------


def run_reference(spark, plan: Plan, task: UnitTask) -> dict[str, Any]:
    """Every vertex once, whole (one subtask), inputs in memory: no regions, no partition store."""
    frames: dict[str, Any] = {}
    sinks: dict[str, dict[str, int]] = {}
    for name in plan.topology.vertex_names:
        vertex = plan.graph.vertices[name]
        inputs: dict[str, Any] = {}
        for exec_edge in plan.topology.in_edges[plan.topology.vertex_index[name]]:
            src = exec_edge.edge.src
            inputs[src if src not in inputs else f"{src}[{exec_edge.index}]"] = frames[src]
        ctx = reference_context(plan.graph.name, name, task.run_id)
        try:
            frame = vertex.resolve_fn()(spark, inputs, ctx)
            _check_frame(frame, ctx)
            frames[name] = frame.persist()
            if vertex.sink:
                rows, checksum = frame_figures(frames[name])
                sinks[name] = {"rows": rows, "checksum": checksum}
        except Exception as error:  # noqa: BLE001
            raise VertexFailure(ctx.subtask, "reference", error) from error
        _log(f"{name} done")
    return {"sinks": sinks}


def _write_result(task: UnitTask, result: dict[str, Any]) -> None:
    if task.result_path:
        with open(task.result_path, "w", encoding="utf-8") as handle:
            json.dump(result, handle)


def _log(message: str) -> None:
    print(f"regionflow: {message}", flush=True)
