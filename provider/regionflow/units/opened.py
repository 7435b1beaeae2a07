"""`OpenedUnit`: one shard of a region task opened for a run: its plan (with the run's recorded decisions,
`core.run_decision`), layout, unit, partition store and work dir, what it waits for, its sinks, and its unit
task at a grant. The region task and the speculation sensor (which writes a copy's unit task template) open
the same unit the same way, so both build the same unit task for a shard. The region task binds its run's
values (`bind`: context and rendered fields), which are saved beside the unit's task files; the sensor loads
them (`load_bound`) for the copy's template, so a copy sees exactly its original's values."""
from __future__ import annotations

import json
import os

from ..config import RegionflowConfig
from ..core.errors import RegionflowError
from ..core.run_context import RunContext
from ..core.templates import Rendered, sink_claim
from ..localfiles import write_json_atomically
from ..spark.data.descriptors import DescriptorCache
from ..spark.data.sinks import SinkCommitter
from ..spark.data.store import PartitionStore, run_key_for
from ..spark.data.task import UnitTask
from ..spark.driver.program import resolve_sink_path
from ..spark.launch.pyfiles import build_py_files
from ..spark.launch.submission import job_modules
from .dags import JobSource
from .layout import UnitLayout
from .readiness import ProducerShard
from .tasks import BuiltTask, UnitTaskBuilder, committed_host, job_reference, run_work_dir


class OpenedUnit:
    """Everything about one shard that does not depend on its host or attempt."""

    def __init__(self, source: JobSource, run_id: str, mode: str, logical: int, max_shards: int, shard: int,
                 config: RegionflowConfig) -> None:
        self.config = config
        self.source = source
        self.partitions = PartitionStore(config.data_dir, run_key_for(source.dag_id, run_id))
        # the run's decisions for adaptive regions cut into shards (`core.run_decision`), as recorded so far
        self.layout = UnitLayout.for_run(source.graph, mode, max_shards, self.partitions.decided_values())
        self.plan = self.layout.plan
        units = self.layout.units_of_logical(logical)
        if not 0 <= shard < len(units):
            raise RegionflowError(f"logical region {logical} has {len(units)} shard(s); there is no shard {shard}")
        self.unit = units[shard]
        self.work_dir = run_work_dir(config.data_dir, self.partitions.run_id)
        self._builder: UnitTaskBuilder | None = None
        self.context = RunContext()
        self.rendered: Rendered = {}

    @property
    def bound_path(self) -> str:
        return os.path.join(self.work_dir, f"{self.key}.run.json")

    def bind(self, context: RunContext, rendered: Rendered) -> None:
        """The run's values of this try (context and rendered vertex fields), in every unit task it builds
        from now on, and saved for the shard's speculative copies."""
        self.context, self.rendered = context, dict(rendered)
        write_json_atomically(self.bound_path, {"context": context.to_dict(), "rendered": self.rendered})

    def load_bound(self) -> bool:
        """The values the shard's region task bound (False when it bound none yet)."""
        try:
            with open(self.bound_path, encoding="utf-8") as handle:
                data = json.load(handle)
        except FileNotFoundError:
            return False
        self.context, self.rendered = RunContext.from_dict(data.get("context")), dict(data.get("rendered") or {})
        return True

    @property
    def key(self) -> str:
        return self.layout.keys[self.unit]

    @property
    def name(self) -> str:
        return self.layout.names[self.unit]

    def producer_shards(self) -> list[ProducerShard]:
        """What the shard waits for: the producer units whose partitions it reads (the strategy's readiness
        rule), each with the task instance that runs it."""
        layout = self.layout
        return [ProducerShard(*layout.task_instance_of(unit), layout.keys[unit])
                for unit in layout.producer_units(self.unit)]

    def pending_producers(self) -> list[ProducerShard]:
        """The producer shards that have not committed yet."""
        return [p for p in self.producer_shards() if self.partitions.committed(p.unit_key) is None]

    def unit_task(self, *, slots: int, host: str = "", attempt_id: str = "",
                  excluded_nodes: list[str] | None = None) -> BuiltTask:
        """The unit task for a grant of `slots` slots; without host and attempt it is a template."""
        return self.builder.build(self.unit, slots=slots, host=host, attempt_id=attempt_id,
                                  excluded_nodes=excluded_nodes or (), context=self.context, rendered=self.rendered)

    @property
    def builder(self) -> UnitTaskBuilder:
        if self._builder is None:
            source = self.source
            self._builder = UnitTaskBuilder(
                job_reference(source.graph, source.fileloc, source.dag_id, self.work_dir), self.layout,
                self.partitions, self.config.data_dir, DescriptorCache(os.path.join(self.work_dir, "descriptors")),
                committed_host(self.layout, self.partitions), check_released=True,
                partition_retention=self.config.partition_retention)
        return self._builder

    def task_path(self, attempt_id: str) -> str:
        return os.path.join(self.work_dir, f"{self.key}-{attempt_id}.json")

    def py_files(self, task: UnitTask) -> list[str]:
        return build_py_files(os.path.join(self.work_dir, "py"), job_modules(task.job))

    def claim_sinks(self) -> None:
        """Check and claim the sinks of the shard's vertices for this run (before its first attempt)."""
        plan, layout = self.plan, self.layout
        members = {plan.topology.vertex_names[v] for r in layout.shards[self.unit].regions
                   for v in plan.vertex_counts(plan.regions[r])}
        for name in sorted(members):
            vertex = plan.graph.vertices[name]
            if vertex.sink:
                path = resolve_sink_path(vertex, self.config.data_dir, self.rendered)
                committer = SinkCommitter(path, plan.graph.name, self.partitions.run_id, vertex=name,
                                          data_dir=self.config.data_dir, **sink_claim(vertex, self.context))
                committer.check_target()
                committer.claim()

    def release_inputs(self) -> tuple[int, int]:
        """Delete the partitions this committed unit read whose every consumer has committed (the strategy's
        release rule); returns (datasets, bytes) freed."""
        paths = self.layout.releasable(self.unit, self.partitions)
        return len(paths), self.partitions.release(paths)


__all__ = ["OpenedUnit"]
