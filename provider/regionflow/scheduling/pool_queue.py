"""The slot pool's waiting queue: one FIFO of bulks across all jobs, with the indexes a pass needs.

Waiting bulks are kept three ways, all OrderedDicts or dicts keyed by bulk id (O(1) append,
removal and walk from the front):

* `pending`: every waiting bulk, oldest first (submission order) - the FIFO itself;
* `sub_queues`: the same bulks split by *signature* (for each profile of the bulk, the bitmask
  of slot classes it fits), oldest first. A pass skips a whole sub-queue whose signature has a
  profile with no budget left (see pool_pass);
* `by_shape`: by shape key, so a re-check after a host left runs once per shape.

A bulk's sequence number is its position in submission order; it never changes.
"""
from __future__ import annotations

from collections import OrderedDict

from .capacity import Demand
from .pool_bulks import Bulk


class Queued:
    """A waiting bulk with its shape, submission sequence, wait start and request positions."""

    __slots__ = ("bulk", "job_id", "demand", "sequence", "since", "positions", "signature")

    def __init__(self, bulk: Bulk, demand: Demand, sequence: int, since: float,
                 positions: tuple[tuple[int, ...], ...] | None) -> None:
        self.bulk = bulk
        self.job_id = bulk.job_id
        self.demand = demand
        self.sequence = sequence
        self.since = since
        self.positions = positions  # request positions per demand item; None for one-profile bulks
        self.signature = demand.signature  # the key of the sub-queue it sits in


class WaitingQueue:
    """The FIFO of waiting bulks, split into sub-queues by signature and indexed by shape."""

    __slots__ = ("pending", "sub_queues", "by_shape")

    def __init__(self) -> None:
        self.pending: OrderedDict[str, Queued] = OrderedDict()
        self.sub_queues: dict[tuple[int, ...], OrderedDict[str, Queued]] = {}  # by signature, oldest first
        self.by_shape: dict[object, dict[str, Queued]] = {}

    def __len__(self) -> int:
        return len(self.pending)

    def add(self, waiting: Queued) -> None:
        """Append `waiting` at the back of the queue and of its sub-queue."""
        bulk_id = waiting.bulk.bulk_id
        self.pending[bulk_id] = waiting
        queue = self.sub_queues.get(waiting.signature)
        if queue is None:
            queue = self.sub_queues[waiting.signature] = OrderedDict()
        queue[bulk_id] = waiting
        same_shape = self.by_shape.get(waiting.demand.key)
        if same_shape is None:
            same_shape = self.by_shape[waiting.demand.key] = {}
        same_shape[bulk_id] = waiting

    def remove(self, waiting: Queued) -> None:
        """Take `waiting` out of the queue (granted, cancelled or rejected)."""
        bulk_id = waiting.bulk.bulk_id
        del self.pending[bulk_id]
        queue = self.sub_queues[waiting.signature]
        del queue[bulk_id]
        if not queue:
            del self.sub_queues[waiting.signature]
        same_shape = self.by_shape[waiting.demand.key]
        del same_shape[bulk_id]
        if not same_shape:
            del self.by_shape[waiting.demand.key]

    def regroup(self) -> None:
        """Rebuild the sub-queues after the signatures changed (a new slot class): O(waiting)."""
        self.sub_queues = {}
        for bulk_id, waiting in self.pending.items():
            waiting.signature = waiting.demand.signature
            self.sub_queues.setdefault(waiting.signature, OrderedDict())[bulk_id] = waiting


__all__ = ["Queued", "WaitingQueue"]
