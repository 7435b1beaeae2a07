"""The JSON job spec: its declared model (`JOB`), reading one into a `JobGraph` and writing one back.

A spec is ``{"name", "vertices": [...], "edges": [...]}``; ``regionflow schema job`` prints the
model as JSON Schema. Every field is checked by the model before any graph is built (types, finite
numbers, ranges, unknown keys with a "did you mean"), then `JobGraph.validate` checks what spans
several fields (unknown vertices of an edge, FORWARD parallelisms, cycles).
"""
from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from typing import Any

from .errors import SpecError
from .graph import (
    MAX_PARALLELISM,
    SINK_FORMATS,
    Distribution,
    Edge,
    Exchange,
    JobGraph,
    Sink,
    Vertex,
    is_reference,
    sink_of,
)
from .resources import ResourceProfile, whole_mib_problem
from .schema import Field, Model


def _parses(parse: Callable[[str], Any]) -> Callable[[str], str | None]:
    """A field check from a parser: its error text, or None when the value parses."""
    def check(value: str) -> str | None:
        try:
            parse(value)
        except SpecError as error:
            return str(error)
        return None

    return check


_distribution = _parses(Distribution.parse)
_exchange = _parses(Exchange.parse)


def _vertex_name(value: str) -> str | None:
    return "a vertex name may not contain '#' (it separates a vertex from its subtask index)" if "#" in value else None


def _parallelism_range(value: Any) -> str | None:
    if not isinstance(value, list):
        return None
    if len(value) != 2:
        return "an adaptive parallelism is [min, max], two integers"
    if value[0] > value[1]:
        return f"min {value[0]} is above max {value[1]}; give [min, max] with min <= max"
    return None


def _bytes_target_needs_range(entry: Mapping[str, Any]) -> str | None:
    if "target_bytes_per_subtask" in entry and not isinstance(entry.get("parallelism"), list):
        return (f"target_bytes_per_subtask is given but parallelism is {entry.get('parallelism')!r}, a fixed "
                f"number; declare parallelism as [min, max] so the value can be decided from the bytes read, "
                f"or drop target_bytes_per_subtask")
    return None


def _reference(value: str) -> str | None:
    return None if is_reference(value) else "give the function as 'package.module:function'"


SINK = Model("sink", "where a sink vertex's output goes, written through regionflow's committer", (
    Field("path", "string", "the output directory: absolute, a URI, or relative to the data dir's sinks/; a "
          "Jinja template rendered per run ({{ ds }}, {{ params.x }}, ...)", required=True, non_empty=True),
    Field("format", "string", "the output format", choices=SINK_FORMATS),
))


def _memory(name: str, doc: str) -> Field:
    return Field(name, "number", f"{doc}, whole MiB >= 0", minimum=0, check=whole_mib_problem)


RESOURCES = Model("resources", "per-subtask resources: cpu, heap_mib, off_heap_mib, managed_mib and extended ones "
                  "such as gpu, each a finite number >= 0, memory sizes in whole MiB", (
    Field("cpu", "number", "cpu cores, >= 0", minimum=0),
    _memory("heap_mib", "task heap"),
    _memory("off_heap_mib", "task off-heap memory"),
    _memory("managed_mib", "managed memory"),
), extra=Field("extended", "number", "an extended resource such as gpu, >= 0", minimum=0))

