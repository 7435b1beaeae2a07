"""`RegionOperator`: one Airflow task instance = one unit (a shard of a logical region's execution
regions) = one Spark submission, sized to the slots the RegionExecutor granted it.

The task learns its grant (host, slots) from regionflow's store, builds the unit task file (the
plan reference, its regions, the attempt, one input descriptor per partition group it reads), and
runs the region program through SparkSubmitHook. The driver output goes to the task log; a failed
application fails the task with the vertex, subtask and Python error; `on_kill` ends the
application. Run by another executor (or `airflow tasks test`), it uses the first host with as many
slots as it asked for.
"""
from __future__ import annotations

import importlib.util
import json
import os
import uuid
from typing import Any

from airflow.sdk import BaseOperator

from ..config import RegionflowConfig
from ..core.errors import RegionflowError
from ..core.graph import REGISTERED_JOBS, JobGraph, load_dag_file_job
from ..core.plan import Plan
from ..scheduling.hosts import Host
from ..spark.descriptors import DescriptorCache
from ..spark.program import resolve_sink_path
from ..spark.store import PartitionStore, SinkCommitter, safe_component
from ..spark.submit import RegionSubmission, build_py_files
from ..spark.task import UnitTask
from ..spark.unit import UnitLayout, job_modules, unit_submission
from ..store import RegionflowStore


class RegionTaskFailed(RegionflowError):
    """The unit's Spark application failed."""


def bulk_id_for(ti_id: Any, try_number: int) -> str:
    """The slot bulk of one try of one task instance (executor and task agree on it)."""
    return f"{ti_id}:{try_number}"


def run_key_for(dag_id: str, run_id: str) -> str:
    """The partition store's run directory of one DAG run."""
    return safe_component(f"{dag_id}--{run_id}")


