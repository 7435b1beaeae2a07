"""`SpeculationSensor`: the long-tail watcher beside a mapped region task (seed 001 / FLIP-168).

Each poke reads the attempts of its region task's shards from regionflow's store (shard = map
index), runs the pure detector (`scheduling.speculation.detect`), and for every slow attempt:

* blocks (DAG run's job, host of the slow attempt) in the store for ``[regionflow] blocklist_expiry``
  seconds; the RegionExecutor mirrors store entries into its slot pool, so no new bulk of the run
  lands there meanwhile;
* asks for one speculative copy of the shard (`RegionflowStore.request_copy`) unless the shard
  already has an open one. The sensor prepares the copy's unit task file (everything but host and
  attempt id, via the unit-run service's `OpenedUnit`, as the region task opens it), and the executor runs it
  once its slot bulk is granted. The template carries the original try's run context and rendered
  sink paths as its region task saved them (`OpenedUnit.load_bound`). The Airflow execution API
  refuses to start a task instance that is not QUEUED, so a copy cannot be a second run of the task
  instance: regionflow launches it.

It records the six metrics of seed 001 in the store and as Airflow gauges
``regionflow.speculation.<name>`` (tags dag_id, task_id), and succeeds once every shard has a
succeeded attempt, or once every task instance of the region task finished (read with the task
SDK's ``ti.get_task_states``: a region that failed for good has nothing left to speculate; the
store alone cannot tell "not started yet" from "failed before starting").

Reschedule mode: the sensor holds no worker between pokes. Its poke interval is the detector's
``interval`` but at least `MIN_RESCHEDULE_INTERVAL_S` (5 s): in reschedule mode each poke is a new
task process started by the scheduler (a scheduler loop, a queued -> running round trip through the
executor and a DAG file parse: seconds on a small box), so a 1 s interval would only keep a worker
and the scheduler busy restarting it while adding nothing, as pokes cannot come faster than that.
The sensor asks the RegionExecutor for no slot (`regionflow.contract.NoSlots` in its ``executor_config``): a
poke is a few store reads and must not queue behind the regions it watches.
"""
from __future__ import annotations

import os
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from airflow.sdk.bases.sensor import BaseSensorOperator

from ..config import RegionflowConfig
from ..scheduling.speculation import (
    AttemptView,
    Decision,
    ShardView,
    SlowAttempt,
    detect,
    metrics_from,
    shards_from_attempts,
)
from ..scheduling.speculation_policy import SpeculationConfig
from ..spark.data.store import PartitionStore, run_key_for
from ..store import RegionflowStore, job_id_for

MIN_RESCHEDULE_INTERVAL_S = 5.0
FINISHED_TI_STATES = frozenset({"success", "failed", "upstream_failed", "skipped", "removed"})


def emit_gauges(values: Mapping[str, float], tags: Mapping[str, str]) -> None:
    """Airflow metrics (StatsD / OpenTelemetry, whatever [metrics] configures); never fails a poke."""
    try:
        from airflow.sdk.observability.stats import Stats
    except ImportError:  # pragma: no cover - older task SDKs
        from airflow.stats import Stats  # type: ignore[no-redef]
    for name, value in values.items():
        try:
            Stats.gauge(name, value, tags=dict(tags))
        except Exception:  # noqa: BLE001 - metrics are best effort
            pass


