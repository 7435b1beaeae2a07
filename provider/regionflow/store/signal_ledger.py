"""The store's blocklist entries and speculation metrics (a part of `RegionflowStore`, see `base.py`)."""
from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from sqlalchemy import delete, func, or_, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import aliased

from ..scheduling.blocklist import EVERY_JOB
from .base import LedgerBase, filtered, once_more_on
from .models import BlockRow, Metric
from .records import BlockRecord, MetricRecord
from .retry import retried

if TYPE_CHECKING:
    from sqlalchemy import CursorResult  # what session.execute() returns for a DELETE (typed as Result)


class SignalLedger(LedgerBase):
    """(job, host) blocklist entries that only ever extend, and named time series of region tasks."""

    # ----------------------------------------------------------------------------- blocklist

    @retried
    def block(self, job_id: str, host: str, expires_at: float, reason: str = "") -> BlockRecord:
        """Block `host` for `job_id` until `expires_at` (epoch s); a later existing expiry wins."""

        def upsert() -> BlockRecord:
            with self._write() as session:
                row = session.get(BlockRow, (job_id, host), with_for_update=True)
                if row is None:
                    row = BlockRow(job_id=job_id, host=host, expires_at=float(expires_at), reason=reason,
                                     added_at=self._clock())
                    session.add(row)
                elif row.expires_at < expires_at:
                    row.expires_at = float(expires_at)
                    row.reason = reason
                return _block_record(row)

        return once_more_on(upsert, IntegrityError)

    @retried
    def unblock(self, job_id: str, host: str, *, expires_at: float | None = None) -> bool:
        """Lift an entry before it expires; True when there was one. With `expires_at`, only while the
        entry still has that expiry: one extended meanwhile (a new loss of the host, say) stays."""
        condition = [BlockRow.job_id == job_id, BlockRow.host == host]
        if expires_at is not None:
            condition.append(BlockRow.expires_at == float(expires_at))
        with self._write() as session:
            result = cast("CursorResult[Any]", session.execute(delete(BlockRow).where(*condition)))
            return result.rowcount > 0

    @retried
    def active_blocks(self, now: float | None = None, *, job_id: str | None = None) -> list[BlockRecord]:
        """Entries not yet expired at `now` (default: the store's clock), soonest expiry first. With
        `job_id`: the entries that block hosts for that job, its own and those for `EVERY_JOB`."""
        moment = self._clock() if now is None else now
        query = select(BlockRow).where(BlockRow.expires_at > moment)
        if job_id is not None:
            query = query.where(BlockRow.job_id.in_((job_id, EVERY_JOB)))
        query = query.order_by(BlockRow.expires_at, BlockRow.job_id, BlockRow.host)
        with self._read() as session:
            return [_block_record(row) for row in session.scalars(query)]

    @retried
    def blocks(self, job_id: str) -> list[BlockRecord]:
        """Every entry of `job_id`, of its speculative copies' jobs (``<job_id>#copy:<id>``: the hosts a copy
        avoids) and of `EVERY_JOB`, expired ones included, oldest added first."""
        query = select(BlockRow).where(or_(BlockRow.job_id.in_((job_id, EVERY_JOB)),
                                           BlockRow.job_id.startswith(f"{job_id}#", autoescape=True)))
        with self._read() as session:
            rows = session.scalars(query.order_by(BlockRow.added_at, BlockRow.job_id, BlockRow.host))
            return [_block_record(row) for row in rows]

    @retried
    def purge_expired(self, now: float | None = None) -> int:
        """Delete entries expired at `now`; returns how many."""
        moment = self._clock() if now is None else now
        with self._write() as session:
            result = cast("CursorResult[Any]", session.execute(
                delete(BlockRow).where(BlockRow.expires_at <= moment)))
            return result.rowcount

    # ----------------------------------------------------------------------------- metrics

    @retried
    def record_metric(self, dag_id: str, run_id: str, task_id: str, name: str, value: float, *,
                      labels: Mapping[str, Any] | None = None, recorded_at: float | None = None) -> MetricRecord:
        row = self._metric_row(dag_id, run_id, task_id, name, value, labels, recorded_at)
        with self._write() as session:
            session.add(row)
            return _metric_record(row)

    @retried
    def record_metrics(self, dag_id: str, run_id: str, task_id: str, values: Mapping[str, float], *,
                       labels: Mapping[str, Any] | None = None, recorded_at: float | None = None) -> int:
        """Several named values of one task at one moment, in one transaction; returns how many."""
        moment = self._clock() if recorded_at is None else recorded_at
        rows = [self._metric_row(dag_id, run_id, task_id, name, value, labels, moment)
                for name, value in values.items()]
        with self._write() as session:
            session.add_all(rows)
        return len(rows)

    @retried
    def metrics(self, dag_id: str, run_id: str, task_id: str | None = None,
                name: str | None = None) -> list[MetricRecord]:
        """Samples in time order (ties in insertion order)."""
        query = filtered(select(Metric), Metric, dag_id=dag_id, run_id=run_id, task_id=task_id, name=name)
        with self._read() as session:
            rows = session.scalars(query.order_by(Metric.recorded_at, Metric.id))
            return [_metric_record(row) for row in rows]

    @retried
    def latest_metrics(self, dag_id: str, run_id: str) -> dict[tuple[str, str], MetricRecord]:
        """The newest sample of each (task_id, name) series of a DAG run."""
        rank = func.row_number().over(partition_by=(Metric.task_id, Metric.name),
                                      order_by=(Metric.recorded_at.desc(), Metric.id.desc()))
        ranked = select(Metric, rank.label("rank")).where(Metric.dag_id == dag_id, Metric.run_id == run_id)
        ranked_rows = ranked.subquery()
        newest = aliased(Metric, ranked_rows)
        with self._read() as session:
            rows = session.scalars(select(newest).where(ranked_rows.c.rank == 1))
            return {(row.task_id, row.name): _metric_record(row) for row in rows}

    def _metric_row(self, dag_id: str, run_id: str, task_id: str, name: str, value: float,
                    labels: Mapping[str, Any] | None, recorded_at: float | None) -> Metric:
        return Metric(dag_id=dag_id, run_id=run_id, task_id=task_id, name=name, value=float(value),
                      recorded_at=self._clock() if recorded_at is None else float(recorded_at),
                      labels=None if labels is None else dict(labels))


def _block_record(row: BlockRow) -> BlockRecord:
    return BlockRecord(job_id=row.job_id, host=row.host, expires_at=row.expires_at, reason=row.reason,
                       added_at=row.added_at)


def _metric_record(row: Metric) -> MetricRecord:
    return MetricRecord(dag_id=row.dag_id, run_id=row.run_id, task_id=row.task_id, name=row.name,
                        value=row.value, recorded_at=row.recorded_at,
                        labels=None if row.labels is None else dict(row.labels))


__all__ = ["SignalLedger"]
