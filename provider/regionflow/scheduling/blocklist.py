"""The (job, host) blocklist: hosts a job must not get new slots on, for a while.

An entry says "do not place new slots of job J on host H until time T". Entries come from the
speculation machinery (a host that ran a slow or failed attempt) and from operators. They are
temporary by design: each expires after `default_expiry_s` (60 s unless configured) or the
expiry given when it was added, and re-adding a live entry only ever extends it.

Time comes from an injected ``clock`` (``time.monotonic`` by default) so tests and the
simulator drive it virtually. Expired entries disappear on their own: queries ignore them at
once, and `purge` drops them from a min-heap of expiries, so keeping the list tidy costs
amortised O(log n) per entry ever added and O(1) when nothing has expired. Running work is not
affected by an entry; only the slot pool's next placements are.

An entry whose job is `EVERY_JOB` (``"*"``) blocks the host for every job: a host that was lost (the
server its attempts need stopped answering) is kept out of every DAG run's next grants, as Flink's
resource manager drops a lost TaskManager's slots for every job, not only for the job whose task saw
the loss. It expires like any entry; whoever probes lost hosts lifts it early or extends it.
"""
from __future__ import annotations

import heapq
import itertools
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from ..core.errors import SpecError

DEFAULT_EXPIRY_S = 60.0
EVERY_JOB = "*"  # the job of an entry that blocks its host for every job

Clock = Callable[[], float]


def applies_to(entry_job_id: str, job_id: str) -> bool:
    """Whether an entry of `entry_job_id` blocks its host for `job_id` (its own, or one for every job)."""
    return entry_job_id == job_id or entry_job_id == EVERY_JOB


@dataclass(frozen=True)
class BlockEntry:
    job_id: str
    host: str
    expires_at: float

    def remaining_s(self, now: float) -> float:
        return max(0.0, self.expires_at - now)


class Blocklist:
    """Live (job, host) entries with expiries, read by the slot pool on every placement."""

    def __init__(self, clock: Clock = time.monotonic, default_expiry_s: float = DEFAULT_EXPIRY_S) -> None:
        self._clock = clock
        self.default_expiry_s = _validated_expiry(default_expiry_s)
        self._expiry: dict[tuple[str, str], float] = {}
        self._hosts_by_job: dict[str, dict[str, float]] = {}
        self._heap: list[tuple[float, int, str, str]] = []
        self._sequence = itertools.count()

    @property
    def clock(self) -> Clock:
        return self._clock

    def add(self, job_id: str, host: str, expiry_s: float | None = None) -> BlockEntry:
        """Block `host` for `job_id` for `expiry_s` seconds from now (an existing later expiry wins)."""
        duration = self.default_expiry_s if expiry_s is None else _validated_expiry(expiry_s)
        expires_at = self._clock() + duration
        key = (job_id, host)
        current = self._expiry.get(key)
        if current is not None and current >= expires_at:
            return BlockEntry(job_id, host, current)
        self._expiry[key] = expires_at
        self._hosts_by_job.setdefault(job_id, {})[host] = expires_at
        heapq.heappush(self._heap, (expires_at, next(self._sequence), job_id, host))
        return BlockEntry(job_id, host, expires_at)

    def remove(self, job_id: str, host: str) -> bool:
        """Lift an entry before it expires; True when there was a live one."""
        live = self._live((job_id, host), self._clock())
        self._forget(job_id, host)
        return live

    def is_blocked(self, job_id: str, host: str) -> bool:
        """True when `host` is blocked for `job_id`, by an entry of the job or of `EVERY_JOB`."""
        now = self._clock()
        return self._live((job_id, host), now) or self._live((EVERY_JOB, host), now)

    def own_hosts(self, job_id: str) -> dict[str, float]:
        """Hosts blocked by the job's own live entries (not those of `EVERY_JOB`), mapped to their expiry."""
        now = self._clock()
        return {host: at for host, at in self._hosts_by_job.get(job_id, {}).items() if at > now}

    def hosts_for(self, job_id: str) -> dict[str, float]:
        """Live blocked hosts of a job (its own entries and those of `EVERY_JOB`), mapped to the time
        each stops being blocked."""
        hosts = self.own_hosts(EVERY_JOB)
        for host, at in self.own_hosts(job_id).items():
            hosts[host] = max(at, hosts.get(host, at))
        return hosts

    def entries(self) -> list[BlockEntry]:
        """Live entries, soonest expiry first."""
        now = self._clock()
        live = [BlockEntry(job, host, at) for (job, host), at in self._expiry.items() if at > now]
        return sorted(live, key=lambda entry: (entry.expires_at, entry.job_id, entry.host))

    def purge(self) -> list[BlockEntry]:
        """Drop and return the entries that have expired by now."""
        now = self._clock()
        expired: list[BlockEntry] = []
        heap = self._heap
        while heap and heap[0][0] <= now:
            expires_at, _, job_id, host = heapq.heappop(heap)
            if self._expiry.get((job_id, host)) == expires_at:
                self._forget(job_id, host)
                expired.append(BlockEntry(job_id, host, expires_at))
        return expired

    def next_expiry(self) -> float | None:
        """When the next live entry expires (None when there is none)."""
        self.purge()
        while self._heap and self._expiry.get((self._heap[0][2], self._heap[0][3])) != self._heap[0][0]:
            heapq.heappop(self._heap)
        return self._heap[0][0] if self._heap else None

    def __len__(self) -> int:
        now = self._clock()
        return sum(1 for at in self._expiry.values() if at > now)

    def __contains__(self, job_and_host: object) -> bool:
        return isinstance(job_and_host, tuple) and len(job_and_host) == 2 and self.is_blocked(*job_and_host)

    def __iter__(self) -> Iterator[BlockEntry]:
        return iter(self.entries())

    def _live(self, key: tuple[str, str], now: float) -> bool:
        expires_at = self._expiry.get(key)
        return expires_at is not None and expires_at > now

    def _forget(self, job_id: str, host: str) -> None:
        self._expiry.pop((job_id, host), None)
        hosts = self._hosts_by_job.get(job_id)
        if hosts is not None:
            hosts.pop(host, None)
            if not hosts:
                del self._hosts_by_job[job_id]


def _validated_expiry(expiry_s: float) -> float:
    if isinstance(expiry_s, bool) or not isinstance(expiry_s, (int, float)) or not expiry_s > 0:
        raise SpecError(f"blocklist expiry must be a number of seconds > 0, got {expiry_s!r}")
    return float(expiry_s)


__all__ = ["BlockEntry", "Blocklist", "DEFAULT_EXPIRY_S", "EVERY_JOB", "Clock", "applies_to"]
