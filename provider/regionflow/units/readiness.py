"""Readiness of a shard whose units run in separate processes: the producer shards it waits for (the
strategy's readiness rule, `RegionScheduler.input_producers`, with "finished" read as "committed in the
run's partition store") and when such a wait can never end (a producer shard ended without a commit)."""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# Producer task instance states from which no commit can come any more in this run.
FINAL_WITHOUT_COMMIT = frozenset({"failed", "upstream_failed", "skipped", "removed"})


@dataclass(frozen=True)
class ProducerShard:
    """One producer unit a shard reads: the task instance that runs it and the unit's store key."""

    task_id: str
    map_index: int  # -1: the region task is not mapped
    unit_key: str

    @property
    def state_key(self) -> str:
        """How Airflow's task states API names this task instance (``task_id`` or ``task_id_<map index>``)."""
        return self.task_id if self.map_index < 0 else f"{self.task_id}_{self.map_index}"

    @property
    def label(self) -> str:
        return self.task_id if self.map_index < 0 else f"{self.task_id}[{self.map_index}]"

    def to_list(self) -> list[Any]:
        return [self.task_id, self.map_index, self.unit_key]

    @classmethod
    def from_list(cls, value: Sequence[Any]) -> ProducerShard:
        task_id, map_index, unit_key = value
        return cls(str(task_id), int(map_index), str(unit_key))


@dataclass(frozen=True)
class Readiness:
    """Where a shard's wait stands: ``ready``, or ``failed`` with the producers that cannot commit, or
    still waiting (neither) for the producers in `pending`."""

    ready: bool
    pending: tuple[ProducerShard, ...]
    failed: tuple[tuple[ProducerShard, str], ...]  # (producer, its task instance state)


def readiness(producers: Iterable[ProducerShard], committed: set[str], states: Mapping[str, Any]) -> Readiness:
    """The shard is ready when every producer unit has committed; it fails when a producer that has not
    committed is in a final state without a commit (`FINAL_WITHOUT_COMMIT`). `states` maps
    `ProducerShard.state_key` to the task instance's state (absent: unknown, keep waiting)."""
    pending = tuple(p for p in producers if p.unit_key not in committed)
    failed = tuple((p, str(states[p.state_key])) for p in pending
                   if states.get(p.state_key) is not None and str(states[p.state_key]) in FINAL_WITHOUT_COMMIT)
    return Readiness(ready=not pending, pending=pending, failed=failed)


def failure_message(unit_name: str, failed: Sequence[Sequence[Any]]) -> str:
    """Why a shard cannot run: the producer shards (label, state) whose partitions it would read."""
    listed = ", ".join(f"{label} ({state})" for label, state in failed)
    return (f"unit {unit_name} cannot run: the partitions it reads will never be committed in this DAG run, "
            f"their producer shard(s) ended without a commit: {listed}; clear the failed producer shard(s) "
            f"together with this task (downstream) to run them again")


__all__ = ["FINAL_WITHOUT_COMMIT", "ProducerShard", "Readiness", "failure_message", "readiness"]
