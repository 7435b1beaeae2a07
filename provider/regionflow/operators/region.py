"""`RegionOperator`: one Airflow task instance = one unit (a shard of a logical region's execution
regions) = one Spark attempt, sized to the slots the RegionExecutor granted it.

The unit-run service (`regionflow.units`) does the work: it opens the unit, places it on the try's grant,
runs one attempt on the configured backend and settles it. This operator keeps Airflow's part: the
context and its run's values (`RunContext`, with the vertices' templated fields, ``vertex_templates``, as
Airflow rendered them: a template that fails to render fails the task before any Spark work, naming the
vertex and the field), the deferral of a task that `waits_for_inputs` (`InputsCommittedTrigger`, until the producer
units its shard reads have committed), the task log, and `on_kill`, which cancels the attempt. Run by
another executor (or `airflow tasks test`), the unit uses the first host with as many slots as it asks for.
"""
from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException

from ..airflow_internals import RenderFailureHook
from ..config import RegionflowConfig
from ..contract import is_inputs_gate
from ..core.errors import RegionflowError
from ..core.run_context import RunContext
from ..core.templates import Rendered, TemplateError, checked
from ..spark.launch.attempt import Attempt
from ..spark.launch.watch import DEFAULT_WATCH_INTERVAL_S
from ..store import RegionflowStore
from ..triggers.inputs import InputsCommittedTrigger, failure_message
from ..units.dags import JOB_ATTRIBUTE, JobSource
from ..units.opened import OpenedUnit
from ..units.service import TryRef, UnitFailed, UnitRunService

RegionTaskFailed = UnitFailed  # the name the task log and users know


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


class RegionOperator(RenderFailureHook, BaseOperator):
    ui_color = "#cfe8f7"
    shallow_copy_attrs = (JOB_ATTRIBUTE,)  # a copied task (partial_subset) gets a shallow copy of the graph
    # {vertex: {"sink": template, "reads": [templates]}} of the region's vertices (`core.templates`): Airflow
    # renders them with the DAG's Jinja environment when the task runs (shown in its Rendered Template view)
    template_fields = ("vertex_templates",)
    template_fields_renderers = {"vertex_templates": "json"}

    def __init__(self, *, mode: str, logical: int, max_shards: int, shard: int = 0,
                 watch_interval: float = DEFAULT_WATCH_INTERVAL_S, waits_for_inputs: bool = False,
                 vertex_templates: Rendered | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.vertex_templates = vertex_templates or {}
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
        service = UnitRunService(config, RegionflowStore.from_config(config.store_url), self.log)
        opened = self.open_unit(dag, run_id, config)
        rendered = checked(opened.source.graph, self.vertex_templates)  # an empty or escaping sink is refused
        opened.bind(RunContext.from_airflow(context), rendered)  # once per try: its attempt and any copy see these
        ref = TryRef(dag.dag_id, run_id, ti.task_id, ti.map_index, ti.id, ti.try_number)
        if self.waits_for_inputs:
            self._defer_until_inputs(opened, service.store, ref)
        result = service.run(opened, ref, f"try{ti.try_number}-{uuid.uuid4().hex[:6]}",
                             on_line=supervised_log(self.log.info), watch_interval=self.watch_interval,
                             parent_pid=os.getppid(), started=self._keep)
        return result.to_dict()

    def open_unit(self, dag: Any, run_id: str, config: RegionflowConfig) -> OpenedUnit:
        """The unit this task instance runs (the unit-run service's view of the shard)."""
        return OpenedUnit(JobSource.of(dag), run_id, self.mode, self.logical, self.max_shards, self.shard, config)

    def execute_ready(self, context: Any, event: Mapping[str, Any] | None = None, unit: str = "") -> dict[str, Any]:
        """Resumed from `InputsCommittedTrigger`: run, or fail without retrying when a producer shard
        ended without a commit (a retry could only wait for the same producers)."""
        if isinstance(event, Mapping) and not event.get("ready", True):
            raise AirflowFailException(failure_message(unit, event.get("failed", [])))
        return self.execute(context)

    def _defer_until_inputs(self, opened: OpenedUnit, store: RegionflowStore, ref: TryRef) -> None:
        """Defer (raises Airflow's TaskDeferred) while a producer unit the shard reads has not committed,
        or when the RegionExecutor ran this try without slots to wait first (`INPUTS_GATE_NOTE`): the
        trigger fires at once then, and the resumed try queues for its slots."""
        newest = store.current_grant(ref.ti_id, ref.try_number)
        gate_run = newest is not None and is_inputs_gate(newest.message)
        producers = opened.producer_shards()
        pending = opened.pending_producers()
        if not pending and not gate_run:
            return
        if pending:
            self.log.info("unit %s waits, deferred and holding no slots, for the partitions of %d producer "
                          "shard(s): %s", opened.name, len(pending), ", ".join(p.label for p in pending))
        else:
            self.log.info("unit %s: the partitions it reads are committed; it queues for its slots", opened.name)
        trigger = InputsCommittedTrigger(data_dir=opened.config.data_dir, run_key=opened.partitions.run_id,
                                         dag_id=ref.dag_id, run_id=ref.run_id,
                                         producers=[p.to_list() for p in producers])
        self.defer(trigger=trigger, method_name="execute_ready", kwargs={"unit": opened.name})

    def template_render_failed(self, context: Any, jinja_env: Any, error: Exception) -> None:
        """Airflow's rendering failed (`RenderFailureHook`, mapped tasks too): name the vertex and the field."""
        for vertex, fields in self.vertex_templates.items():
            for name, template in fields.items():
                try:
                    self.render_template(template, context, jinja_env, set())
                except Exception as culprit:  # noqa: BLE001 - reported with the vertex and field it is about
                    raise TemplateError(
                        f"region task {self.task_id}: vertex {vertex!r} field {name!r} (vertex_templates): "
                        f"template {template!r} did not render: {type(culprit).__name__}: {culprit}") from error

    def _keep(self, attempt: Attempt) -> None:
        self._attempt = attempt

    def on_kill(self) -> None:
        if self._attempt is not None:
            self._attempt.cancel()
