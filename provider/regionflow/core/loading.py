"""Loading a job the user names by a DAG file or a ``package.module:attribute`` reference (the bodies of
`graph.load_dag_file_job` and of `graph.load_job`'s attribute form). A reference that is not a job gets
one line naming it and what it must be; nothing is kept in process-global state.
"""
from __future__ import annotations

import hashlib
import importlib.util
import inspect
import os
import sys
from typing import Any, cast

from .errors import RegionflowError, SpecError
from .graph import JobGraph, _import_reference
from .registry import JobRegistry, collecting

_JOB_REFERENCE = "name a JobGraph, or a function that takes no arguments and returns one"
_WHAT_A_JOB_IS = ("a job is a DAG of SparkVertexOperator tasks joined by exchanges (a >> forward() >> b), with "
                  "regionflow.transform(dag) at the end of the file")


def dag_file_job(path: str, name: str | None = None) -> JobGraph:
    """Import a DAG file (under a module name derived from its path) and return the job its
    regionflow.transform() call registered: the one named `name`, or the only one.

    Each file is imported once per process, inside ``collecting(registry)`` with a registry of its own,
    which stays on the module (``__regionflow_jobs__``); nothing is kept anywhere else."""
    if not os.path.exists(path):
        raise SpecError(f"DAG file {path!r} does not exist")
    absolute = os.path.abspath(path)
    module_name = "regionflow_dagfile_" + hashlib.sha1(absolute.encode()).hexdigest()[:12]
    if module_name not in sys.modules:
        spec = importlib.util.spec_from_file_location(module_name, absolute)
        if spec is None or spec.loader is None:
            # no loader for the file's suffix: the AttributeError that module_from_spec(None) raised
            raise AttributeError(f"no module loader for DAG file {path!r}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        collected = JobRegistry()
        try:
            with collecting(collected):
                spec.loader.exec_module(module)
        except RegionflowError:
            del sys.modules[module_name]
            raise
        except Exception as error:
            del sys.modules[module_name]
            raise SpecError(f"importing DAG file {path!r} failed: {type(error).__name__}: {error}") from error
        cast(Any, module).__regionflow_jobs__ = collected  # our own attribute on the module
    registry: JobRegistry = sys.modules[module_name].__regionflow_jobs__
    found = registry.names()
    if name is None:
        if not found:
            raise SpecError(f"DAG file {path!r} defines no regionflow job (no DAG in it has a SparkVertexOperator "
                            f"and calls regionflow.transform(dag)); {_WHAT_A_JOB_IS}")
        if len(found) != 1:
            raise SpecError(f"DAG file {path!r} defines {len(found)} regionflow jobs ({', '.join(found)}); "
                            "name one with --dag-id")
        name = found[0]
    graph = registry.get(name)
    if graph is None:
        raise SpecError(f"DAG file {path!r} has no regionflow job {name!r}; it has: {', '.join(found) or 'none'} "
                        "(did the file call regionflow.transform(dag)?)")
    return graph


def attribute_job(reference: str) -> JobGraph:
    """The job ``package.module:attribute`` names: a JobGraph, or what a zero-argument callable returns."""
    value = _import_reference(reference, f"job {reference!r}")
    if callable(value) and not isinstance(value, JobGraph):
        if not _callable_without_arguments(value):
            raise SpecError(f"job {reference!r} is a {type(value).__name__} that needs arguments, not a job "
                            f"factory; {_JOB_REFERENCE}")
        try:
            value = value()
        except RegionflowError:
            raise
        except Exception as error:
            raise SpecError(f"job {reference!r}: calling it failed: {type(error).__name__}: {error}") from error
        if not isinstance(value, JobGraph):
            raise SpecError(f"job {reference!r} returned a {type(value).__name__}, not a JobGraph; {_JOB_REFERENCE}")
    if not isinstance(value, JobGraph):
        raise SpecError(f"job {reference!r} is a {type(value).__name__}, not a JobGraph; {_JOB_REFERENCE}")
    return value.validate()


def _callable_without_arguments(value: Any) -> bool:
    """Whether `value` can be called with no argument (True when its signature cannot be read: calling
    it tells)."""
    try:
        inspect.signature(value).bind()
    except TypeError:
        return False
    except ValueError:
        return True
    return True


__all__ = ["attribute_job", "dag_file_job"]
