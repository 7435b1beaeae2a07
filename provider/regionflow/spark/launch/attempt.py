"""One attempt lifecycle: the one way a unit attempt starts, runs, is cancelled, loses its host,
settles and is recorded, whoever runs it (the RegionOperator, a speculative copy in the executor,
`regionflow run`) and whichever backend executes it.

Its states and moves are `core.attempts` (CREATED -> RUNNING -> SUCCEEDED | LOST_COMMIT | KILLED |
FAILED, or an end state straight from CREATED when it never started): cancel before the start is
KILLED, a host that cannot run it is FAILED with the host-lost reason, and after the run `settle()`
decides from the committed manifest, the one source of truth (another attempt's commit is
LOST_COMMIT, whatever this one's own exit).

A `Backend` turns (unit task, host, slots) into an `Execution` (``run() -> SubmissionResult`` in
the calling thread, ``kill()`` from any thread, ``master`` and ``server_url`` for the host watch);
its two implementations are in `backends`: ``submit`` (a spark-submit per attempt) and ``session`` (a
client session on the host's long-lived Spark Connect server). Every attempt runs under a
`CommitWatcher` (another attempt's commit kills it) and a `HostWatcher` (a silent standalone master or
Spark Connect server is a lost host), and, given `parent_pid`, a `ParentWatcher` (an attempt whose
process lost that parent, its supervisor, is killed). An `AttemptRecorder` (regionflow's store, for Airflow runs)
sees the start and the end.
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from ...core.attempts import AttemptState, check_attempt_move
from ...core.errors import RegionflowError
from ...scheduling.hosts import Host
from ..data.store import CommittedUnit, PartitionStore
from ..data.task import UnitTask
from .submit import SubmissionResult
from .watch import (
    DEFAULT_HOST_LOST_TIMEOUT_S,
    DEFAULT_WATCH_INTERVAL_S,
    CommitWatcher,
    HostWatcher,
    ParentWatcher,
    Settlement,
    explain,
    settle,
)


class HostLost(RegionflowError):
    """The attempt's host cannot run it (its Spark Connect server does not answer, ...)."""


class Execution(Protocol):
    """A backend's run of one attempt, prepared but not started."""

    @property
    def master(self) -> str | None:
        """The Spark master to watch for a lost host (``spark://``), or None."""

    @property
    def server_url(self) -> str | None:
        """The Spark Connect server (``sc://``) the run needs on its host, to watch likewise, or None."""

    def run(self) -> SubmissionResult:
        """Run to the end in the calling thread; never raises for a failed or killed run."""

    def kill(self, *, wait: bool = True, timeout: float = 60.0) -> None:
        """Stop the run from any thread; with `wait`, until `run()` returned."""

    def master_lost(self) -> None:
        """Its `master` went silent under it (the host watch kills it next): drop whatever holds an
        application of that master beyond this run."""


class Backend(Protocol):
    """Runs unit attempts: ``submit`` or ``session`` (see `backends`)."""

    name: str

    def prepare(self, task: UnitTask, task_path: str, host: Host, slots: int,
                on_line: Callable[[str], None] | None) -> Execution:
        """The attempt's execution; raises `HostLost` when `host` cannot run it now."""


class AttemptRecorder(Protocol):
    """Sees an attempt start and end (regionflow's store, for the Airflow UI and the sensor)."""

    def started(self, attempt: Attempt) -> None: ...

    def ended(self, attempt: Attempt, outcome: AttemptOutcome) -> None: ...


@dataclass(frozen=True)
class AttemptOutcome:
    """How an attempt ended."""

    state: AttemptState
    settlement: Settlement
    result: SubmissionResult | None
    failure: str | None = None  # why it did not succeed (host lost first), None when it succeeded
    host_lost: str | None = None  # set when the attempt ended because its host was lost

    @property
    def unit_done(self) -> bool:
        """Some attempt of the unit (this one or another) committed it."""
        return self.settlement.unit_done

    @property
    def winner(self) -> CommittedUnit | None:
        return self.settlement.winner

    @property
    def winner_attempt(self) -> str | None:
        return self.settlement.winner_attempt

    @property
    def winner_host(self) -> str:
        return self.settlement.winner_host

    @property
    def reason(self) -> str:
        """One line on why the attempt did not succeed: the lost host first, then the region program's
        own error line, then what the backend says."""
        if self.host_lost:
            return self.host_lost
        if self.result is None:
            return self.failure or self.state.value
        return result_reason(self.result)


PROGRAM_ERROR_MARK = "regionflow: error:"


