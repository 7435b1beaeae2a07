"""Attempts whose process died while they ran: their Spark work stopped, their record settled.

A region task's process records its attempt as running, runs it and records how it ended. Killed
without warning (kill -9, the OOM killer, a lost worker), it records nothing: the store would show the
attempt running for ever (speculation and the UI would count it as live), and its Spark work goes on
(see `regionflow.spark.launch.orphans`). The same holds for a speculative copy, a thread of a scheduler that
stopped. `Leftovers.end` is the one way such an attempt ends: its Spark work is stopped through the
backend's `OrphanStopper` and the attempt is recorded as killed, with the reason and what was found.

`Leftovers.settle` applies it when Airflow reports a try ended, before its slots go back to the pool,
to each attempt of that grant still recorded as running. A task process that ends normally has settled
its attempts before Airflow sees the try end, so that costs two indexed store reads per ended try and
does nothing else. `CopyRunner.take_over` applies it to the running copy of a stopped scheduler.
"""
from __future__ import annotations

from typing import Any

from ..core.attempts import AttemptState
from ..spark.launch.orphans import OrphanStopper
from ..store import AttemptRecord, RegionflowStore

TASK_PROCESS_ENDED = "its task process ended without recording how the attempt ended (killed?)"


class Leftovers:
    """Stops and settles attempts whose process died while they were recorded as running."""

    def __init__(self, store: RegionflowStore, stopper: OrphanStopper, log: Any) -> None:
        self.store = store
        self.stopper = stopper
        self.log = log

    def end(self, attempt: AttemptRecord, why: str) -> str:
        """Stop `attempt`'s Spark work and record it as killed with `why` and what the stop found (also
        when the stop fails: the record is settled either way). Returns the recorded message."""
        try:
            stopped = self.stopper.stop(attempt.attempt_id, attempt.host)
        except Exception as error:  # noqa: BLE001 - the record is settled even when the stop fails
            stopped = f"its Spark work could not be stopped: {type(error).__name__}: {error}"
        message = f"{why}; {stopped}"[:2000]
        self.store.end_attempt(attempt.attempt_id, AttemptState.KILLED, message)
        self.log.warning("RegionExecutor: attempt %s of %s ended as killed: %s", attempt.attempt_id,
                         attempt.unit_key, message)
        return message

    def settle(self, bulk_id: str) -> list[str]:
        """The try holding grant `bulk_id` ended: `end` each of its attempts still recorded as running.
        Returns their ids. (The executor event's state says little here: a LocalExecutor worker reports
        success for a task process that was killed; the task instance's own state is failed.)"""
        grant = self.store.grant_for(bulk_id)
        if grant is None:
            return []
        left = [attempt for attempt in self.store.attempts(grant.dag_id, grant.run_id, grant.task_id)
                if attempt.bulk_id == bulk_id and attempt.state is AttemptState.RUNNING]
        for attempt in left:
            self.end(attempt, TASK_PROCESS_ENDED)
        return [attempt.attempt_id for attempt in left]


__all__ = ["Leftovers", "TASK_PROCESS_ENDED"]