class SpeculationSensor(BaseSensorOperator):
    """Watches the shards of `region_task_id`; see the module docstring."""

    ui_color = "#f3e0f7"

    def __init__(self, *, region_task_id: str, total_shards: int, mode: str, logical: int, max_shards: int,
                 shard_requests: Sequence[Sequence[Mapping[str, Any]]], shard_labels: Sequence[str],
                 speculation: Mapping[str, Any] | SpeculationConfig | None = None,
                 blocklist_expiry: float | None = None, decided_per_run: bool = False, **kwargs: Any) -> None:
        config = speculation if isinstance(speculation, SpeculationConfig) else \
            SpeculationConfig.from_mapping(speculation or {})
        kwargs.setdefault("mode", "reschedule")
        kwargs.setdefault("poke_interval", sensor_poke_interval(config, kwargs["mode"]))
        super().__init__(**kwargs)
        self.region_task_id = region_task_id
        self.total_shards = int(total_shards)  # at the declared max for a region `decided_per_run`
        self.decided_per_run = decided_per_run
        self.region_mode = mode  # the exchange mode (BaseSensorOperator owns `mode`)
        self.logical = logical
        self.max_shards = max_shards
        self.shard_requests = [list(map(dict, requests)) for requests in shard_requests]
        self.shard_labels = list(shard_labels)
        self.speculation = {f: getattr(config, f) for f in config.__dataclass_fields__}
        self.blocklist_expiry = blocklist_expiry

    @property
    def config(self) -> SpeculationConfig:
        return SpeculationConfig(**self.speculation)

    # ---- poke -----------------------------------------------------------------------------------

    def poke(self, context: Any) -> bool:
        """One look at the region's shards. Speculation only ever saves time, so a poke that fails (a store
        that cannot be read or written just now, a copy template that cannot be written) fails nothing: it
        says why in the log, and the sensor is done once the region's task instances are, as always."""
        try:
            if self.watch(context):
                return True
        except Exception as error:  # noqa: BLE001 - the sensor is a leaf: raising would fail the DAG run
            self.log.warning("speculation for %s: this poke failed (%s: %s); the next one tries again",
                             self.region_task_id, type(error).__name__, error)
        return self.region_finished(context)

    def watch(self, context: Any) -> bool:
        """Detect slow attempts, ask for their copies, record the metrics; True once every shard finished."""
        rf_config = RegionflowConfig.from_airflow()
        store = RegionflowStore.from_config(rf_config.store_url)
        dag, run_id = context["dag"], context["run_id"]
        now = time.time()
        config = self.config
        shards = self.snapshot(store, dag.dag_id, run_id, self.shards_of_run(rf_config, dag.dag_id, run_id))
        decision = detect(shards, now, config)
        expiry = rf_config.blocklist_expiry if self.blocklist_expiry is None else self.blocklist_expiry
        for slow in decision.slow:
            self.speculate(store, context, rf_config, decision, slow, now, expiry)
        flat = metrics_from(shards, now, config).as_flat_dict()
        store.record_metrics(dag.dag_id, run_id, self.region_task_id, flat, recorded_at=now)
        emit_gauges(flat, {"dag_id": dag.dag_id, "task_id": self.region_task_id})
        if decision.total and decision.finished == decision.total:
            self.log.info("every shard of %s finished (%d copies won)", self.region_task_id,
                          int(flat.get("regionflow.speculation.copies_won", 0)))
            return True
        return False

    def shards_of_run(self, rf_config: RegionflowConfig, dag_id: str, run_id: str) -> int:
        """The region's shard count in this run: its decision's for a region decided per run (its task
        instances wait for the decision, so before it there is nothing to watch)."""
        if not self.decided_per_run:
            return self.total_shards
        decision = PartitionStore(rf_config.data_dir, run_key_for(dag_id, run_id)).decisions().get(self.region_task_id)
        return int(decision["shards"]) if decision else 0

    def snapshot(self, store: RegionflowStore, dag_id: str, run_id: str,
                 total: int | None = None) -> tuple[ShardView, ...]:
        views = [AttemptView(shard=max(r.map_index, 0), attempt_id=r.attempt_id, host=r.host,
                             started_at=r.started_at, ended_at=r.ended_at, state=r.state.value,
                             input_bytes=r.input_bytes, speculative=r.speculative)
                 for r in store.attempts(dag_id, run_id, self.region_task_id)]
        return shards_from_attempts(views, self.total_shards if total is None else total)

    def speculate(self, store: RegionflowStore, context: Any, rf_config: RegionflowConfig, decision: Decision,
                  slow: SlowAttempt, now: float, expiry: float) -> None:
        dag, run_id = context["dag"], context["run_id"]
        job_id = job_id_for(dag.dag_id, run_id)
        label = f"{self.region_task_id}[{slow.shard}]"
        store.block(job_id, slow.host, now + expiry, reason=f"slow attempt {slow.attempt_id} of {label}: {slow.reason}")
        earlier = store.copy_requests(dag.dag_id, run_id, self.region_task_id, slow.shard)
        if any(r.is_open for r in earlier):
            return
        if len(earlier) >= self.config.max_attempts:
            self.log.warning("%s is slow (%s) but already had %d copies; no more", label, slow.reason, len(earlier))
            return
        requests = self.shard_requests[slow.shard]
        template = self.write_copy_template(context, rf_config, slow.shard, len(requests))
        record = store.request_copy(
            dag_id=dag.dag_id, run_id=run_id, task_id=self.region_task_id, map_index=slow.shard,
            unit_key=template["unit_key"], label=f"{dag.dag_id}.{label} copy ({self.shard_labels[slow.shard]})",
            requests=requests, template_path=template["path"], py_files=template["py_files"],
            spark_conf=rf_config.spark_conf, excluded_hosts=decision.excluded_hosts(slow.shard) | {slow.host},
            slow_attempt=slow.attempt_id, job_id=job_id)
        if record is not None:
            self.log.warning("%s: attempt %s is slow (%s); host %s blocklisted for %.0f s, copy request %d",
                             label, slow.attempt_id, slow.reason, slow.host, expiry, record.request_id)

    def write_copy_template(self, context: Any, rf_config: RegionflowConfig, shard: int,
                            slots: int) -> dict[str, Any]:
        """Write the copy's unit task file (host and attempt left for the executor)."""
        from ..units.dags import JobSource  # the task process of a poke that asks for a copy only
        from ..units.opened import OpenedUnit

        opened = OpenedUnit(JobSource.of(context["dag"]), context["run_id"], self.region_mode, self.logical,
                            self.max_shards, shard, rf_config)
        if not opened.load_bound():  # the original's run values and rendered paths, never rendered again here
            self.log.warning("unit %s: its region task saved no run values; the copy runs without them", opened.name)
        task = opened.unit_task(slots=slots).task
        path = os.path.join(opened.work_dir, f"{opened.key}-copy-{uuid.uuid4().hex[:8]}.template.json")
        task.write(path)
        return {"unit_key": opened.key, "path": path, "py_files": opened.py_files(task)}

    def region_finished(self, context: Any) -> bool:
        ti = context.get("ti")
        getter = getattr(ti, "get_task_states", None)
        if getter is None:
            return False
        try:
            states = getter(dag_id=context["dag"].dag_id, task_ids=[self.region_task_id],
                            run_ids=[context["run_id"]])
        except Exception as error:  # noqa: BLE001 - the next poke asks again
            self.log.warning("cannot read the states of %s: %s", self.region_task_id, error)
            return False
        found = [str(state) if state is not None else None
                 for state in (states or {}).get(context["run_id"], {}).values()]
        found = [getattr(state, "value", state) for state in found]
        if found and all(state in FINISHED_TI_STATES for state in found):
            self.log.info("every task instance of %s finished: nothing left to speculate", self.region_task_id)
            return True
        return False


def sensor_poke_interval(config: SpeculationConfig, mode: str) -> float:
    """The detector's interval, but at least 5 s in reschedule mode (see the module docstring)."""
    if mode == "reschedule":
        return max(config.interval, MIN_RESCHEDULE_INTERVAL_S)
    return config.interval


def speculation_task_id(region_task_id: str) -> str:
    return f"{region_task_id}__speculation"


__all__ = ["MIN_RESCHEDULE_INTERVAL_S", "SpeculationSensor", "emit_gauges", "sensor_poke_interval",
           "speculation_task_id"]
