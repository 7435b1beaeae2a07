"""What the store hands out: states, their allowed transitions, and frozen plain records.

Callers (the executor, task processes, the UI plugin) only ever see these records, never ORM
objects, so nothing outside the store depends on a live session. All times are epoch seconds
(UTC, float), the same clock in every process.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from ..core.attempts import ATTEMPT_END_STATES, AttemptState


class GrantState(StrEnum):
    WAITING = "waiting"
    GRANTED = "granted"
    RELEASED = "released"
    REJECTED = "rejected"
    LOST = "lost"


# A released, rejected or lost grant never holds slots again: granting it twice is how one slot
# would end up with two regions. Releasing a lost grant is allowed but keeps it "lost" (see
# RegionflowStore.record_released).
GRANT_TRANSITIONS: dict[GrantState, frozenset[GrantState]] = {
    GrantState.WAITING: frozenset({GrantState.GRANTED, GrantState.REJECTED, GrantState.RELEASED}),
    GrantState.GRANTED: frozenset({GrantState.RELEASED, GrantState.LOST}),
    GrantState.LOST: frozenset({GrantState.RELEASED}),
    GrantState.RELEASED: frozenset(),
    GrantState.REJECTED: frozenset(),
}

class CopyState(StrEnum):
    PENDING = "pending"      # asked for by the sensor, not yet in the executor's pool
    GRANTED = "granted"      # its slot bulk was granted; the submission is being prepared
    RUNNING = "running"      # its Spark submission runs as attempt `attempt_id` on `host`
    WON = "won"              # it committed the unit first
    LOST = "lost"            # another attempt committed first; it was killed or discarded itself
    FAILED = "failed"        # it failed (the shard goes on with its other attempts)
    CANCELLED = "cancelled"  # the shard finished (or the run ended) before it ran


COPY_OPEN_STATES: frozenset[CopyState] = frozenset({CopyState.PENDING, CopyState.GRANTED, CopyState.RUNNING})

COPY_TRANSITIONS: dict[CopyState, frozenset[CopyState]] = {
    CopyState.PENDING: frozenset({CopyState.GRANTED, CopyState.FAILED, CopyState.CANCELLED}),
    CopyState.GRANTED: frozenset({CopyState.RUNNING, CopyState.FAILED, CopyState.CANCELLED}),
    CopyState.RUNNING: frozenset({CopyState.WON, CopyState.LOST, CopyState.FAILED, CopyState.CANCELLED}),
    CopyState.WON: frozenset(),
    CopyState.LOST: frozenset(),
    CopyState.FAILED: frozenset(),
    CopyState.CANCELLED: frozenset(),
}



Slot = tuple[str, int]


def job_id_for(dag_id: str, run_id: str) -> str:
    """The slot pool's job of a DAG run. Airflow forbids '/' in dag ids, so the pair is unambiguous."""
    return f"{dag_id}/{run_id}"


def dag_id_of_job(job_id: str) -> str:
    """The DAG id of a `job_id_for` job."""
    return job_id.partition("/")[0]


COPY_PREFIX = "copy:"  # bulk ids of speculative copies: copy:<request id>


def bulk_id_for(ti_id: Any, try_number: int, admission: int = 1) -> str:
    """The bulk of one admission of one task instance try.

    Airflow queues the same try again after a deferral, for every reschedule-mode poke and after a
    scheduler restart; each time the try is *admitted* to the pool again under a fresh bulk id, so
    the ledger keeps one row per admission: ``<ti uuid>:<try>`` first, then ``<ti uuid>:<try>/<n>``.
    """
    base = f"{ti_id}:{int(try_number)}"
    return base if int(admission) <= 1 else f"{base}/{int(admission)}"


def try_of(bulk_id: str) -> tuple[str, int]:
    """The (task instance id, try number) `bulk_id_for` put into a task instance bulk id."""
    ti_id, _, rest = bulk_id.rpartition(":")
    number = rest.partition("/")[0]
    if not ti_id or not number.isdigit():
        raise ValueError(f"{bulk_id!r} is not a task instance bulk id (<ti uuid>:<try>[/<admission>])")
    return ti_id, int(number)


def admission_of(bulk_id: str) -> int:
    """The admission number `bulk_id_for` put into a task instance bulk id (1 for the first)."""
    _, _, suffix = bulk_id.rpartition(":")[2].partition("/")
    return int(suffix) if suffix.isdigit() else 1