class RegionOperator(BaseOperator):
    ui_color = "#cfe8f7"

    def __init__(self, *, mode: str, logical: int, max_shards: int, shard: int = 0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.mode = mode
        self.logical = logical
        self.max_shards = max_shards
        self.shard = shard
        self._submission: RegionSubmission | None = None

    def execute(self, context: Any) -> dict[str, Any]:
        config = RegionflowConfig.from_airflow()
        dag, ti = context["dag"], context["ti"]
        graph = registered_job(dag)
        plan = Plan(graph, self.mode)
        layout = UnitLayout(plan, self.max_shards)
        unit = layout.units_of_logical(self.logical)[self.shard]
        store = RegionflowStore.from_config(config.store_url)
        host, slots = self._granted(store, bulk_id_for(ti.id, ti.try_number), config, layout, unit)
        partitions = PartitionStore(config.data_dir, run_key_for(dag.dag_id, context["run_id"]))
        work_dir = _work_dir(config, partitions)
        self._claim_sinks(plan, layout, unit, config, partitions.run_id)
        attempt = f"try{ti.try_number}-{uuid.uuid4().hex[:6]}"
        task = UnitTask(job=_job_reference(graph, dag, work_dir), mode=plan.mode.value, run_id=partitions.run_id,
                        data_dir=config.data_dir, unit_key=layout.keys[unit], unit_name=layout.names[unit],
                        regions=list(layout.shards[unit].regions), attempt_id=attempt, host=host.name,
                        width=layout.width(unit, slots), inputs=self._inputs(layout, unit, partitions, work_dir))
        py_files = build_py_files(os.path.join(work_dir, "py"), job_modules(task.job))
        self._submission = unit_submission(task, os.path.join(work_dir, f"{task.unit_key}-{attempt}.json"), host,
                                           slots, config.spark_conf, py_files, conn_id=config.spark_conn_id)
        self.log.info("unit %s: %d region(s) on host %s with %d slot(s), attempt %s", task.unit_name,
                      len(task.regions), host.name, slots, attempt)
        store.start_attempt(attempt_id=attempt, bulk_id=bulk_id_for(ti.id, ti.try_number), dag_id=dag.dag_id,
                            run_id=context["run_id"], task_id=ti.task_id, map_index=ti.map_index,
                            unit_key=task.unit_key, host=host.name, speculative=False)
        result = self._submission.run()
        if not result.ok:
            store.end_attempt(attempt, "killed" if result.killed else "failed", result.describe()[:2000])
            raise RegionTaskFailed(f"unit {task.unit_name} failed: {_reason(result)}")
        committed = partitions.committed(task.unit_key)
        winner = committed.manifest.get("attempt_id") if committed else None
        store.end_attempt(attempt, "succeeded" if winner == attempt else "lost_commit")
        self.log.info("unit %s committed by attempt %s on host %s", task.unit_name, winner,
                      committed.manifest.get("host") if committed else "?")
        return {"unit": task.unit_name, "attempt": attempt, "winner": winner,
                "sinks": committed.manifest.get("sinks", {}) if committed else {}}

    def on_kill(self) -> None:
        if self._submission is not None:
            self._submission.kill(wait=False)

    # ---- helpers ----------------------------------------------------------------------------------

    def _granted(self, store: RegionflowStore, bulk_id: str, config: RegionflowConfig, layout: UnitLayout,
                 unit: int) -> tuple[Host, int]:
        grant = store.grant_for(bulk_id)
        if grant is not None and grant.host:
            return config.cluster.host(grant.host), len(grant.slots)
        host = next(iter(config.cluster))
        slots = min(host.slots, len(layout.requests(unit, layout.width(unit, host.slots))))
        self.log.warning("no slot grant recorded for %s (not run by RegionExecutor?): using host %s with %d slot(s)",
                         bulk_id, host.name, slots)
        return host, slots

    def _inputs(self, layout: UnitLayout, unit: int, partitions: PartitionStore, work_dir: str) -> dict[str, Any]:
        descriptors = DescriptorCache(os.path.join(work_dir, "descriptors"))
        scheduler = layout.scheduler()

        def host_of(producer_unit: int) -> str:
            committed = partitions.committed(layout.keys[producer_unit])
            return committed.manifest.get("host", "") if committed else ""

        return {str(g): descriptors.ref_for(g, lambda g=g: layout.locations(g, partitions, host_of))
                for g, _ in scheduler.consumed[unit]}

    def _claim_sinks(self, plan: Plan, layout: UnitLayout, unit: int, config: RegionflowConfig, run_key: str) -> None:
        members = {plan.topology.vertex_names[v] for r in layout.shards[unit].regions
                   for v in plan.vertex_counts(plan.regions[r])}
        for name in sorted(members):
            vertex = plan.graph.vertices[name]
            if vertex.sink:
                committer = SinkCommitter(resolve_sink_path(vertex, config.data_dir), plan.graph.name, run_key,
                                          vertex=name)
                committer.check_target()
                committer.claim()


def registered_job(dag) -> JobGraph:
    """The job that transform() registered while this DAG file was parsed in this process."""
    graph = REGISTERED_JOBS.get(dag.dag_id)
    if graph is None:
        graph = load_dag_file_job(dag.fileloc, dag.dag_id)
    return graph


def _job_reference(graph: JobGraph, dag, work_dir: str) -> str:
    """A spec file when every vertex function is importable by name where Spark runs (no Airflow
    import there); else the DAG file itself."""
    if all(_importable(vertex.fn_reference) for vertex in graph.vertices.values()):
        path = os.path.join(work_dir, f"{safe_component(graph.name)}.job.json")
        with open(path + ".tmp", "w", encoding="utf-8") as handle:
            json.dump(graph.to_spec(), handle)
        os.replace(path + ".tmp", path)
        return path
    return f"{dag.fileloc}#{dag.dag_id}"


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


def _work_dir(config: RegionflowConfig, partitions: PartitionStore) -> str:
    """Local files of the run (task files, descriptors, zips): under the data dir when it is local."""
    base = config.data_dir[len("file://"):] if config.data_dir.startswith("file://") else config.data_dir
    if "://" in base:
        base = os.path.join(os.environ.get("AIRFLOW_HOME", os.path.expanduser("~/airflow")), "regionflow-work")
    path = os.path.join(base, partitions.run_id, "_tasks")
    os.makedirs(path, exist_ok=True)
    return path


def _reason(result) -> str:
    lines = [line for line in result.log_tail if "regionflow: error:" in line]
    if lines:
        return lines[-1].split("regionflow: error:", 1)[1].strip()
    return result.describe().splitlines()[0]
