"""The job of a transformed DAG, as the unit-run service needs it: its `JobGraph`, and where the DAG came from.

`transform()` leaves the JobGraph on each region task it creates (`attach_job`); Airflow serializes a fixed
set of operator fields (`BaseOperator.get_serialized_fields`, ``partial_kwargs`` for a mapped one), so it
never reaches the serialized DAG, and a task process that parsed the DAG file finds it on the DAG's tasks.
Otherwise the DAG file is imported again. Nothing here imports Airflow: a DAG is any object with
``dag_id``, ``fileloc`` and ``tasks``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..core.graph import JobGraph, load_dag_file_job
from ..spark.data.store import PartitionStore, run_key_for
from .layout import UnitLayout

# The attribute transform() sets on each region task it creates (a RegionOperator, or the MappedOperator of
# a region with several shards): the task's JobGraph.
JOB_ATTRIBUTE = "regionflow_job"


@dataclass(frozen=True)
class JobSource:
    """A DAG's job and the file it was defined in (the job reference of a DAG whose vertex functions cannot
    be imported by name where Spark runs is ``<fileloc>#<dag_id>``)."""

    graph: JobGraph
    fileloc: str
    dag_id: str

    @classmethod
    def of(cls, dag: Any) -> JobSource:
        return cls(registered_job(dag), dag.fileloc, dag.dag_id)


def attach_job(task: Any, graph: JobGraph) -> None:
    """Leave `graph` on a region task (or mapped region task) that transform() created."""
    setattr(task, JOB_ATTRIBUTE, graph)


def attached_job(dag: Any) -> JobGraph | None:
    """The JobGraph transform() left on the DAG's region tasks, if this DAG object was built by parsing
    its file (a deserialized DAG has none)."""
    for task in getattr(dag, "tasks", ()):
        graph = getattr(task, JOB_ATTRIBUTE, None)
        if isinstance(graph, JobGraph) and graph.name == dag.dag_id:
            return graph
    return None


def registered_job(dag: Any) -> JobGraph:
    """The job that transform() built for this DAG: left on its region tasks when this process parsed the
    DAG file, else imported again from ``dag.fileloc``."""
    graph = attached_job(dag)
    if graph is None:
        graph = load_dag_file_job(dag.fileloc, dag.dag_id)
    return graph


def dag_run_outputs(dag_file: str, dag_id: str, run_id: str, data_dir: str,
                    max_shards: int) -> tuple[UnitLayout, PartitionStore]:
    """The unit layout of a transformed DAG and its run's partition store (committed units, sinks):
    ``layout.sink_figures(partitions, data_dir)`` gives each sink's rows, checksum and path."""
    partitions = PartitionStore(data_dir, run_key_for(dag_id, run_id))
    graph = load_dag_file_job(dag_file, dag_id)
    return UnitLayout.for_run(graph, None, max_shards, partitions.decided_values()), partitions


__all__ = ["JOB_ATTRIBUTE", "JobSource", "attach_job", "attached_job", "dag_run_outputs", "registered_job"]
