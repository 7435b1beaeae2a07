"""The region program: what one Spark submission runs for a unit (a region or a shard of regions).

Inside one Spark application it calls each vertex function of the unit once, its subtasks being
the partitions of that one computation (`computer.UnitComputer`, wiring in `exchange`):

- an edge whose producer runs in this unit stays in memory: one Spark plan across the region,
  shuffles are Spark's own;
- an edge whose producer ran in another unit is read from the partition store, the producer units'
  datasets found through the input descriptors and pruned to this unit's buckets;
- an output with a consumer outside the unit is written to the attempt's directory as one Parquet
  dataset per edge, a directory per consumer unit, at most one file per granted core in each;
- a sink's output is staged inside the attempt as at most one Parquet file per granted core.

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
import time
import traceback
from collections.abc import Mapping
from typing import Any

from ...core.graph import Sink, Vertex
from ...core.plan import Plan
from ...core.run_context import RunContext
from ...core.templates import is_template, rendered_value, vertex_reads
from ..data.filesystems import join
from ..data.integrity import damage
from ..data.sinks import SinkCommitter
from ..data.store import PartitionStore, vertex_component
from ..data.task import UnitTask
from .api import reference_context
from .computer import UnitComputer, VertexFailure, check_frame
from .figures import CHECKSUM_MODULUS, SinkFigures

EXIT_VERTEX_FAILED = 3
__all__ = ["CHECKSUM_MODULUS", "EXIT_VERTEX_FAILED", "VertexFailure", "main", "resolve_sink_path",
           "run_reference", "run_unit"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="regionflow-region-program")
    parser.add_argument("--task", required=True, help="unit task JSON file written by the runner")
    args = parser.parse_args(argv)
    task = UnitTask.read(args.task)
    plan = task.plan()
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

    from ..servers.client_env import CONNECT_CLIENT_VARIABLES

    # This is a classic Spark driver: a parent that used Spark Connect client sessions (the session
    # backend's process, a test run) passes on variables that would make our SparkSession a client.
    for variable in CONNECT_CLIENT_VARIABLES:
        os.environ.pop(variable, None)

    return SparkSession.builder.appName(f"regionflow {task.unit_name} {task.attempt_id}").getOrCreate()


# ---- one unit ----------------------------------------------------------------------------------------


def run_unit(spark, plan: Plan, task: UnitTask) -> dict[str, Any]:
    store = PartitionStore(task.data_dir, task.run_id, spark=spark)
    committed = store.committed(task.unit_key)
    problem = damage(store.fs, committed.path, committed.manifest) if committed is not None else None
    if problem is not None:  # changed after its commit: computed again (`integrity`)
        moved = store.set_aside(task.unit_key, problem)
        _log(f"unit {task.unit_name} was committed but is damaged ({problem}); set aside in {moved}, computed again")
        committed = None
    if committed is not None:  # an earlier attempt committed, then its process died: finish its publishing
        _log(f"unit {task.unit_name} was already committed by attempt {committed.manifest.get('attempt_id')}")
        _publish_sinks(spark, plan, task, committed.path, committed.manifest)
        return committed.manifest
    started = time.time()
    attempt_dir = store.attempt_dir(task.unit_key, task.attempt_id)
    computer = UnitComputer(spark, plan, task, store, attempt_dir)
    try:
        computer.run()
    except BaseException as error:
        store.discard(task.unit_key, task.attempt_id)
        full = store.full_disk(error, task.attempt_id)
        if full is not None:
            raise full from error
        raise
    manifest = {
        "attempt_id": task.attempt_id,
        "host": task.host,
        "unit": task.unit_name,
        "regions": task.regions,
        "started": started,
        "finished": time.time(),
        "sinks": computer.sink_figures,
        "sink_paths": {name: resolve_sink_path(plan.graph.vertices[name], task.data_dir, task.rendered)
                       for name in computer.sink_figures},
        "parallelism": _adaptive_values(plan, computer.spans),  # what its adaptive vertices ran at
    }
    result = store.commit(task.unit_key, task.attempt_id, manifest)
    if not result.won:
        _log(f"attempt {task.attempt_id} lost the commit of {task.unit_name} to attempt {result.winner}; discarded")
        return manifest
    winner = store.committed(task.unit_key)
    assert winner is not None  # this attempt's commit won just now, and a committed unit stays committed
    _publish_sinks(spark, plan, task, winner.path, winner.manifest)
    _log(f"attempt {task.attempt_id} committed {task.unit_name}")
    return manifest


def _adaptive_values(plan: Plan, vertices) -> dict[str, int]:
    """The parallelism of the unit's adaptive vertices (`vertices`: topology indices)."""
    names = plan.topology.vertex_names
    return {names[v]: plan.topology.parallelism[v] for v in sorted(vertices)
            if plan.graph.vertices[names[v]].parallelism_range is not None}