def result_reason(result: SubmissionResult) -> str:
    """One line on why a run failed: the region program's error line when it printed one, else the
    backend's error, a kill, or the exit code with the output's last lines."""
    lines = [line for line in result.log_tail if PROGRAM_ERROR_MARK in line]
    if lines:
        return lines[-1].split(PROGRAM_ERROR_MARK, 1)[1].strip()
    if result.error:
        return result.error
    if result.killed:
        return "the Spark application was killed"
    tail = [line for line in result.log_tail if line.strip()][-3:]
    return f"{result.exit_text}: " + " | ".join(tail)


class Attempt:
    """One attempt of a unit on a host with `slots` slots, run by `backend`. ``run()`` blocks;
    ``cancel()`` may be called from any thread, before or during the run."""

    def __init__(self, task: UnitTask, task_path: str, host: Host, slots: int, backend: Backend,
                 partitions: PartitionStore, *, recorder: AttemptRecorder | None = None,
                 on_line: Callable[[str], None] | None = None, watch_interval: float = DEFAULT_WATCH_INTERVAL_S,
                 host_lost_timeout: float = DEFAULT_HOST_LOST_TIMEOUT_S, parent_pid: int | None = None) -> None:
        if not task.attempt_id:
            raise RegionflowError(f"unit {task.unit_name}: an attempt needs an attempt id in its unit task")
        self.task = task
        self.task_path = task_path
        self.host = host
        self.slots = slots
        self.backend = backend
        self.partitions = partitions
        self.recorder = recorder
        self.on_line = on_line
        self.watch_interval = watch_interval
        self.host_lost_timeout = host_lost_timeout
        self.parent_pid = parent_pid  # given: the attempt is killed once this process loses that parent
        self._lock = threading.Lock()
        self._state = AttemptState.CREATED
        self._cancelled = False
        self._execution: Execution | None = None
        self._ended = threading.Event()
        self.outcome: AttemptOutcome | None = None

    @property
    def attempt_id(self) -> str:
        return self.task.attempt_id

    @property
    def state(self) -> AttemptState:
        return self._state

    def run(self) -> AttemptOutcome:
        """Start the attempt, wait for its end, settle it against the unit's commit and record it."""
        if self._cancelled:
            return self._end_unstarted(AttemptState.KILLED, "cancelled before it started")
        try:
            execution = self.backend.prepare(self.task, self.task_path, self.host, self.slots, self.on_line)
        except HostLost as down:
            return self._end_unstarted(AttemptState.FAILED, str(down), host_lost=str(down))
        with self._lock:
            if self._cancelled:
                cancelled = True
            else:
                cancelled = False
                self._execution = execution
                self._move(AttemptState.RUNNING)
        if cancelled:
            return self._end_unstarted(AttemptState.KILLED, "cancelled before it started")
        if self.recorder is not None:
            self.recorder.started(self)
        with CommitWatcher(self.partitions, self.task.unit_key, self.attempt_id, execution, self.watch_interval), \
                HostWatcher(execution.master, execution, self.host_lost_timeout,
                            server_url=execution.server_url, host=self.host.name) as host_watch, \
                ParentWatcher(self.parent_pid, execution, self.watch_interval) as parent_watch:
            result = execution.run()
        settlement = settle(result, self.partitions, self.task.unit_key, self.attempt_id)
        failure = None if result.ok else explain(result, host_watch, parent_watch)
        lost = host_watch.lost or (result.error if getattr(result, "host_lost", False) else None)
        return self._end(AttemptOutcome(settlement.state, settlement, result, failure, lost))

    def cancel(self, *, wait: bool = False, timeout: float = 60.0) -> None:
        """Kill the attempt (it ends as killed, or lost_commit if another attempt committed); with
        `wait`, until a running attempt has ended (an attempt not started yet ends when it runs)."""
        with self._lock:
            self._cancelled = True
            execution = self._execution
        if execution is not None:
            execution.kill(wait=False)
            if wait:
                self._ended.wait(timeout)

    def _end_unstarted(self, state: AttemptState, failure: str, host_lost: str | None = None) -> AttemptOutcome:
        committed = self.partitions.committed(self.task.unit_key)
        settlement = (Settlement(AttemptState.LOST_COMMIT, committed) if committed is not None
                      else Settlement(state, None))
        return self._end(AttemptOutcome(settlement.state, settlement, None, failure, host_lost),
                         started=False)

    def _end(self, outcome: AttemptOutcome, started: bool = True) -> AttemptOutcome:
        with self._lock:
            self._move(outcome.state)
            self.outcome = outcome
            self._execution = None
        self._ended.set()
        if started and self.recorder is not None:
            self.recorder.ended(self, outcome)
        return outcome

    def _move(self, target: AttemptState) -> None:
        check_attempt_move(self.attempt_id, self.task.unit_name, self._state, target)
        self._state = target


__all__ = ["Attempt", "AttemptOutcome", "AttemptRecorder", "AttemptState", "Backend", "Execution", "HostLost",
           "PROGRAM_ERROR_MARK", "result_reason"]
