"""`InputsCommittedTrigger`: a region task shard waits, deferred, for the partition groups it reads.

Per-partition-group readiness (Flink's rule: a consumer region is schedulable once the partitions it
consumes are finished, not its producers' whole job vertex). `regionflow.transform` marks a region task
``waits_for_inputs`` when one of its shards reads the partitions of only some shards of an upstream
region task (a pointwise blocking edge, e.g. FORWARD or RESCALE), and links it to its upstream region
tasks with Airflow's ``one_success`` trigger rule, so Airflow starts its shards as soon as any upstream
shard succeeded. A shard whose producer units have all committed by then queues for its slots at once;
any other defers on this trigger: without slots (the RegionExecutor runs that
first run of the try without any, see `regionflow.contract.INPUTS_GATE_NOTE`) and without an Airflow worker
slot (deferred tasks do not count against ``parallelism`` or ``max_active_tasks``), until every producer
unit it reads has committed in the run's partition store. Then the task resumes and queues for its
slots like any region task.

A producer shard that can no longer commit (its task instance failed for good, was skipped or removed:
``up_for_retry`` still waits) ends the wait with the producers at fault; the resumed task fails without
retrying (its retry could only wait for the same producers). The trigger reads the producers' states
through the Task SDK's ``RuntimeTaskInstance.get_task_states`` (what the standard provider's external
task trigger uses); when that call fails, the trigger logs it and keeps waiting for the commits.
"""
from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from ..spark.data.store import PartitionStore
from ..units.readiness import FINAL_WITHOUT_COMMIT, ProducerShard, Readiness, failure_message, readiness

__all__ = ["FINAL_WITHOUT_COMMIT", "InputsCommittedTrigger", "ProducerShard", "Readiness", "failure_message",
           "readiness"]

DEFAULT_POLL_INTERVAL_S = 1.0


class InputsCommittedTrigger(BaseTrigger):
    """Fires once every producer unit of `producers` has committed under ``{data_dir}/{run_key}``, or
    once one of them can no longer commit. Event payload: ``{"ready": true}`` or ``{"ready": false,
    "failed": [[label, state], ...]}``."""

    def __init__(self, *, data_dir: str, run_key: str, dag_id: str, run_id: str,
                 producers: Sequence[Sequence[Any]], poll_interval: float = DEFAULT_POLL_INTERVAL_S) -> None:
        super().__init__()
        self.data_dir, self.run_key, self.dag_id, self.run_id = data_dir, run_key, dag_id, run_id
        self.producers = [ProducerShard.from_list(p) for p in producers]
        self.poll_interval = float(poll_interval)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (f"{type(self).__module__}.{type(self).__qualname__}", {
            "data_dir": self.data_dir, "run_key": self.run_key, "dag_id": self.dag_id, "run_id": self.run_id,
            "producers": [p.to_list() for p in self.producers], "poll_interval": self.poll_interval})

    async def run(self) -> AsyncIterator[TriggerEvent]:
        store = PartitionStore(self.data_dir, self.run_key)
        while True:
            committed = await asyncio.to_thread(self._committed, store)
            states: Mapping[str, Any] = {}
            if any(p.unit_key not in committed for p in self.producers):
                states = await asyncio.to_thread(self._states)
            found = readiness(self.producers, committed, states)
            if found.ready:
                yield TriggerEvent({"ready": True})
                return
            if found.failed:
                yield TriggerEvent({"ready": False, "failed": [[p.label, state] for p, state in found.failed]})
                return
            await asyncio.sleep(self.poll_interval)

    def _committed(self, store: PartitionStore) -> set[str]:
        return {p.unit_key for p in self.producers if store.committed(p.unit_key) is not None}

    def _states(self) -> Mapping[str, Any]:
        """The producers' task instance states in this run (``{}`` when they cannot be read)."""
        try:
            from airflow.sdk.execution_time.task_runner import RuntimeTaskInstance

            found = RuntimeTaskInstance.get_task_states(dag_id=self.dag_id, run_ids=[self.run_id],
                                                        task_ids=sorted({p.task_id for p in self.producers}))
            return dict(found.get(self.run_id, {}))
        except Exception as error:  # noqa: BLE001 - the commits decide; states only end a hopeless wait early
            self.log.warning("could not read the producer shards' states (%s: %s); waiting for their commits",
                             type(error).__name__, error)
            return {}
