"""The unit task of a grant: the one way every runner (the region task, the speculation sensor's copy
template, `regionflow run`) turns a unit and its slots into the `UnitTask` a Spark attempt runs.

At a grant the unit's adaptive vertices are decided again (`UnitLayout.at_grant`); a unit whose plan
changed has its own layout, whose partition groups are numbered differently, so its input descriptors
come from a cache of their own (blobs are named by content, so the blob directory is shared).
"""
from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from ..core.adaptive import GrantDecision, decided
from ..core.errors import RegionflowError
from ..core.graph import JobGraph
from ..core.run_context import RunContext
from ..core.templates import Rendered
from ..localfiles import write_json_atomically
from ..spark.data.descriptors import DescriptorCache, PartitionLocation
from ..spark.data.filesystems import local_path
from ..spark.data.history import DecisionHistory
from ..spark.data.store import PartitionStore, safe_component
from ..spark.data.task import UnitTask
from .layout import UnitLayout


@dataclass(frozen=True)
class BuiltTask:
    """A unit task and the adaptive decision taken for its grant."""

    task: UnitTask
    decision: GrantDecision


class UnitTaskBuilder:
    """Builds the unit tasks of one run's units. `host_of(unit)` names the host whose manifest holds a
    committed producer unit's partitions (for the descriptors); `check_released` (a runner whose units
    are separate processes) refuses a unit whose inputs were already released."""

    def __init__(self, job_reference: str, layout: UnitLayout, partitions: PartitionStore, data_dir: str,
                 descriptors: DescriptorCache, host_of: Callable[[int], str], *,
                 check_released: bool = False, partition_retention: float = 0.0) -> None:
        self.job_reference = job_reference
        self.layout = layout
        self.partitions = partitions
        self.data_dir = data_dir
        self.descriptors = descriptors
        self.host_of = host_of
        self.check_released = check_released
        self.partition_retention = partition_retention
        self._history_read: dict[str, int | None] = {}

    def build(self, unit: int, *, slots: int, width_slots: int | None = None, host: str = "",
              attempt_id: str = "", excluded_nodes: Sequence[str] = (), context: RunContext,
              rendered: Rendered) -> BuiltTask:
        """The unit task for a grant of `slots` slots (as many regions at once as `width_slots`, default
        `slots`, can hold); without host and attempt it is a template (a speculative copy's). `context` and
        `rendered`: the run's values for this attempt and its vertices' rendered fields."""
        layout = self.layout
        reads = bool(layout.consumed_groups[unit])
        if reads and self.check_released:
            self._check_inputs_kept(unit)
        input_bytes = layout.input_bytes(unit, self.partitions) if reads else None
        granted, at, decision = layout.at_grant(unit, slots, input_bytes)
        width = granted.width(at, slots if width_slots is None else width_slots)
        task = UnitTask(job=self.job_reference, mode=layout.plan.mode.value, run_id=self.partitions.run_id,
                        data_dir=self.data_dir, unit_key=layout.keys[unit], unit_name=layout.names[unit],
                        regions=list(granted.shards[at].regions), attempt_id=attempt_id, host=host, width=width,
                        inputs=self._input_refs(granted, at), slots=slots, max_shards=granted.max_shards,
                        slot_request=granted.slot_request(at, width), parallelism=decided(granted.plan.graph),
                        subtasks=granted.plan.topology.subtask_count, input_bytes=input_bytes,
                        excluded_nodes=list(excluded_nodes), context=context.to_dict(), rendered=dict(rendered),
                        unsorted_key_groups=self._unsorted_key_groups(unit))
        return BuiltTask(task, decision)

    def _unsorted_key_groups(self, unit: int) -> list[int]:
        """The key-grouped edges `unit` writes whose consumer's region was last decided as one shard: it writes
        their key groups unsorted (`spark.data.history`)."""
        layout = self.layout
        plan, logical_of, edges = layout.plan, layout.plan.logical_of_vertex, layout.plan.topology.edges
        own = layout.shards[unit].logical
        return sorted(edge for edge in layout.key_groups if logical_of[edges[edge].src] == own
                      and self._last_shards(plan.region_task_id(logical_of[edges[edge].dst])) == 1)

    def _last_shards(self, region: str) -> int | None:
        """The shard count of region task `region`'s last decision, read once per builder: the units it builds
        agree on their layout."""
        if region not in self._history_read:
            history = DecisionHistory(self.partitions.data_dir, self.layout.plan.graph.name, self.partitions.fs)
            self._history_read[region] = history.last_shards(region)
        return self._history_read[region]

    def _input_refs(self, layout: UnitLayout, unit: int) -> dict[str, dict[str, Any]]:
        own = layout is self.layout
        descriptors = self.descriptors if own else DescriptorCache(self.descriptors.blob_dir)
        partitions, host_of = self.partitions, self.host_of
        # the cast only types the lambda: mypy cannot infer one with a default argument (g=g) from its context
        return {str(g): descriptors.ref_for(g, cast("Callable[[], list[PartitionLocation]]",
                                                    lambda g=g: layout.locations(g, partitions, host_of)))
                for g in layout.consumed_groups[unit]}

    def _check_inputs_kept(self, unit: int) -> None:
        """A unit run again after its consumers all committed (a cleared task) finds inputs released
        by Flink's rule: say so, and what to do, instead of failing inside Spark."""
        released = [path for path in self.layout.producer_datasets(unit, self.partitions)
                    if self.partitions.released(path)]
        if released:
            raise RegionflowError(
                f"unit {self.layout.names[unit]}: its input partitions were released once every consumer had "
                f"committed ([regionflow] partition_retention = {self.partition_retention:g}): "
                f"{', '.join(released[:3])}{' ...' if len(released) > 3 else ''}; their committed producers are "
                f"not run again in this DAG run (first commit wins), so trigger a new DAG run, or set "
                f"partition_retention > 0 before runs whose tasks you may want to clear")


def committed_host(layout: UnitLayout, partitions: PartitionStore) -> Callable[[int], str]:
    """`host_of` for units run by separate processes: the host in a committed unit's manifest."""
    def host_of(unit: int) -> str:
        committed = partitions.committed(layout.keys[unit])
        return str(committed.manifest.get("host", "")) if committed else ""
    return host_of


def job_reference(graph: JobGraph, fileloc: str, dag_id: str, work_dir: str) -> str:
    """A spec file when every vertex function is importable by name where Spark runs (no Airflow
    import there); else the DAG file itself."""
    if all(_importable(vertex.fn_reference) for vertex in graph.vertices.values()):
        path = os.path.join(work_dir, f"{safe_component(graph.name)}.job.json")
        return write_json_atomically(path, graph.to_spec())  # region tasks of a run write it at once
    return f"{fileloc}#{dag_id}"


def _importable(reference: str | None) -> bool:
    if not reference:
        return False
    module = reference.partition(":")[0]
    if module.startswith(("unusual_prefix_", "regionflow_dagfile_")):
        return False
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def run_work_dir(data_dir: str, run_key: str) -> str:
    """Local files of a run (task files, descriptors, zips): under the data dir when it is local, else
    under ``$AIRFLOW_HOME/regionflow-work``."""
    base = local_path(data_dir)
    if "://" in base:
        base = os.path.join(os.environ.get("AIRFLOW_HOME", os.path.expanduser("~/airflow")), "regionflow-work")
    path = os.path.join(base, run_key, "_tasks")
    os.makedirs(path, exist_ok=True)
    return path


__all__ = ["BuiltTask", "UnitTaskBuilder", "committed_host", "job_reference", "run_work_dir"]