def _publish_sinks(spark, plan: Plan, task: UnitTask, committed_dir: str, manifest: dict) -> None:
    for vertex_name, figures in manifest.get("sinks", {}).items():
        vertex = plan.graph.vertices[vertex_name]
        committer = SinkCommitter(resolve_sink_path(vertex, task.data_dir, task.rendered), plan.graph.name,
                                  task.run_id, vertex=vertex_name, spark=spark)
        committer.publish(committed_dir, vertex_name, sorted(int(s) for s in figures))


def resolve_sink_path(vertex: Vertex, data_dir: str, rendered: Mapping[str, Mapping] | None = None) -> str:
    """A relative sink path lives under the data dir's ``sinks/``; absolute paths and URIs as given. A
    templated sink is the path rendered for the run (`rendered`, checked by `core.templates.checked`); one
    that was not rendered is refused rather than written under its literal template."""
    sink = vertex.sink
    if sink is None:
        raise ValueError(f"vertex {vertex.name!r} has no sink")
    path = rendered_value(rendered, vertex.name, "sink") or sink.path
    if is_template(path):
        raise ValueError(f"vertex {vertex.name!r}: its sink {path!r} is a template that was not rendered for this "
                         f"run; run it through a region task or `regionflow run`, which render it")
    if Sink(path).is_absolute:
        return path
    return f"{data_dir.rstrip('/')}/sinks/{os.path.normpath(path)}"  # Sink checked it stays inside


# ---- reference ----------------------------------------------------------------------------------------


def run_reference(spark, plan: Plan, task: UnitTask) -> dict[str, Any]:
    """Every vertex once, whole (all its subtasks in one call), inputs in memory as produced: no
    regions, no partition store, no repartitioning by regionflow: plain PySpark. A frame read twice
    is cached, as a plain program would; a sink is written as Parquet under
    ``{data_dir}/{run_id}/reference/{vertex}``, its figures observed by that write as in a unit."""
    frames: dict[str, Any] = {}
    sinks: dict[str, dict[str, Any]] = {}
    topology = plan.topology
    for name in topology.vertex_names:
        vertex = plan.graph.vertices[name]
        index = topology.vertex_index[name]
        inputs: dict[str, Any] = {}
        for exec_edge in topology.in_edges[index]:
            src = exec_edge.edge.src
            inputs[src if src not in inputs else f"{src}[{exec_edge.index}]"] = frames[src]
        ctx = reference_context(plan.graph.name, name, task.run_id, vertex.parallelism,
                                RunContext.from_dict(task.context), vertex_reads(task.rendered, vertex))
        try:
            frame = vertex.resolve_fn()(spark, inputs, ctx)
            check_frame(frame)
            if len(topology.out_edges[index]) + (1 if vertex.sink else 0) > 1:
                frame = frame.persist()
            frames[name] = frame
            if vertex.sink:
                path = join(task.data_dir, task.run_id, "reference", vertex_component(name))
                figures = SinkFigures(frame)
                figures.observe(frame).write.mode("overwrite").parquet(path)
                rows, checksum = figures.total()
                sinks[name] = {"rows": rows, "checksum": checksum, "path": path}
        except Exception as error:  # noqa: BLE001
            raise VertexFailure(name, ctx.subtask, "reference", error) from error
        _log(f"{name} done")
    return {"sinks": sinks}


def _write_result(task: UnitTask, result: dict[str, Any]) -> None:
    if task.result_path:
        with open(task.result_path, "w", encoding="utf-8") as handle:
            json.dump(result, handle)


def _log(message: str) -> None:
    """A human line about the program's progress: on stderr, never stdout. With the session backend the program
    runs in the calling process (`regionflow run ... --format json`), whose stdout carries one JSON document."""
    print(f"regionflow: {message}", file=sys.stderr, flush=True)