@dataclass(frozen=True)
class GrantRecord:
    bulk_id: str
    dag_id: str
    run_id: str
    task_id: str
    map_index: int
    try_number: int
    job_id: str
    label: str
    requests: tuple[dict[str, Any], ...]
    state: GrantState
    host: str | None
    slots: tuple[Slot, ...]
    message: str | None
    submitted_at: float
    granted_at: float | None
    released_at: float | None
    owner: str | None = None  # the scheduler (`SchedulerRecord.scheduler_id`) that holds its workload
    # the pool version the write that returned this record made (None for reads); not part of equality
    pool_version: int | None = field(default=None, compare=False)

    @property
    def hosts(self) -> tuple[str, ...]:
        """Distinct hosts of the grant, in order of first use (`host` is the first)."""
        return tuple(dict.fromkeys(host for host, _ in self.slots))

    @property
    def is_live(self) -> bool:
        return self.state is GrantState.GRANTED


@dataclass(frozen=True)
class AttemptRecord:
    attempt_id: str
    bulk_id: str | None
    dag_id: str
    run_id: str
    task_id: str
    map_index: int
    unit_key: str
    host: str
    speculative: bool
    state: AttemptState
    started_at: float
    ended_at: float | None
    input_bytes: int | None
    message: str | None

    @property
    def duration_s(self) -> float | None:
        return None if self.ended_at is None else self.ended_at - self.started_at


@dataclass(frozen=True)
class CommitRecord:
    dag_id: str
    run_id: str
    unit_key: str
    winner_attempt: str
    committed_at: float


@dataclass(frozen=True)
class BlockRecord:
    job_id: str
    host: str
    expires_at: float
    reason: str
    added_at: float

    def remaining_s(self, now: float) -> float:
        return max(0.0, self.expires_at - now)


@dataclass(frozen=True)
class CopyRequestRecord:
    request_id: int
    dag_id: str
    run_id: str
    task_id: str
    map_index: int
    unit_key: str
    job_id: str
    label: str
    requests: tuple[dict[str, Any], ...]
    template_path: str
    py_files: tuple[str, ...]
    spark_conf: dict[str, str]
    excluded_hosts: tuple[str, ...]
    slow_attempt: str | None
    state: CopyState
    attempt_id: str | None
    host: str | None
    message: str | None
    requested_at: float
    granted_at: float | None
    started_at: float | None
    ended_at: float | None

    @property
    def bulk_id(self) -> str:
        """The copy's slot bulk in the executor's pool (and in the grants table)."""
        return f"{COPY_PREFIX}{self.request_id}"

    @property
    def is_open(self) -> bool:
        return self.state in COPY_OPEN_STATES


@dataclass(frozen=True)
class MetricRecord:
    dag_id: str
    run_id: str
    task_id: str
    name: str
    value: float
    recorded_at: float
    labels: dict[str, Any] | None


@dataclass(frozen=True)
class DecisionRecord:
    """A DAG run's decision for one adaptive region cut into several shards: the value of each adaptive
    vertex, its declared range ``(min, max)``, the shard count, why, and the bytes it was decided from."""

    dag_id: str
    run_id: str
    task_id: str
    decided: dict[str, int]
    ranges: dict[str, tuple[int, int]]
    shards: int
    reason: str
    input_bytes: int | None
    decided_at: float


@dataclass(frozen=True)
class SchedulerRecord:
    """One RegionExecutor sharing the pool: who it is and when it last said it is alive."""

    scheduler_id: str
    hostname: str
    pid: int
    airflow_job_id: int | None
    started_at: float
    heartbeat_at: float
    ended_at: float | None


@dataclass(frozen=True)
class PoolSnapshot:
    """The grant rows that make up the pool at one version: live grants, and waiting bulks oldest first."""

    version: int
    live: tuple[GrantRecord, ...]
    waiting: tuple[GrantRecord, ...]


@dataclass(frozen=True)
class TakeOver:
    """What a scheduler took over from a stopped one: its waiting rows were released (Airflow queues
    their task instances again), its live grants are now the heir's (`adopted`)."""

    stopped: str | None
    released: tuple[GrantRecord, ...]
    adopted: tuple[GrantRecord, ...]


__all__ = [
    "COPY_PREFIX", "PoolSnapshot", "SchedulerRecord", "TakeOver",
    "ATTEMPT_END_STATES", "COPY_OPEN_STATES", "COPY_TRANSITIONS", "GRANT_TRANSITIONS", "AttemptRecord",
    "AttemptState", "BlockRecord", "CommitRecord", "CopyRequestRecord", "CopyState", "DecisionRecord", "GrantRecord",
    "GrantState", "MetricRecord", "Slot", "admission_of", "bulk_id_for", "dag_id_of_job", "job_id_for",
]
