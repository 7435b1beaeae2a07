"""`RegionOperator`: one Airflow task instance = one unit (a shard of a logical region's execution
regions) = one Spark submission, sized to the slots the RegionExecutor granted it.

The task learns its grant (host, slots) from regionflow's store, builds the unit task file (the
plan reference, its regions, the attempt, one input descriptor per partition group it reads), and
runs it as one `Attempt` on the configured backend (``[regionflow] backend``: a spark-submit, or a
session on the host's Spark Connect server). The attempt's output goes to the task log; a failed
attempt fails the task with the vertex, subtask and Python error; `on_kill` cancels the attempt.
Run by another executor (or `airflow tasks test`), it uses the first host with as many slots as it
asked for. A task that `waits_for_inputs` first defers (`InputsCommittedTrigger`) until the producer units
its shard reads have committed, then runs as above.
"""
from __future__ import annotations

import importlib.util
import os
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any, cast

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException

from ..config import RegionflowConfig
from ..contract import is_inputs_gate
from ..core.adaptive import GrantDecision, decided
from ..core.attempts import AttemptState
from ..core.errors import RegionflowError
from ..core.graph import JobGraph, load_dag_file_job
from ..core.plan import Plan
from ..localfiles import write_json_atomically
from ..scheduling.blocklist import EVERY_JOB
from ..scheduling.hosts import Host
from ..spark.attempt import Attempt
from ..spark.backends import configured_backend
from ..spark.cluster_managers import excluded_nodes
from ..spark.descriptors import DescriptorCache, PartitionLocation
from ..spark.filesystems import local_path
from ..spark.program import resolve_sink_path
from ..spark.pyfiles import build_py_files
from ..spark.sinks import SinkCommitter
from ..spark.store import PartitionStore, run_key_for, safe_component
from ..spark.task import UnitTask
from ..spark.unit import UnitLayout, grant_target, job_modules
from ..spark.watch import DEFAULT_WATCH_INTERVAL_S, Settlement
from ..store import GrantState, RegionflowStore, job_id_for
from ..store.recorder import StoreRecorder
from ..triggers.inputs import InputsCommittedTrigger, ProducerShard, failure_message


class RegionTaskFailed(RegionflowError):
    """The unit's Spark application failed."""


class TaskSupervisorGone(RegionflowError):
    """The task process can no longer write its log: the Airflow worker process that supervises it (and
    reads its output, and sends its heartbeats) is gone, killed for instance."""


def supervised_log(write: Callable[[str], None]) -> Callable[[str], None]:
    """`write` (the task log), raising `TaskSupervisorGone` instead of the bare `BrokenPipeError` a log
    line meets once the supervising worker has died, so the attempt ends at once, saying why (an
    orphaned task process holds no slots any more, and Airflow retries the try when its heartbeats stop)."""
    def log_line(line: str) -> None:
        try:
            write(line)
        except BrokenPipeError as error:
            raise TaskSupervisorGone(
                "the task process lost its supervisor (its log pipe is broken: the Airflow worker process that "
                "runs it is gone); Airflow fails this try once its heartbeats stop and retries it") from error
    return log_line


def dag_run_outputs(dag_file: str, dag_id: str, run_id: str, data_dir: str,
                    max_shards: int) -> tuple[UnitLayout, PartitionStore]:
    """The unit layout of a transformed DAG and its run's partition store (committed units, sinks):
    ``layout.sink_figures(partitions, data_dir)`` gives each sink's rows, checksum and path."""
    layout = UnitLayout(Plan(load_dag_file_job(dag_file, dag_id)), max_shards)
    return layout, PartitionStore(data_dir, run_key_for(dag_id, run_id))


# The attribute transform() sets on each region task it creates (a RegionOperator, or the MappedOperator of
# a region with several shards): the task's JobGraph. Airflow serializes a fixed set of operator fields
# (BaseOperator.get_serialized_fields, partial_kwargs for a mapped one), so it never reaches the
# serialized DAG; a task process that parsed the DAG file finds it on the DAG's tasks.
JOB_ATTRIBUTE = "regionflow_job"


def attach_job(task: Any, graph: JobGraph) -> None:
    """Leave `graph` on a region task (or mapped region task) that transform() created."""
    setattr(task, JOB_ATTRIBUTE, graph)


