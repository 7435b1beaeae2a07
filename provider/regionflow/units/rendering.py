"""Rendering a job's templated vertex fields outside Airflow (``regionflow run``, a JSON spec) with jinja2, the
way Airflow renders them: undefined names are errors, and the variables are Airflow's names for the run's values
(`RunContext.template_variables`). In Airflow the region task's own Jinja environment renders them instead
(`RegionOperator.vertex_templates`)."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..core.run_context import RunContext
from ..core.templates import Rendered, TemplateError, is_template


def render(templates: Mapping[str, Mapping[str, Any]], context: RunContext) -> Rendered:
    """`templates` rendered with jinja2 and the run's variables; the first failure raises naming the vertex
    and the field."""
    import jinja2

    environment = jinja2.Environment(undefined=jinja2.StrictUndefined, autoescape=False)
    variables = context.template_variables()

    def one(vertex: str, name: str, template: Any) -> Any:
        if isinstance(template, list):
            return [one(vertex, name, item) for item in template]
        if not is_template(template):
            return template
        try:
            return environment.from_string(template).render(variables)
        except jinja2.TemplateError as error:
            hint = ("; give the run a logical date (regionflow run --logical-date 2026-01-02)"
                    if context.logical_date is None and isinstance(error, jinja2.UndefinedError) else "")
            raise TemplateError(f"vertex {vertex!r} field {name!r}: template {template!r} did not render: "
                                f"{type(error).__name__}: {error}{hint}") from None

    return {vertex: {name: one(vertex, name, value) for name, value in fields.items()}
            for vertex, fields in templates.items()}


__all__ = ["render"]
