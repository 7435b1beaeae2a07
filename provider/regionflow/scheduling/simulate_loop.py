"""The event loop under `simulate`: virtual time (a heap of timed callbacks), the region runs it records
and the result it reports, shared by both allocators (`simulate_allocators`)."""
from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..core.plan import Plan
from ..core.regions import Region
from .hosts import Cluster
from .strategy import RegionScheduler

DEFAULT_DURATION = 1.0


@dataclass
class RegionRun:
    job: str
    region: str
    slots: int
    ready: float
    start: float | None = None
    end: float | None = None
    hosts: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"job": self.job, "region": self.region, "slots": self.slots, "ready": self.ready,
                "start": self.start, "end": self.end, "hosts": list(self.hosts)}


@dataclass
class SimulationResult:
    allocator: str
    completed: bool
    reason: str
    makespan: float
    peak_slots: int
    total_slots: int
    runs: list[RegionRun] = field(default_factory=list)
    job_makespans: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "allocator": self.allocator,
            "completed": self.completed,
            "reason": self.reason,
            "makespan": self.makespan,
            "peak_slots": self.peak_slots,
            "total_slots": self.total_slots,
            "job_makespans": self.job_makespans,
            "regions": [run.to_dict() for run in self.runs],
        }

    def to_text(self, max_rows: int = 200) -> str:
        lines = [
            f"allocator: {self.allocator}",
            f"completed: {str(self.completed).lower()}" + (f" ({self.reason})" if self.reason else ""),
            f"makespan: {self.makespan:g}",
            f"peak slots used: {self.peak_slots} of {self.total_slots}",
        ]
        lines += [f"job {job}: finished at {end:g}" for job, end in self.job_makespans.items()]
        lines += ["", f"{'job':<16} {'region':<28} {'slots':>5} {'ready':>8} {'start':>8} {'end':>8}  hosts"]
        for run in self.runs[:max_rows]:
            lines.append(f"{run.job:<16} {run.region:<28} {run.slots:>5} {run.ready:>8g} {_fmt(run.start):>8} "
                         f"{_fmt(run.end):>8}  {','.join(run.hosts)}")
        if len(self.runs) > max_rows:
            lines.append(f"... {len(self.runs) - max_rows} more regions (use --format json for all)")
        return "\n".join(lines)


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


class _VirtualClock:
    """The simulated time, read by the pool. A lambda over the simulation would make a reference
    cycle (simulation -> pool -> clock -> simulation) that only the garbage collector can free,
    later and wherever it happens to run; without it, a finished run is freed at once."""

    __slots__ = ("now",)

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Simulation:
    """Shared event loop: a heap of (time, sequence, callback) in virtual time."""

    allocator = ""

    def __init__(self, plans: list[Plan], cluster: Cluster, durations: dict[str, float]) -> None:
        self.plans = plans
        self.cluster = cluster
        self.now = 0.0
        self.clock = _VirtualClock()  # the pool's clock, with no reference back to the simulation
        self.events: list[tuple[float, int, Any, tuple[Any, ...]]] = []
        self.sequence = itertools.count()
        self.job_names = _unique_job_names(plans)
        self.schedulers = [RegionScheduler(plan) for plan in plans]
        self.region_duration = [_region_durations(plan, durations) for plan in plans]
        self.runs: dict[tuple[int, int], RegionRun] = {}
        self.used = 0
        self.peak = 0
        self.failure = ""

    def at(self, when: float, callback: Callable[..., None], *args: Any) -> None:
        heapq.heappush(self.events, (when, next(self.sequence), callback, args))

    def loop(self) -> None:
        events, clock = self.events, self.clock
        while events and not self.failure:
            self.now, _, callback, args = heapq.heappop(events)
            clock.now = self.now
            callback(*args)

    def record_ready(self, job: int, region: Region) -> RegionRun:
        plan = self.plans[job]
        run = RegionRun(self.job_names[job], plan.region_name(region), plan.slots(region), self.now)
        self.runs[(job, region.index)] = run
        return run

    def take_slots(self, count: int) -> None:
        self.used += count
        self.peak = max(self.peak, self.used)

    def result(self, stuck_reason: Callable[[], str]) -> SimulationResult:
        completed = not self.failure and all(s.done for s in self.schedulers)
        reason = self.failure or ("" if completed else stuck_reason())
        ends = [run.end for run in self.runs.values() if run.end is not None]
        job_ends: dict[str, float] = {}
        for (job, _), run in self.runs.items():
            if run.end is not None:
                job_ends[self.job_names[job]] = max(job_ends.get(self.job_names[job], 0.0), run.end)
        ordered = sorted(self.runs.values(), key=lambda r: (r.start is None, r.start or 0.0, r.ready))
        return SimulationResult(self.allocator, completed, reason, max(ends, default=0.0), self.peak,
                                self.cluster.total_slots, ordered, job_ends)


def _unique_job_names(plans: list[Plan]) -> list[str]:
    names: list[str] = []
    for plan in plans:
        name = plan.graph.name
        if name in names:
            name = f"{name}-{sum(1 for n in names if n.split('-')[0] == plan.graph.name) + 1}"
        names.append(name)
    return names


def _region_durations(plan: Plan, durations: dict[str, float]) -> list[float]:
    per_vertex = [durations.get(name, DEFAULT_DURATION) for name in plan.topology.vertex_names]
    result = []
    for region in plan.regions:
        if len(region.members) == 1:
            result.append(per_vertex[plan.topology.vertex_of(region.members[0])])
        else:
            result.append(max(per_vertex[v] for v in plan.vertex_counts(region)))
    return result


__all__ = ["DEFAULT_DURATION", "RegionRun", "Simulation", "SimulationResult"]
