"""`StoreRecorder`: an attempt's start and end as rows of regionflow's store (the attempt lifecycle's
`AttemptRecorder` for attempts of Airflow task instances: originals and speculative copies)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .ledger import RegionflowStore

if TYPE_CHECKING:
    from ..spark.launch.attempt import Attempt, AttemptOutcome

MESSAGE_LIMIT = 2000


@dataclass(frozen=True)
class StoreRecorder:
    """Records attempts of one shard (dag, run, task, map index) in `store`."""

    store: RegionflowStore
    dag_id: str
    run_id: str
    task_id: str
    map_index: int
    bulk_id: str | None = None
    speculative: bool = False

    def started(self, attempt: Attempt) -> None:
        """The attempt runs on its host."""
        self.store.start_attempt(attempt_id=attempt.attempt_id, bulk_id=self.bulk_id, dag_id=self.dag_id,
                                 run_id=self.run_id, task_id=self.task_id, map_index=self.map_index,
                                 unit_key=attempt.task.unit_key, host=attempt.host.name,
                                 speculative=self.speculative, input_bytes=attempt.task.input_bytes)

    def ended(self, attempt: Attempt, outcome: AttemptOutcome) -> None:
        """The attempt ended as `outcome.state`, with its failure text (cut to the column's size)."""
        message = None if outcome.failure is None else outcome.failure[:MESSAGE_LIMIT]
        self.store.end_attempt(attempt.attempt_id, outcome.state.value, message)


__all__ = ["StoreRecorder"]