VERTEX = Model("vertex", "one step of the job, run as `parallelism` subtasks", (
    Field("id", "string", "the vertex's unique name", required=True, non_empty=True, check=_vertex_name),
    Field("parallelism", ("integer", "array"), f"its number of subtasks, 1 to {MAX_PARALLELISM}; or [min, max]: "
          "adaptive, decided from the cluster's slots", required=True, minimum=1, maximum=MAX_PARALLELISM,
          items="integer", check=_parallelism_range),
    Field("resources", RESOURCES, RESOURCES.doc),
    Field("slot_sharing_group", "string", "vertices of one group may share a slot", non_empty=True),
    Field("fn", "string", "the vertex function, 'package.module:function' (in Python also a callable)",
          non_empty=True, check=_reference),
    Field("sink", ("string", SINK), "the sink's output directory, or {path, format}; a Jinja template rendered "
          "per run (core.templates.TEMPLATED_FIELDS)", non_empty=True),
    Field("external_writes", "boolean", "the function itself writes outside regionflow's committer (a database, "
          "an API): its region is never speculated, as a second attempt would write again"),
    Field("reads", ("string", "array", "null"), "input paths the function reads, checked before any Spark work "
          "(null: none); Jinja templates rendered per run, seen as ctx.reads", items="string", non_empty=True),
    Field("target_bytes_per_subtask", "integer", "adaptive vertices only: when its unit starts, the parallelism is "
          "at most ceil(bytes the unit reads from blocking partitions / this), never below min", minimum=1),
), rules=(_bytes_target_needs_range,))

EDGE = Model("edge", "how a consumer reads a producer", (
    Field("src", "string", "the producer vertex's id", required=True, non_empty=True),
    Field("dst", "string", "the consumer vertex's id", required=True, non_empty=True),
    Field("distribution", "string", "FORWARD, RESCALE (POINTWISE), HASH, REBALANCE or BROADCAST (ALL_TO_ALL)",
          required=True, check=_distribution),
    Field("exchange", ("string", "null"), "PIPELINED or BLOCKING; null or absent: the exchange mode decides",
          check=lambda value: None if value is None else _exchange(value)),
    Field("keys", ("string", "array"), "a HASH edge's key columns", items="string", non_empty=True),
))

JOB = Model("job", "a regionflow job spec", (
    Field("name", "string", "the job's name (default: the file's name)", non_empty=True),
    Field("vertices", "array", "the job's vertices", required=True, items=VERTEX, non_empty=True),
    Field("edges", "array", "the job's edges", items=EDGE),
))


def graph_from_spec(spec: Any, name: str | None = None) -> JobGraph:
    """The `JobGraph` of a spec; `SpecError` / `JobGraphError` name the field at fault."""
    if not isinstance(spec, Mapping):
        raise SpecError(f"a job spec must be a JSON object with 'vertices' and 'edges', got {type(spec).__name__}")
    _check_top_level(spec)
    graph = JobGraph(str(spec.get("name") or name or "job"))
    for position, entry in enumerate(spec["vertices"]):
        where = _where("vertices", position, entry, "id")
        VERTEX.validate(entry, where)
        graph.add_vertex(entry["id"], entry["parallelism"], ResourceProfile.from_dict(entry.get("resources")),
                         entry.get("slot_sharing_group"), entry.get("fn"), _sink(entry), _reads(entry),
                         external_writes=entry.get("external_writes", False),
                         target_bytes_per_subtask=entry.get("target_bytes_per_subtask"))
    for position, entry in enumerate(spec.get("edges", [])):
        EDGE.validate(entry, _where("edges", position, entry, "src"))
        keys = entry.get("keys", [])
        graph.connect(entry["src"], entry["dst"], entry["distribution"], entry.get("exchange"),
                      [keys] if isinstance(keys, str) else keys)
    return graph.validate_structure()  # each vertex passed VERTEX above


# JOB without its items: the top level is checked first, then each vertex and edge is checked as it is
# added, with its id in the path
_JOB_TOP = Model(JOB.name, JOB.doc, tuple(Field(f.name, f.kind, f.doc, required=f.required, non_empty=f.non_empty)
                                          for f in JOB.fields))


def _check_top_level(spec: Mapping[str, Any]) -> None:
    """The job-level keys; the vertices and edges are checked one by one, naming each."""
    _JOB_TOP.validate(spec, "")
    if not spec["vertices"]:
        raise SpecError("vertices is empty; a job needs at least one vertex")


