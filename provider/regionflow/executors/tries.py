"""What the admission gate knows of a task instance try, and what it asks of the rest of the executor.

`Try` is a workload as the gate sees it (the executor builds it from the workload and its contract), `WaitingTry`
a try waiting for its grant. The protocols are the gate's ways out: `WorkerOperations` (the executor's
workers and task logs; tests record them), `Metrics`, `Copies` (the speculative copies sharing the pool)
and `Recovery` (grants restored after a scheduler restart). No Airflow here, as in the gate.
"""
from __future__ import annotations

import time
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..contract import RegionSlots, TaskContract, shard_bulk_label
from ..core.resources import UNKNOWN
from ..scheduling.pool import Bulk, Grant
from ..store import bulk_id_for


@dataclass(frozen=True)
class Try:
    """One try of a task instance, as the gate sees it (the executor builds it from the workload)."""

    key: Hashable
    ti_id: str
    try_number: int
    dag_id: str
    run_id: str
    task_id: str
    map_index: int
    contract: TaskContract | None  # from its executor_config: RegionSlots, NoSlots, or None (not regionflow's)

    def bulk(self) -> Bulk:
        """The slot bulk the try asks for; its id is set by the store's admission."""
        job_id = f"{self.dag_id}/{self.run_id}"
        bulk_id = bulk_id_for(self.ti_id, self.try_number)
        if not isinstance(self.contract, RegionSlots):
            return Bulk(bulk_id, job_id, f"{self.dag_id}.{self.task_id}", (UNKNOWN,))
        requests, label = self.contract.shard(self.map_index)
        return Bulk(bulk_id, job_id, shard_bulk_label(self.dag_id, self.task_id, self.map_index, label), requests)


@dataclass
class WaitingTry:
    """A try waiting for its grant, with the newest workload the scheduler gave for it."""

    workload: Any
    attempt: Try
    since: float = field(default_factory=time.monotonic)  # when it was first queued for this admission


class WorkerOperations(Protocol):
    """What the gate asks of its executor (the executor does it with Airflow; tests record it)."""

    def hand_over(self, workload: Any) -> None:
        """Start the workload on a worker (with a fresh token: it may have waited long)."""

    def fail(self, workload: Any, message: str) -> None:
        """Report the try FAILED, with `message` in its task log (no worker ever ran it)."""

    def note(self, workload: Any, message: str) -> None:
        """Write an informational line into the try's task log."""


class Metrics(Protocol):
    """Counts grants (with how long the bulk waited) and rejections (`metrics.PoolMetrics`)."""

    def granted(self, waited_s: float | None) -> None: ...

    def rejected(self) -> None: ...


class Copies(Protocol):
    """The speculative copies sharing the pool (`copies.CopyRunner`)."""

    @property
    def waiting(self) -> Mapping[str, Any]: ...

    def owns(self, bulk_id: str) -> bool: ...

    def launch(self, grant: Grant) -> None: ...


class Recovery(Protocol):
    """Grants restored after a scheduler restart (`recovery.GrantRecovery`)."""

    adopted: dict[str, str]


def now_is(state: Any, try_number: int | None) -> str:
    """What Airflow's database says a task instance is now, for messages: deleted, or state and try."""
    return "deleted" if try_number is None else f"{state or 'cleared'} (try {try_number})"


__all__ = ["Copies", "Metrics", "Recovery", "Try", "WaitingTry", "WorkerOperations", "now_is"]
