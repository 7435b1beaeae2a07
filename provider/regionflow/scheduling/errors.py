"""Error types of regionflow's scheduling layer (slot pool, hosts, blocklist).

Like the core errors, every message names the thing at fault (region, job, host, field) and says
what would fix it, so the executor and the CLI can show it as is.
"""
from __future__ import annotations

from ..core.errors import RegionflowError


class SchedulingError(RegionflowError):
    """The slot pool was asked something inconsistent (unknown bulk, duplicate host, ...)."""


class UnfulfillableBulk(SchedulingError):
    """A bulk (all slot requests of one region) that the cluster can never satisfy.

    Raised at once instead of letting the region wait forever. `bulk_id`, `job_id` and `label`
    say which region; the message says what it needs and what the cluster has.
    """

    def __init__(self, message: str, *, bulk_id: str, job_id: str, label: str) -> None:
        super().__init__(message)
        self.bulk_id = bulk_id
        self.job_id = job_id
        self.label = label


__all__ = ["SchedulingError", "UnfulfillableBulk"]
