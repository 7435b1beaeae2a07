"""The slot pool's values: a bulk (what a region asks for), a grant (what it got), and reports.

A *bulk* is all slot requests of one region (FLIP-119); the pool grants it whole or not at all.
These are plain immutable values shared by the pool's parts and its callers (executors, simulator,
benchmarks); they hold no pool state.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..core.resources import ResourceProfile
from .capacity import SlotRef
from .errors import SchedulingError, UnfulfillableBulk
from .hosts import Host


@dataclass(frozen=True)
class Bulk:
    """All slot requests of one region; `label` (the region name) is used in messages."""

    bulk_id: str
    job_id: str
    label: str
    requests: tuple[ResourceProfile, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.requests, tuple):
            object.__setattr__(self, "requests", tuple(self.requests))
        if not self.requests:
            raise SchedulingError(
                f"bulk '{self.bulk_id}' (region '{self.label}') has no slot requests; a region needs at least one slot"
            )
        for request in self.requests:
            if not isinstance(request, ResourceProfile):
                raise SchedulingError(
                    f"bulk '{self.bulk_id}' (region '{self.label}'): request {request!r} is not a ResourceProfile"
                )

    @property
    def size(self) -> int:
        """Number of slot requests."""
        return len(self.requests)


@dataclass(frozen=True)
class Grant:
    """The slots given to a bulk, listed in the order of its requests."""

    bulk_id: str
    job_id: str
    label: str
    slots: tuple[SlotRef, ...]

    @property
    def hosts(self) -> tuple[str, ...]:
        """Distinct hosts of the grant, in order of first use."""
        return tuple(dict.fromkeys(slot.host for slot in self.slots))

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form: ids, label and the slots as [host, index] pairs."""
        return {"bulk_id": self.bulk_id, "job_id": self.job_id, "label": self.label,
                "slots": [[slot.host, slot.index] for slot in self.slots]}


@dataclass(frozen=True)
class HostLoss:
    """What `remove_host` did: grants that lost slots, bulks that no longer fit, new grants."""

    host: str
    lost_grants: list[Grant]
    rejected: list[tuple[Bulk, UnfulfillableBulk]]
    granted: list[Grant]


@dataclass(frozen=True)
class HostUsage:
    """One live host's slots and how many of them are free (for metrics and views)."""

    name: str
    slots: int
    free: int

    @property
    def used(self) -> int:
        """Granted slots of the host."""
        return self.slots - self.free


def host_row(host: Host, free: int) -> dict[str, Any]:
    """One host of `SlotPool.snapshot` (its address as written: scheduling never reads it)."""
    return {"name": host.name, "slots": host.slots, "used": host.slots - free, "free": free,
            "slot_profile": host.slot_profile.to_dict(), "address": host.address}


__all__ = ["Bulk", "Grant", "HostLoss", "HostUsage", "SlotRef", "host_row"]