def _where(kind: str, position: int, entry: Any, label: str) -> str:
    named = entry.get(label) if isinstance(entry, Mapping) else None
    if kind == "edges" and isinstance(entry, Mapping) and _named(named) and _named(entry.get("dst")):
        return f"edges[{position}] ({named} -> {entry['dst']})"
    return f"{kind}[{position}] ({named!r})" if _named(named) else f"{kind}[{position}]"


def _named(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


def _sink(entry: Mapping[str, Any]) -> Sink | None:
    sink = entry.get("sink")
    if sink is None:
        return None
    if isinstance(sink, str):
        return sink_of(entry["id"], sink)
    return sink_of(entry["id"], sink["path"], sink.get("format", "parquet"))


def _reads(entry: Mapping[str, Any]) -> list[str]:
    reads = entry.get("reads") or []
    return [reads] if isinstance(reads, str) else list(reads)


def graph_to_spec(graph: JobGraph) -> dict[str, Any]:
    """The spec of `graph` (what `graph_from_spec` reads back to an equal graph)."""
    return {"name": graph.name, "vertices": [_vertex_spec(v) for v in graph.vertices.values()],
            "edges": [_edge_spec(e) for e in graph.edges]}


def _vertex_spec(vertex: Vertex) -> dict[str, Any]:
    declared = vertex.declared_parallelism
    data: dict[str, Any] = {"id": vertex.name, "parallelism": list(declared) if isinstance(declared, tuple)
                            else declared}
    if not vertex.resources.unknown:
        data["resources"] = vertex.resources.to_dict()
    if vertex.slot_sharing_group:
        data["slot_sharing_group"] = vertex.slot_sharing_group
    if vertex.fn_reference:
        data["fn"] = vertex.fn_reference
    if vertex.sink:
        data["sink"] = {"path": vertex.sink.path, "format": vertex.sink.format}
    if vertex.reads:
        data["reads"] = list(vertex.reads)
    if vertex.external_writes:
        data["external_writes"] = True
    if vertex.target_bytes_per_subtask is not None:
        data["target_bytes_per_subtask"] = vertex.target_bytes_per_subtask
    return data


def _edge_spec(edge: Edge) -> dict[str, Any]:
    data: dict[str, Any] = {"src": edge.src, "dst": edge.dst, "distribution": edge.distribution.name}
    if edge.exchange:
        data["exchange"] = edge.exchange.name
    if edge.keys:
        data["keys"] = list(edge.keys)
    return data


def load_spec_file(path: str) -> JobGraph:
    """The job of a JSON spec file; an unreadable file is a `SpecError` naming it and why."""
    try:
        with open(path, encoding="utf-8") as handle:
            spec = json.load(handle)
    except FileNotFoundError:
        raise SpecError(f"job spec file {path!r} does not exist") from None
    except IsADirectoryError:
        raise SpecError(f"job spec {path!r} is a directory; give the JSON file inside it") from None
    except PermissionError:
        raise SpecError(f"job spec file {path!r} cannot be read (permission denied)") from None
    except UnicodeDecodeError as error:
        raise SpecError(f"job spec file {path!r} is not UTF-8 text ({error.reason} at byte {error.start})") from None
    except json.JSONDecodeError as error:
        raise SpecError(f"job spec file {path!r} is not valid JSON: {error}") from None
    except RecursionError:
        raise SpecError(f"job spec file {path!r} nests JSON too deeply to be a job spec") from None
    except OSError as error:
        raise SpecError(f"job spec file {path!r} cannot be read: {error.strerror or error}") from None
    default_name = os.path.splitext(os.path.basename(path))[0]
    try:
        return graph_from_spec(spec, name=default_name)
    except SpecError as error:
        raise SpecError(f"{path}: {error}") from None


__all__ = ["EDGE", "JOB", "RESOURCES", "SINK", "VERTEX", "graph_from_spec", "graph_to_spec", "load_spec_file"]
