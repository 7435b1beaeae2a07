"""The jobs a DAG file's import declares: a `JobRegistry` object, never process-global state.

`regionflow.transform(dag)` builds a `JobGraph` while a DAG file is imported. Whoever imports the file
and wants its jobs (`load_dag_file_job`, for a ``path.py#dag_id`` job reference) creates a registry and
imports the file inside ``collecting(registry)``; `register_job` puts a graph into the registry of the
innermost ``collecting`` block of the current context (a `contextvars.ContextVar`, so nested imports and
other threads each see their own), and does nothing outside one. Airflow-side code does not need a
registry: transform also leaves the graph on the region tasks it creates.
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .graph import JobGraph


class JobRegistry:
    """Job graphs by name, as one DAG file's import declared them (the last one of a name wins)."""

    def __init__(self) -> None:
        self._jobs: dict[str, JobGraph] = {}

    def register(self, graph: JobGraph) -> None:
        """Keep `graph` under its name, replacing a graph of the same name."""
        self._jobs[graph.name] = graph

    def get(self, name: str) -> JobGraph | None:
        """The graph named `name`, or None."""
        return self._jobs.get(name)

    def names(self) -> list[str]:
        """The names of the registered graphs, sorted."""
        return sorted(self._jobs)

    def __len__(self) -> int:
        return len(self._jobs)

    def __contains__(self, name: object) -> bool:
        return name in self._jobs

    def __repr__(self) -> str:
        return f"JobRegistry({', '.join(self.names())})"


# the registry of the innermost `collecting` block of this context; None outside one
_COLLECTING: ContextVar[JobRegistry | None] = ContextVar("regionflow_collecting_registry", default=None)


@contextmanager
def collecting(registry: JobRegistry) -> Iterator[JobRegistry]:
    """Inside the block, `register_job` adds to `registry` (the enclosing block's registry again after it)."""
    token = _COLLECTING.set(registry)
    try:
        yield registry
    finally:
        _COLLECTING.reset(token)


def current_registry() -> JobRegistry | None:
    """The registry of the innermost `collecting` block of the current context, or None."""
    return _COLLECTING.get()


def register_job(graph: JobGraph) -> bool:
    """Register `graph` in the current `collecting` registry; False (and nothing kept) outside one."""
    registry = _COLLECTING.get()
    if registry is None:
        return False
    registry.register(graph)
    return True


__all__ = ["JobRegistry", "collecting", "current_registry", "register_job"]
