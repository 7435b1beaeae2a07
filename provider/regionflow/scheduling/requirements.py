"""Declared requirements per job (FLIP-138's view of the slot pool) and not-enough-resources notices.

Instead of a list of individual slot requests, each job (a DAG run) has a declaration: how many
slots of each resource profile it still waits for (`outstanding`) and how many it holds
(`acquired`). The slot pool keeps this ledger current as bulks arrive, are granted, cancelled,
rejected, released or lost, in O(1) per event (see `Shape`).

A job whose oldest waiting bulk has waited longer than the start-up grace period
(``resource_wait_timeout``) gets a `ResourceNotice` instead of waiting silently; what to do
with it (warn, fail the run, lower parallelism) is the caller's decision.
"""
from __future__ import annotations

import functools
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

from ..core.resources import ResourceProfile


class Shape(Protocol):
    """What the ledger counts: one object per bulk shape, shared by all bulks of that shape.

    `items` are the shape's (profile, count) pairs. Counting shapes by identity instead of
    profiles by value keeps every update to a couple of dict operations; the per-profile views
    are summed up when asked for, in O(shapes of the job).
    """

    items: tuple[tuple[ResourceProfile, int], ...]


@dataclass(frozen=True, eq=False)
class ResourceNotice:
    """A job has waited longer than the grace period for slots it declared."""

    job_id: str
    waiting_s: float
    oldest_bulk_id: str
    oldest_label: str
    outstanding: dict[ResourceProfile, int]
    acquired: dict[ResourceProfile, int]
    message: str


class WaitingBulk(NamedTuple):
    bulk_id: str
    label: str
    since: float


# WaitingBulk((bulk_id, label, since)) without the NamedTuple's Python-level __new__ (once per submit)
_new_waiting_bulk = functools.partial(tuple.__new__, WaitingBulk)


@dataclass(eq=False)
class _JobBook:
    outstanding: dict[Shape, int] = field(default_factory=dict)  # shape -> waiting bulks of that shape
    acquired: dict[Shape, int] = field(default_factory=dict)  # shape -> granted bulks of that shape
    waiting: OrderedDict[str, WaitingBulk] = field(default_factory=OrderedDict)


class RequirementLedger:
    """Outstanding and acquired slots per job, plus each job's waiting bulks oldest first."""

    def __init__(self) -> None:
        self._books: dict[str, _JobBook] = {}

    def bulk_waiting(self, job_id: str, bulk_id: str, label: str, since: float, shape: Shape) -> None:
        book = self._books.get(job_id)
        if book is None:
            book = self._books[job_id] = _JobBook()
        book.waiting[bulk_id] = _new_waiting_bulk((bulk_id, label, since))
        book.outstanding[shape] = book.outstanding.get(shape, 0) + 1

    def bulk_granted(self, job_id: str, bulk_id: str, shape: Shape) -> None:
        book = self._books[job_id]
        del book.waiting[bulk_id]
        _decrement(book.outstanding, shape)
        book.acquired[shape] = book.acquired.get(shape, 0) + 1

    def bulk_restored(self, job_id: str, shape: Shape) -> None:
        """A bulk granted before a restart holds its slots again (it never waited in this ledger)."""
        book = self._books.get(job_id)
        if book is None:
            book = self._books[job_id] = _JobBook()
        book.acquired[shape] = book.acquired.get(shape, 0) + 1

    def notice(self, job_id: str, oldest: WaitingBulk, waited: float, timeout_s: float, free: int, total: int,
               waiting: int) -> ResourceNotice:
        """The not-enough-resources notice of a job whose `oldest` waiting bulk waited `waited` s
        (the cluster has `free` of `total` slots free and `waiting` bulks queued)."""
        outstanding, acquired = self.outstanding(job_id), self.acquired(job_id)
        message = (
            f"job '{job_id}' has waited {waited:.0f} s for {describe_counts(outstanding)}, longer than "
            f"resource_wait_timeout ({timeout_s:g} s); its oldest waiting region is '{oldest.label}'; it holds "
            f"{describe_counts(acquired)}; the cluster has {free} of {total} slots free and {waiting} bulks "
            f"waiting - add hosts, lower the parallelism or raise resource_wait_timeout"
        )
        return ResourceNotice(job_id, waited, oldest.bulk_id, oldest.label, outstanding, acquired, message)

    def bulk_withdrawn(self, job_id: str, bulk_id: str, shape: Shape) -> None:
        """A waiting bulk left without a grant (cancelled or rejected)."""
        book = self._books[job_id]
        del book.waiting[bulk_id]
        _decrement(book.outstanding, shape)
        if not book.waiting and not book.acquired:
            del self._books[job_id]

    def slots_returned(self, job_id: str, shape: Shape) -> None:
        """A granted bulk gave its slots back (released or lost with a host)."""
        book = self._books[job_id]
        _decrement(book.acquired, shape)
        if not book.waiting and not book.acquired:
            del self._books[job_id]

    def outstanding(self, job_id: str) -> dict[ResourceProfile, int]:
        book = self._books.get(job_id)
        return _per_profile(book.outstanding) if book else {}

    def acquired(self, job_id: str) -> dict[ResourceProfile, int]:
        book = self._books.get(job_id)
        return _per_profile(book.acquired) if book else {}

    def declared(self) -> dict[str, dict[ResourceProfile, int]]:
        """Outstanding requirements of every job that waits for something."""
        return {job: _per_profile(book.outstanding) for job, book in self._books.items() if book.outstanding}

    def oldest_waiting(self) -> Iterable[tuple[str, WaitingBulk]]:
        """Each waiting job with its oldest waiting bulk (O(jobs))."""
        for job_id, book in self._books.items():
            if book.waiting:
                yield job_id, next(iter(book.waiting.values()))


def describe_counts(counts: dict[ResourceProfile, int]) -> str:
    """E.g. ``3 slots of cpu=1,heap=0MiB + 1 slot of cpu=1,heap=0MiB,gpu=1``."""
    if not counts:
        return "no slots"
    return " + ".join(f"{n} slot{'s' if n != 1 else ''} of {profile.describe()}" for profile, n in counts.items())


def _decrement(counts: dict[Shape, int], shape: Shape) -> None:
    left = counts[shape] - 1
    if left:
        counts[shape] = left
    else:
        del counts[shape]


def _per_profile(bulks_by_shape: dict[Shape, int]) -> dict[ResourceProfile, int]:
    slots: dict[ResourceProfile, int] = {}
    for shape, bulks in bulks_by_shape.items():
        for profile, count in shape.items:
            slots[profile] = slots.get(profile, 0) + count * bulks
    return slots


__all__ = ["RequirementLedger", "ResourceNotice", "Shape", "WaitingBulk", "describe_counts"]
