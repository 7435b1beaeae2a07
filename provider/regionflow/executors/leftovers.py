"""Attempts a task process left running when it died: settled in the store, their Spark work stopped.

A region task's process records its attempt as running, runs it and records how it ended. Killed
without warning (kill -9, the OOM killer, a lost worker), it records nothing: the store would show the
attempt running for ever (speculation and the UI would count it as live), and its Spark work goes on
(see `regionflow.spark.orphans`). Airflow reports the try ended; before its slots go back to the pool,
`Leftovers.settle` ends each attempt of that grant still recorded as running: its Spark work is stopped
through the backend's `OrphanStopper` and the attempt is recorded as killed, with what was found.

A task process that ends normally has settled its attempts before Airflow sees the try end, so this
costs one store read per ended try and does nothing else.
"""
from __future__ import annotations

from typing import Any

from ..core.attempts import AttemptState
from ..spark.orphans import OrphanStopper
from ..store import RegionflowStore


class Leftovers:
    """Settles the attempts of ended tries that are still recorded as running."""

    def __init__(self, store: RegionflowStore, stopper: OrphanStopper, log: Any) -> None:
        self.store = store
        self.stopper = stopper
        self.log = log

    def settle(self, bulk_id: str) -> list[str]:
        """The try holding grant `bulk_id` ended: stop and record as killed each of its attempts still
        recorded as running. Returns their ids. (The executor event's state says little here: a
        LocalExecutor worker reports success for a task process that was killed; the task instance's
        own state is failed.)"""
        grant = self.store.grant_for(bulk_id)
        if grant is None:
            return []
        settled = []
        for attempt in self.store.attempts(grant.dag_id, grant.run_id, grant.task_id):
            if attempt.bulk_id != bulk_id or attempt.state is not AttemptState.RUNNING:
                continue
            try:
                stopped = self.stopper.stop(attempt.attempt_id, attempt.host)
            except Exception as error:  # noqa: BLE001 - the record is settled even when the stop fails
                stopped = f"its Spark work could not be stopped: {type(error).__name__}: {error}"
            message = f"its task process ended without recording how the attempt ended (killed?); {stopped}"
            self.store.end_attempt(attempt.attempt_id, AttemptState.KILLED, message[:2000])
            self.log.warning("RegionExecutor: attempt %s of %s was still recorded as running: %s",
                             attempt.attempt_id, attempt.unit_key, message)
            settled.append(attempt.attempt_id)
        return settled


__all__ = ["Leftovers"]
