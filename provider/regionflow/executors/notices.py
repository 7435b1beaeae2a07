"""FLIP-138's not-enough-resources notice, for the DAG runs that wait past ``[regionflow]
resource_wait_timeout``: once per run and per change of what it waits for, in the scheduler's log and
in the log of its oldest waiting task, counted in the pool's metrics. A run that no longer starves is
forgotten, so a later starvation is told again.
"""
from __future__ import annotations

from typing import Any

from ..scheduling.pool import SlotPool
from ..scheduling.requirements import describe_counts
from .admission import AdmissionGate
from .guest import append_task_log
from .metrics import PoolMetrics


class StarvationNotices:
    """Tells the runs the pool finds waiting too long (`SlotPool.overdue_jobs`), each once per need."""

    def __init__(self, pool: SlotPool, gate: AdmissionGate, metrics: PoolMetrics, log: Any) -> None:
        self.pool, self.gate, self.metrics, self.log = pool, gate, metrics, log
        self.told: dict[str, str] = {}  # run (job id) -> what it waited for when last told

    def tell(self) -> None:
        """Every sync: tell the runs that starve now, unless told already what they wait for."""
        told: dict[str, str] = {}
        new = 0
        for notice in self.pool.overdue_jobs():
            need = describe_counts(notice.outstanding)
            told[notice.job_id] = need
            if self.told.get(notice.job_id) == need:
                continue
            new += 1
            self.log.warning("RegionExecutor: not enough resources: %s", notice.message)
            held = self.gate.held.get(notice.oldest_bulk_id)  # None for a speculative copy
            if held is not None:
                append_task_log(held.workload, f"regionflow: not enough resources: {notice.message}", level="warning",
                                last=False)
        self.told = told
        self.metrics.starving(len(told), new)


__all__ = ["StarvationNotices"]
