"""Elastic requests: a region whose adaptive vertices may run at fewer subtasks (`core.adaptive`) also
lists smaller slot requests, largest first. When its full request cannot be served, it may start
with the largest smaller one the free slots hold, and decide its parallelism from that grant (Flink's
adaptive scheduler: run with the resources there are, never below min).

Never ahead of another waiting bulk (FIFO holds), and never smaller than it could be: a full request
the free slots hold is always served whole. `regionflow run` asks when it submits a region
(`elastic_bulk`: its releases are seen before its next submissions); the RegionExecutor asks about a
region that has waited ``[regionflow] elastic_wait`` seconds (`smaller_now`), because Airflow queues
a downstream task before the executor has read the end of the upstream one, whose slots would look
taken for a moment. Pure: queries on the pool, no state of its own.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from ..core.resources import ResourceProfile
from .pool import SlotPool
from .pool_bulks import Bulk


def elastic_bulk(pool: SlotPool, bulk: Bulk, smaller: Sequence[Sequence[ResourceProfile]]) -> Bulk:
    """The bulk to submit: `bulk`, or the same bulk with the largest of the `smaller` requests that
    `pool` would grant at once, when it would not grant `bulk` itself at once."""
    if not smaller or pool.grantable_now(bulk):
        return bulk
    return _largest_free(pool, bulk, smaller, None) or bulk


def smaller_now(pool: SlotPool, waiting: Bulk, smaller: Sequence[Sequence[ResourceProfile]]) -> Bulk | None:
    """For a bulk waiting in `pool`: the same bulk with the largest of the `smaller` requests the pool
    would grant at once were `waiting` withdrawn, or None (another bulk waits, or none fits)."""
    return _largest_free(pool, waiting, smaller, waiting.bulk_id)


def _largest_free(pool: SlotPool, bulk: Bulk, smaller: Sequence[Sequence[ResourceProfile]],
                  ignoring: str | None) -> Bulk | None:
    for requests in smaller:  # each smaller than the full request (`UnitLayout.smaller_requests`)
        candidate = dataclasses.replace(bulk, requests=tuple(requests))
        if pool.grantable_now(candidate, ignoring):
            return candidate
    return None


__all__ = ["elastic_bulk", "smaller_now"]