def attached_job(dag) -> JobGraph | None:
    """The JobGraph transform() left on the DAG's region tasks, if this DAG object was built by parsing
    its file (a deserialized DAG has none)."""
    for task in getattr(dag, "tasks", ()):
        graph = getattr(task, JOB_ATTRIBUTE, None)
        if isinstance(graph, JobGraph) and graph.name == dag.dag_id:
            return graph
    return None


class RegionOperator(BaseOperator):
    ui_color = "#cfe8f7"
    shallow_copy_attrs = (JOB_ATTRIBUTE,)  # a copied task (partial_subset) gets a shallow copy of the graph

    def __init__(self, *, mode: str, logical: int, max_shards: int, shard: int = 0,
                 watch_interval: float = DEFAULT_WATCH_INTERVAL_S, waits_for_inputs: bool = False,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.waits_for_inputs = waits_for_inputs
        self.watch_interval = watch_interval
        self.mode = mode
        self.logical = logical
        self.max_shards = max_shards
        self.shard = shard
        self._attempt: Attempt | None = None

    def execute(self, context: Any) -> dict[str, Any]:
        config = RegionflowConfig.from_airflow()
        dag, ti, run_id = context["dag"], context["ti"], context["run_id"]
        prepared = PreparedUnit.of(dag, run_id, self.mode, self.logical, self.max_shards, self.shard, config)
        store = RegionflowStore.from_config(config.store_url)
        if self.waits_for_inputs:
            self._defer_until_inputs(prepared, store, ti)
        bulk_id, host, slots = self._granted(store, ti, config, prepared.layout, prepared.unit)
        prepared.claim_sinks()
        attempt_id = f"try{ti.try_number}-{uuid.uuid4().hex[:6]}"
        task = prepared.unit_task(slots=slots, host=host.name, attempt_id=attempt_id)
        task.excluded_nodes = excluded_nodes(host, config.cluster.hosts, lambda: [
            entry.host for entry in store.active_blocks(job_id=job_id_for(dag.dag_id, run_id))])
        backend = configured_backend(config, config.spark_conf, lambda: prepared.py_files(task))
        recorder = StoreRecorder(store, dag.dag_id, run_id, ti.task_id, ti.map_index, bulk_id=bulk_id)
        self._attempt = Attempt(task, prepared.task_path(attempt_id), host, slots, backend, prepared.partitions,
                                recorder=recorder, on_line=supervised_log(self.log.info),
                                watch_interval=self.watch_interval, parent_pid=os.getppid())
        self.log.info("unit %s: %d region(s) on host %s with %d slot(s), attempt %s (%s backend)", task.unit_name,
                      len(task.regions), host.name, slots, attempt_id, backend.name)
        decision = prepared.grant_decision
        if decision is not None and decision.values:
            self.log.info("unit %s: adaptive parallelism %s", task.unit_name, decision.reason)
        outcome = self._attempt.run()
        if outcome.host_lost:
            self.log.error("unit %s on host %s: %s", task.unit_name, host.name, outcome.host_lost)
            self._block_lost_host(store, config, host.name, outcome.host_lost)
        if not outcome.unit_done:
            settlement = self._wait_for_copies(store, prepared, dag.dag_id, run_id, ti, outcome.settlement)
        else:
            settlement = outcome.settlement
        if not settlement.unit_done:
            raise RegionTaskFailed(f"unit {task.unit_name} failed: {outcome.reason}")
        committed = settlement.winner
        assert committed is not None, "a done unit has a commit"
        winner = store.record_commit(dag.dag_id, run_id, task.unit_key, committed.attempt_id)
        store.cancel_copies(dag.dag_id, run_id, ti.task_id, ti.map_index)
        self._release_partitions(prepared, config)
        if winner == attempt_id:
            self.log.info("unit %s committed by attempt %s on host %s", task.unit_name, winner, host.name)
        else:
            self.log.info("unit %s: attempt %s on host %s committed first and wins; this attempt %s on host %s "
                          "was %s", task.unit_name, winner, settlement.winner_host, attempt_id, host.name,
                          "cancelled" if outcome.state is AttemptState.LOST_COMMIT else outcome.state.value)
        return {"unit": task.unit_name, "attempt": attempt_id, "winner": winner, "winner_host": settlement.winner_host,
                "sinks": committed.manifest.get("sinks", {}),
                "parallelism": committed.manifest.get("parallelism", {})}

    def execute_ready(self, context: Any, event: Mapping[str, Any] | None = None, unit: str = "") -> dict[str, Any]:
        """Resumed from `InputsCommittedTrigger`: run, or fail without retrying when a producer shard
        ended without a commit (a retry could only wait for the same producers)."""
        if isinstance(event, Mapping) and not event.get("ready", True):
            raise AirflowFailException(failure_message(unit, event.get("failed", [])))
        return self.execute(context)

    def _defer_until_inputs(self, prepared: PreparedUnit, store: RegionflowStore, ti: Any) -> None:
        """Defer (raises Airflow's TaskDeferred) while a producer unit the shard reads has not committed,
        or when the RegionExecutor ran this try without slots to wait first (`INPUTS_GATE_NOTE`): the
        trigger fires at once then, and the resumed try queues for its slots."""
        newest = store.current_grant(ti.id, ti.try_number)
        gate_run = newest is not None and is_inputs_gate(newest.message)
        producers = prepared.producer_shards()
        pending = [p for p in producers if prepared.partitions.committed(p.unit_key) is None]
        if not pending and not gate_run:
            return
        if pending:
            self.log.info("unit %s waits, deferred and holding no slots, for the partitions of %d producer "
                          "shard(s): %s", prepared.name, len(pending), ", ".join(p.label for p in pending))
        else:
            self.log.info("unit %s: the partitions it reads are committed; it queues for its slots", prepared.name)
        trigger = InputsCommittedTrigger(data_dir=prepared.config.data_dir, run_key=prepared.partitions.run_id,
                                         dag_id=ti.dag_id, run_id=ti.run_id,
                                         producers=[p.to_list() for p in producers])
        self.defer(trigger=trigger, method_name="execute_ready", kwargs={"unit": prepared.name})

    def _wait_for_copies(self, store: RegionflowStore, prepared: PreparedUnit, dag_id: str, run_id: str,
                         ti: Any, failed: Settlement) -> Settlement:
        """This attempt failed: while a speculative copy of the shard is still open (pending, granted or
        running), wait for it; the shard succeeds if the copy commits."""
        key = prepared.key
        announced = False
        while True:
            committed = prepared.partitions.committed(key)
            if committed is not None:
                return Settlement(AttemptState.LOST_COMMIT, committed)
            open_copies = [r for r in store.copy_requests(dag_id, run_id, ti.task_id, ti.map_index) if r.is_open]
            if not open_copies:
                committed = prepared.partitions.committed(key)  # a copy may have won just now
                return failed if committed is None else Settlement(AttemptState.LOST_COMMIT, committed)
            if not announced:
                self.log.warning("unit %s: this attempt %s; waiting for speculative copy request(s) %s",
                                 prepared.name, failed.state, [r.request_id for r in open_copies])
                announced = True
            time.sleep(self.watch_interval)

    def _block_lost_host(self, store: RegionflowStore, config: RegionflowConfig, host: str, why: str) -> None:
        """Keep every DAG run's next regions, this task's retry among them, off a lost host for
        ``blocklist_expiry`` seconds: an entry for `EVERY_JOB`, which the executor mirrors from the store
        into its slot pool (a host whose server is down fails whichever run is sent there, not only this
        one), and probes until the host answers again (`executors.lost_hosts`). Not when
        `RegionflowConfig.blocks_lost_hosts` says no (one host, or no blocklist)."""
        if not config.blocks_lost_hosts:
            return
        try:
            store.block(EVERY_JOB, host, time.time() + config.blocklist_expiry, reason=f"host lost: {why}"[:500])
            self.log.info("host %s blocklisted for every DAG run for %g s", host, config.blocklist_expiry)
        except Exception as error:  # noqa: BLE001 - the task fails with the host loss either way
            self.log.warning("could not blocklist lost host %s: %s", host, error)

    def _release_partitions(self, prepared: PreparedUnit, config: RegionflowConfig) -> None:
        """Delete the partitions this unit read whose every consumer has committed (``[regionflow]
        partition_retention = 0``); a failure is logged, never fails the committed unit."""
        if config.partition_retention > 0:
            return
        try:
            paths = prepared.layout.releasable(prepared.unit, prepared.partitions)
            freed = prepared.partitions.release(paths)
        except Exception as error:  # noqa: BLE001 - `regionflow gc` removes what is left
            self.log.warning("unit %s: could not release its inputs' partitions: %s", prepared.name, error)
            return
        if paths:
            self.log.info("unit %s: released %d partition dataset(s), %d bytes: every consumer has committed",
                          prepared.name, len(paths), freed)

    def on_kill(self) -> None:
        if self._attempt is not None:
            self._attempt.cancel()

    # ---- helpers ----------------------------------------------------------------------------------

    def _granted(self, store: RegionflowStore, ti: Any, config: RegionflowConfig, layout: UnitLayout,
                 unit: int) -> tuple[str | None, Host, int]:
        """The grant of this try's newest admission: (bulk id, host, slots)."""
        grant = store.current_grant(ti.id, ti.try_number)
        if grant is not None and grant.host and grant.state is GrantState.GRANTED:
            target = grant_target([host for host, _ in grant.slots], config.cluster.host,
                                  pool_masters=config.backend != "session")
            if target.note:
                self.log.warning("%s", target.note)
            return grant.bulk_id, target.host, target.slots
        host = next(iter(config.cluster))
        slots = min(host.slots, len(layout.requests(unit, layout.width(unit, host.slots))))
        self.log.warning("no live slot grant recorded for try %d of %s (not run by RegionExecutor?): using host %s "
                         "with %d slot(s)", ti.try_number, ti.id, host.name, slots)
        return None, host, slots


class PreparedUnit:
    """Everything about one shard of a region task that does not depend on its host or attempt: the
    plan, the unit, the run's partition store and work dir, its inputs. The region task and the
    speculation sensor (which prepares a copy's unit task file) share it, so both build the same
    unit task for a shard."""

    def __init__(self, dag, run_id: str, mode: str, logical: int, max_shards: int, shard: int,
                 config: RegionflowConfig) -> None:
        self.config = config
        self.graph = registered_job(dag)
        self.job_dag = dag
        self.plan = Plan(self.graph, mode)
        self.layout = UnitLayout(self.plan, max_shards)
        units = self.layout.units_of_logical(logical)
        if not 0 <= shard < len(units):
            raise RegionflowError(f"logical region {logical} has {len(units)} shard(s); there is no shard {shard}")
        self.unit = units[shard]
        self.partitions = PartitionStore(config.data_dir, run_key_for(dag.dag_id, run_id))
        self.work_dir = _work_dir(config, self.partitions)
        self._job: str | None = None
        self._inputs: dict[str, Any] | None = None
        self._input_bytes: int | None = None
        self.grant_decision: GrantDecision | None = None  # set by unit_task

    @classmethod
    def of(cls, dag, run_id: str, mode: str, logical: int, max_shards: int, shard: int,
           config: RegionflowConfig) -> PreparedUnit:
        return cls(dag, run_id, mode, logical, max_shards, shard, config)

    @property
    def key(self) -> str:
        return self.layout.keys[self.unit]

    @property
    def name(self) -> str:
        return self.layout.names[self.unit]

    def unit_task(self, *, slots: int, host: str = "", attempt_id: str = "") -> UnitTask:
        """The unit task for a grant of `slots` slots; without host and attempt it is a template. Its
        region's adaptive vertices are decided again for the grant (`UnitLayout.at_grant`); the
        decision is kept in `grant_decision`."""
        if self._job is None:
            self._job = _job_reference(self.graph, self.job_dag, self.work_dir)
        if self._inputs is None:
            self._inputs = self._input_refs(self.layout, self.unit)
        if self._input_bytes is None and self._inputs:
            self._input_bytes = self.layout.input_bytes(self.unit, self.partitions)
        layout, unit, self.grant_decision = self.layout.at_grant(self.unit, slots, self._input_bytes)
        inputs = self._inputs
        if layout is not self.layout:  # other partition groups (a cache of their own; blobs are named by content)
            inputs = self._input_refs(layout, unit)
        width = layout.width(unit, slots)
        return UnitTask(job=self._job, mode=self.plan.mode.value, run_id=self.partitions.run_id,
                        data_dir=self.config.data_dir, unit_key=self.key, unit_name=self.name,
                        regions=list(layout.shards[unit].regions), attempt_id=attempt_id, host=host,
                        width=width, inputs=dict(inputs), slots=slots, max_shards=layout.max_shards,
                        slot_request=layout.slot_request(unit, width), parallelism=decided(layout.plan.graph),
                        subtasks=layout.plan.topology.subtask_count, input_bytes=self._input_bytes)

    def producer_shards(self) -> list[ProducerShard]:
        """The producer units of other logical regions whose partitions this shard reads."""
        layout = self.layout
        return [ProducerShard(*layout.task_instance_of(unit), layout.keys[unit])
                for unit in layout.producer_units(self.unit)]

    def task_path(self, attempt_id: str) -> str:
        return os.path.join(self.work_dir, f"{self.key}-{attempt_id}.json")

    def py_files(self, task: UnitTask) -> list[str]:
        return build_py_files(os.path.join(self.work_dir, "py"), job_modules(task.job))

    def _check_inputs_kept(self) -> None:
        """A unit run again after its consumers all committed (a cleared task) finds inputs released
        by Flink's rule: say so, and what to do, instead of failing inside Spark."""
        released = [path for path in self.layout.producer_datasets(self.unit, self.partitions)
                    if self.partitions.released(path)]
        if released:
            raise RegionflowError(
                f"unit {self.name}: its input partitions were released once every consumer had committed "
                f"([regionflow] partition_retention = {self.config.partition_retention:g}): "
                f"{', '.join(released[:3])}{' ...' if len(released) > 3 else ''}; their committed producers are "
                f"not run again in this DAG run (first commit wins), so trigger a new DAG run, or set "
                f"partition_retention > 0 before runs whose tasks you may want to clear")

    def _input_refs(self, layout: UnitLayout, unit: int) -> dict[str, Any]:
        self._check_inputs_kept()
        partitions = self.partitions
        descriptors = DescriptorCache(os.path.join(self.work_dir, "descriptors"))
        scheduler = layout.scheduler()

        def host_of(producer_unit: int) -> str:
            committed = partitions.committed(layout.keys[producer_unit])
            return committed.manifest.get("host", "") if committed else ""

        # the cast only types the lambda: mypy cannot infer one with a default argument (g=g) from its context
        return {str(g): descriptors.ref_for(g, cast("Callable[[], list[PartitionLocation]]",
                                                    lambda g=g: layout.locations(g, partitions, host_of)))
                for g, _ in scheduler.consumed[unit]}

    def claim_sinks(self) -> None:
        plan, layout = self.plan, self.layout
        members = {plan.topology.vertex_names[v] for r in layout.shards[self.unit].regions
                   for v in plan.vertex_counts(plan.regions[r])}
        for name in sorted(members):
            vertex = plan.graph.vertices[name]
            if vertex.sink:
                committer = SinkCommitter(resolve_sink_path(vertex, self.config.data_dir), plan.graph.name,
                                          self.partitions.run_id, vertex=name, data_dir=self.config.data_dir)
                committer.check_target()
                committer.claim()


def registered_job(dag) -> JobGraph:
    """The job that transform() built for this DAG: left on its region tasks when this process parsed the
    DAG file, else imported again from ``dag.fileloc``."""
    graph = attached_job(dag)
    if graph is None:
        graph = load_dag_file_job(dag.fileloc, dag.dag_id)
    return graph


def _job_reference(graph: JobGraph, dag, work_dir: str) -> str:
    """A spec file when every vertex function is importable by name where Spark runs (no Airflow
    import there); else the DAG file itself."""
    if all(_importable(vertex.fn_reference) for vertex in graph.vertices.values()):
        path = os.path.join(work_dir, f"{safe_component(graph.name)}.job.json")
        return write_json_atomically(path, graph.to_spec())  # region tasks of a run write it at once
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
    base = local_path(config.data_dir)
    if "://" in base:
        base = os.path.join(os.environ.get("AIRFLOW_HOME", os.path.expanduser("~/airflow")), "regionflow-work")
    path = os.path.join(base, partitions.run_id, "_tasks")
    os.makedirs(path, exist_ok=True)
    return path
