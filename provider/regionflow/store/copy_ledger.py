"""The store's speculative copy requests (a part of `RegionflowStore`, see `base.py`)."""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import Select, select

from .base import LedgerBase, filtered
from .errors import StateTransitionError, UnknownRecordError
from .grant_rows import plain_request
from .models import CopyRequest
from .records import COPY_OPEN_STATES, COPY_TRANSITIONS, CopyRequestRecord, CopyState, job_id_for
from .retry import retried


class CopyLedger(LedgerBase):
    """Copy requests from the speculation sensor to the executor, and their states."""

    # ----------------------------------------------------------------------------- copy requests

    @retried
    def request_copy(self, *, dag_id: str, run_id: str, task_id: str, map_index: int, unit_key: str,
                     label: str, requests: Sequence[Mapping[str, Any]], template_path: str,
                     py_files: Sequence[str] = (), spark_conf: Mapping[str, str] | None = None,
                     excluded_hosts: Iterable[str] = (), slow_attempt: str | None = None,
                     job_id: str | None = None) -> CopyRequestRecord | None:
        """Ask for one speculative copy of a shard; None (nothing written) when the shard already has
        an open (pending, granted or running) copy request, so two sensor pokes never ask twice."""
        with self._write() as session:
            if session.scalar(_open_copies_query(dag_id, run_id, task_id, map_index).with_for_update()) is not None:
                return None
            row = CopyRequest(
                dag_id=dag_id, run_id=run_id, task_id=task_id, map_index=int(map_index), unit_key=unit_key,
                job_id=job_id or job_id_for(dag_id, run_id), label=label,
                requests=[plain_request(request) for request in requests], template_path=template_path,
                py_files=list(py_files), spark_conf=dict(spark_conf or {}),
                excluded_hosts=sorted(set(excluded_hosts)), slow_attempt=slow_attempt,
                state=CopyState.PENDING.value, attempt_id=None, host=None, message=None,
                requested_at=self._clock(), granted_at=None, started_at=None, ended_at=None,
            )
            session.add(row)
            session.flush()
            return _copy_record(row)

    @retried
    def copy_request(self, request_id: int) -> CopyRequestRecord | None:
        with self._read() as session:
            row = session.get(CopyRequest, int(request_id))
            return None if row is None else _copy_record(row)

    @retried
    def pending_copy_requests(self) -> list[CopyRequestRecord]:
        """Copy requests no executor has taken yet, oldest first (the executor's FIFO order)."""
        query = select(CopyRequest).where(CopyRequest.state == CopyState.PENDING.value).order_by(CopyRequest.id)
        with self._read() as session:
            return [_copy_record(row) for row in session.scalars(query)]

    @retried
    def copy_requests(self, dag_id: str, run_id: str, task_id: str | None = None,
                      map_index: int | None = None) -> list[CopyRequestRecord]:
        query = filtered(select(CopyRequest), CopyRequest, dag_id=dag_id, run_id=run_id, task_id=task_id,
                          map_index=map_index)
        with self._read() as session:
            return [_copy_record(row) for row in session.scalars(query.order_by(CopyRequest.id))]

    @retried
    def mark_copy(self, request_id: int, state: str, *, attempt_id: str | None = None, host: str | None = None,
                  message: str | None = None) -> CopyRequestRecord:
        """Move a copy request on (see COPY_TRANSITIONS); stamps granted_at, started_at or ended_at."""
        target = CopyState(state)
        with self._write() as session:
            row = session.get(CopyRequest, int(request_id), with_for_update=True)
            if row is None:
                raise UnknownRecordError(f"no copy request {request_id} in regionflow's store")
            current = CopyState(row.state)
            if target not in COPY_TRANSITIONS[current]:
                allowed = ", ".join(sorted(COPY_TRANSITIONS[current])) or "none (final state)"
                raise StateTransitionError(
                    f"copy request {request_id} ({row.task_id}[{row.map_index}]) cannot go from {current.value} "
                    f"to {target.value}; from {current.value} it may go to: {allowed}")
            now = self._clock()
            row.state = target.value
            if attempt_id is not None:
                row.attempt_id = attempt_id
            if host is not None:
                row.host = host
            if message is not None:
                row.message = message
            if target is CopyState.GRANTED:
                row.granted_at = now
            elif target is CopyState.RUNNING:
                row.started_at = now
            elif target not in COPY_OPEN_STATES:
                row.ended_at = now
            return _copy_record(row)

    @retried
    def cancel_copies(self, dag_id: str, run_id: str, task_id: str, map_index: int,
                      message: str = "the shard finished first") -> list[CopyRequestRecord]:
        """Cancel the shard's copy requests that have not started running (pending or granted)."""
        with self._write() as session:
            rows = session.scalars(_open_copies_query(dag_id, run_id, task_id, map_index).where(
                CopyRequest.state != CopyState.RUNNING.value).with_for_update()).all()
            for row in rows:
                row.state = CopyState.CANCELLED.value
                row.message = message
                row.ended_at = self._clock()
            return [_copy_record(row) for row in rows]


def _open_copies_query(dag_id: str, run_id: str, task_id: str, map_index: int) -> Select[tuple[CopyRequest]]:
    return select(CopyRequest).where(
        CopyRequest.dag_id == dag_id, CopyRequest.run_id == run_id, CopyRequest.task_id == task_id,
        CopyRequest.map_index == int(map_index),
        CopyRequest.state.in_([state.value for state in COPY_OPEN_STATES])).order_by(CopyRequest.id)


def _copy_record(row: CopyRequest) -> CopyRequestRecord:
    return CopyRequestRecord(
        request_id=row.id, dag_id=row.dag_id, run_id=row.run_id, task_id=row.task_id, map_index=row.map_index,
        unit_key=row.unit_key, job_id=row.job_id, label=row.label,
        requests=tuple(dict(request) for request in row.requests), template_path=row.template_path,
        py_files=tuple(row.py_files), spark_conf=dict(row.spark_conf), excluded_hosts=tuple(row.excluded_hosts),
        slow_attempt=row.slow_attempt, state=CopyState(row.state), attempt_id=row.attempt_id, host=row.host,
        message=row.message, requested_at=row.requested_at, granted_at=row.granted_at,
        started_at=row.started_at, ended_at=row.ended_at,
    )


__all__ = ["CopyLedger"]
