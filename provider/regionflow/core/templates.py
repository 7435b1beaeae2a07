"""Templated vertex fields: a vertex's ``sink`` and ``reads`` may be Jinja templates, rendered per run.

`TEMPLATED_FIELDS` is the one list: `SparkVertexOperator.template_fields`, the JSON job spec's model and
the region task's ``vertex_templates`` (``{vertex: {field: template}}``, rendered by Airflow's own Jinja
environment when the region task runs) all name these fields. Outside Airflow (``regionflow run``, a JSON
spec) `regionflow.units.rendering.render` renders them with jinja2 and Airflow's names for the run's values
(`RunContext.template_variables`: ``ds``, ``ds_nodash``, ``logical_date``, ``params``, ...), undefined names
being errors as in Airflow. `checked` then refuses a rendered sink that is empty or leaves the data dir's
``sinks/``. Standard library only (the jinja2 part is outside core).
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from .errors import RegionflowError
from .graph import JobGraph, Sink, Vertex
from .run_context import RunContext

TEMPLATED_FIELDS = ("sink", "reads")
Rendered = dict[str, dict[str, Any]]  # vertex -> field -> rendered value


class TemplateError(RegionflowError, ValueError):
    """A vertex field's template did not render, or rendered to a value that cannot be used."""


def is_template(value: Any) -> bool:
    """Whether a string holds Jinja syntax (``{{``, ``{%`` or ``{#``)."""
    return isinstance(value, str) and any(mark in value for mark in ("{{", "{%", "{#"))


def vertex_templates(graph: JobGraph, vertices: list[str] | None = None) -> Rendered:
    """The templated fields of `vertices` (default: all) as ``{vertex: {field: template}}``: each sink's
    path, and the reads when there are any."""
    templates: Rendered = {}
    for name in vertices if vertices is not None else list(graph.vertices):
        vertex = graph.vertices[name]
        fields: dict[str, Any] = {}
        if vertex.sink is not None:
            fields["sink"] = vertex.sink.path
        if vertex.reads:
            fields["reads"] = list(vertex.reads)
        if fields:
            templates[name] = fields
    return templates


def checked(graph: JobGraph, rendered: Mapping[str, Mapping[str, Any]]) -> Rendered:
    """The rendered values, each sink checked: a non-empty path that stays inside the data dir's ``sinks/``
    when its template is relative (a relative template may not render to an absolute path or a URI)."""
    result: Rendered = {}
    for vertex, fields in rendered.items():
        declared = graph.vertices[vertex]
        values = dict(fields)
        if "sink" in values:
            values["sink"] = _sink_path(vertex, declared.sink.path if declared.sink else "", values["sink"])
        if "reads" in values:
            reads = values["reads"]
            values["reads"] = [reads] if isinstance(reads, str) else [str(path) for path in reads or []]
            if any(not path.strip() for path in values["reads"]):
                raise TemplateError(f"vertex {vertex!r} field 'reads': a path rendered empty ({fields['reads']!r})")
        result[vertex] = values
    return result


def _sink_path(vertex: str, template: str, path: Any) -> str:
    where = f"vertex {vertex!r} field 'sink' (template {template!r})"
    if not isinstance(path, str) or not path.strip():
        raise TemplateError(f"{where} rendered to an empty path {path!r}; the sink needs a directory")
    try:
        sink = Sink(path.strip())
    except RegionflowError as error:
        raise TemplateError(f"{where} rendered to {path!r}: {error}") from None
    if sink.is_absolute and not Sink(template).is_absolute:
        raise TemplateError(f"{where} rendered to {path!r}, which escapes the data dir's sinks/ folder (the "
                            f"template is a relative path); render a relative path, or make the template absolute")
    normal = sink.path if sink.is_absolute else os.path.normpath(sink.path)
    if normal in ("", "."):
        raise TemplateError(f"{where} rendered to {path!r}, the sinks/ folder itself; give a directory inside it")
    return normal


def sink_claim(vertex: Vertex, context: RunContext) -> dict[str, Any]:
    """How a run claims the vertex's sink path (`SinkCommitter`): per run when its sink is a template, and
    with the run's logical date (a fixed sink keeps the newest date's output)."""
    logical = context.logical_date
    return {"per_run": bool(vertex.sink and is_template(vertex.sink.path)),
            "logical_date": logical.isoformat() if logical else None}


def rendered_value(rendered: Mapping[str, Mapping[str, Any]] | None, vertex: str, name: str) -> Any:
    """The rendered `name` of `vertex`, or None when none was rendered."""
    return ((rendered or {}).get(vertex) or {}).get(name)


def vertex_reads(rendered: Mapping[str, Mapping[str, Any]] | None, vertex: Vertex) -> tuple[str, ...]:
    """The paths `vertex` reads in this run: its rendered reads, else the declared ones."""
    reads = rendered_value(rendered, vertex.name, "reads")
    return tuple(reads) if reads is not None else vertex.reads


__all__ = ["TEMPLATED_FIELDS", "Rendered", "TemplateError", "checked", "is_template", "rendered_value", "sink_claim",
           "vertex_reads", "vertex_templates"]
