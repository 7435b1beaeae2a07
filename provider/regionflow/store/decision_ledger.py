"""The store's copy of each DAG run's per-run decisions (a part of `RegionflowStore`, see `base.py`).

The run's partition store holds the decision its tasks act on (`spark.data.store.PartitionStore.record_decision`,
the first one wins); the decision task copies what was recorded here, so that ``regionflow status`` and the
UI's plan of a run, which read regionflow's store and not the run's data, show the planned range beside the
decided value. The copy follows the same rule: the first row of a (DAG, run, region task) stays.
"""
from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from .base import LedgerBase, filtered, once_more_on
from .models import DecisionRow
from .records import DecisionRecord
from .retry import retried


class DecisionLedger(LedgerBase):
    """Per DAG run, the decision of each adaptive region decided per run, first one kept."""

    @retried
    def record_decision(self, dag_id: str, run_id: str, task_id: str, decided: Mapping[str, int],
                        ranges: Mapping[str, tuple[int, int]], shards: int, reason: str,
                        input_bytes: int | None) -> DecisionRecord:
        """Keep the decision of region task `task_id` in the run unless one is kept already; returns the kept one."""

        def insert() -> DecisionRecord:
            with self._write() as session:
                row = session.get(DecisionRow, (dag_id, run_id, task_id))
                if row is None:
                    row = DecisionRow(dag_id=dag_id, run_id=run_id, task_id=task_id,
                                      decided={k: int(v) for k, v in decided.items()},
                                      ranges={k: [int(lo), int(hi)] for k, (lo, hi) in ranges.items()},
                                      shards=int(shards), reason=reason,
                                      input_bytes=None if input_bytes is None else int(input_bytes),
                                      decided_at=self._clock())
                    session.add(row)
                return _decision_record(row)

        return once_more_on(insert, IntegrityError)

    @retried
    def decisions(self, dag_id: str, run_id: str, task_id: str | None = None) -> dict[str, DecisionRecord]:
        """``{region task id: decision}`` of one DAG run."""
        query = filtered(select(DecisionRow), DecisionRow, dag_id=dag_id, run_id=run_id, task_id=task_id)
        with self._read() as session:
            return {row.task_id: _decision_record(row) for row in session.scalars(query)}


def _decision_record(row: DecisionRow) -> DecisionRecord:
    return DecisionRecord(dag_id=row.dag_id, run_id=row.run_id, task_id=row.task_id, decided=dict(row.decided),
                          ranges={k: (int(lo), int(hi)) for k, (lo, hi) in row.ranges.items()}, shards=row.shards,
                          reason=row.reason, input_bytes=row.input_bytes, decided_at=row.decided_at)


__all__ = ["DecisionLedger"]
