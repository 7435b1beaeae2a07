"""`regionflow simulate`: the real strategy and the real slot pool against simulated time.

Several jobs share one cluster, submitted in the order given at time 0. Each subtask takes its
vertex's duration (default 1.0); a region runs for the longest duration among its vertices, since
its subtasks run together. Two allocators:

- ``fifo-bulk``: each schedulable region is one bulk in the `SlotPool` (whole or nothing, oldest
  first, across jobs); a bulk the cluster can never satisfy stops the run at once with its message.
- ``per-task``: the naive baseline of plain Airflow pools: every subtask grabs one slot on its own,
  in Airflow's order (ready time, position of its vertex, subtask index, then job, so concurrent
  runs interleave), and keeps it until its whole region has run; a region only makes progress once
  all its subtasks hold a slot. It wedges when every slot is held by half-started regions, and the
  run reports that deadlock instead of hanging.
"""
from __future__ import annotations

import heapq
import itertools
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..core.errors import SpecError
from ..core.graph import JobGraph
from ..core.plan import Plan, SlotRequest
from ..core.regions import Region
from ..core.resources import ResourceProfile
from ..core.topology import gc_paused
from .errors import UnfulfillableBulk
from .hosts import Cluster
from .pool import Bulk, Grant, SlotPool
from .strategy import RegionScheduler

DEFAULT_DURATION = 1.0


def parse_durations(spec: str | None) -> dict[str, float]:
    """``"A=2,B=0.5"`` -> {"A": 2.0, "B": 0.5}; every other vertex takes 1.0. A vertex named twice is refused."""
    durations: dict[str, float] = {}
    for item in filter(None, (part.strip() for part in (spec or "").split(","))):
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise SpecError(f"--durations item {item!r} must look like VERTEX=SECONDS, e.g. A=2.5")
        try:
            seconds = float(value)
        except ValueError:
            raise SpecError(f"--durations: {name.strip()!r} has duration {value!r}, which is not a number") from None
        if not math.isfinite(seconds) or seconds < 0:
            raise SpecError(f"--durations: {name.strip()!r} has duration {value.strip()!r}; use a finite number of "
                            f"seconds >= 0")
        if name.strip() in durations:
            raise SpecError(f"--durations names vertex {name.strip()!r} twice; give each vertex one duration")
        durations[name.strip()] = seconds
    return durations


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


def simulate(plans: list[Plan], cluster: Cluster, durations: dict[str, float] | None = None,
             allocator: str = "fifo-bulk") -> SimulationResult:
    _check_durations(plans, durations or {})
    if allocator not in ("fifo-bulk", "per-task"):
        raise SpecError(f"unknown allocator {allocator!r}; use fifo-bulk or per-task")
    # a run allocates a few small objects per region and event (runs, bulks, grants) and keeps most
    # of them to the end: each collection on the way would rescan all of them
    with gc_paused():
        if allocator == "fifo-bulk":
            return _FifoBulkSimulation(plans, cluster, durations or {}).run()
        return _PerTaskSimulation(plans, cluster, durations or {}).run()


def _check_durations(plans: list[Plan], durations: dict[str, float]) -> None:
    known = {name for plan in plans for name in plan.graph.vertices}
    unknown = sorted(set(durations) - known)
    if unknown:
        raise SpecError(f"--durations names unknown vertex(es) {', '.join(unknown)}; known: {', '.join(sorted(known))}")


class _VirtualClock:
    """The simulated time, read by the pool. A lambda over the simulation would make a reference
    cycle (simulation -> pool -> clock -> simulation) that only the garbage collector can free,
    later and wherever it happens to run; without it, a finished run is freed at once."""

    __slots__ = ("now",)

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class _Simulation:
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


class _FifoBulkSimulation(_Simulation):
    allocator = "fifo-bulk"

    def __init__(self, plans: list[Plan], cluster: Cluster, durations: dict[str, float]) -> None:
        super().__init__(plans, cluster, durations)
        self.pool = SlotPool(cluster, clock=self.clock)
        self.grant_sizes: dict[str, int] = {}
        self.bulk_regions: dict[str, tuple[int, int]] = {}  # bulk id -> (job, region)
        self.profiles: dict[int, tuple[tuple[SlotRequest, ...], tuple[ResourceProfile, ...]]] = {}
        self.ending: dict[float, list[tuple[int, int, str]]] = {}  # end time -> (job, region, bulk id)

    def run(self) -> SimulationResult:
        for job, scheduler in enumerate(self.schedulers):
            self.submit(job, scheduler.start())
            if self.failure:
                break
        self.loop()
        return self.result(self.stuck_reason)

    def submit(self, job: int, units: list[int]) -> None:
        plan, job_name, pool = self.plans[job], self.job_names[job], self.pool
        for region in map(plan.regions.__getitem__, units):
            run = self.record_ready(job, region)
            bulk_id = f"{job}:{region.index}"
            self.bulk_regions[bulk_id] = (job, region.index)
            bulk = Bulk(bulk_id, job_name, f"{run.job}/{run.region}", self.requests(plan, region))
            try:
                grants = pool.submit(bulk)
            except UnfulfillableBulk as error:
                self.failure = str(error)
                return
            if grants:
                self.start_all(grants)

    def requests(self, plan: Plan, region: Region) -> tuple[ResourceProfile, ...]:
        """The region's slot requests, one profile per slot; regions of one shape share their
        `SlotRequest` tuple, so its expansion is worked out once per shape."""
        requests = plan.slot_requests(region)
        known = self.profiles.get(id(requests))
        if known is None or known[0] is not requests:
            known = self.profiles[id(requests)] = (requests, tuple(p for r in requests for p in r.expand()))
        return known[1]

    def start_all(self, grants: list[Grant]) -> None:
        now, runs, bulk_regions = self.now, self.runs, self.bulk_regions
        for grant in grants:
            bulk_id = grant.bulk_id
            job, region = bulk_regions[bulk_id]
            run = runs[(job, region)]
            run.start, run.hosts = now, grant.hosts
            self.grant_sizes[bulk_id] = len(grant.slots)
            self.take_slots(len(grant.slots))
            self.schedulers[job].on_started(region)
            end = now + self.region_duration[job][region]
            ending = self.ending.get(end)
            if ending is None:  # the first region to end at this instant schedules the instant
                ending = self.ending[end] = []
                self.at(end, self.finish, end)
            ending.append((job, region, bulk_id))

    def finish(self, end: float) -> None:
        """Every region that ends at this instant ends together, as the executor sees the tries
        that ended since its last heartbeat: their slots return in one pool pass (freed slots go
        to older waiting bulks first), then the regions they made ready are submitted in order."""
        ending = self.ending.pop(end)
        runs, grant_sizes, bulk_regions = self.runs, self.grant_sizes, self.bulk_regions
        for job, region, bulk_id in ending:
            runs[(job, region)].end = end
            self.used -= grant_sizes.pop(bulk_id)
            del bulk_regions[bulk_id]
        grants = self.pool.release_all([bulk_id for _, _, bulk_id in ending])
        if grants:
            self.start_all(grants)
        for job, region, _ in ending:
            ready = self.schedulers[job].on_finished(region).ready
            if ready:
                self.submit(job, ready)
                if self.failure:
                    return

    def stuck_reason(self) -> str:
        waiting = [bulk.label for bulk in self.pool.waiting_bulks()[:5]]
        return f"nothing runs and bulks still wait: {', '.join(waiting) or 'none'}"


class _PerTaskSimulation(_Simulation):
    allocator = "per-task"

    def __init__(self, plans: list[Plan], cluster: Cluster, durations: dict[str, float]) -> None:
        super().__init__(plans, cluster, durations)
        self.free = cluster.total_slots
        self.queue: list[tuple[tuple[Any, ...], int, int]] = []  # (Airflow order key, job, region)
        self.holding: dict[tuple[int, int], int] = {}
        self.needed: dict[tuple[int, int], int] = {}

    def run(self) -> SimulationResult:
        for job, scheduler in enumerate(self.schedulers):
            self.enqueue(job, scheduler.start())
        self.grab()
        self.loop()
        return self.result(self.stuck_reason)

    def enqueue(self, job: int, units: list[int]) -> None:
        topology = self.plans[job].topology
        for region in (self.plans[job].regions[u] for u in units):
            self.record_ready(job, region)
            self.needed[(job, region.index)] = len(region.members)
            self.holding[(job, region.index)] = 0
            for subtask in region.members:
                vertex = topology.vertex_of(subtask)
                key = (self.now, vertex, subtask - topology.offsets[vertex], job, subtask)
                heapq.heappush(self.queue, (key, job, region.index))

    def grab(self) -> None:
        while self.queue and self.free > 0:
            _, job, region = heapq.heappop(self.queue)
            self.free -= 1
            self.take_slots(1)
            self.holding[(job, region)] += 1
            if self.holding[(job, region)] == self.needed[(job, region)]:
                run = self.runs[(job, region)]
                run.start = self.now
                self.schedulers[job].on_started(region)
                self.at(self.now + self.region_duration[job][region], self.finish, job, region)

    def finish(self, job: int, region: int) -> None:
        self.runs[(job, region)].end = self.now
        held = self.holding.pop((job, region))
        self.free += held
        self.used -= held
        self.enqueue(job, self.schedulers[job].on_finished(region).ready)
        self.grab()

    def stuck_reason(self) -> str:
        partial = [(key, held) for key, held in self.holding.items() if 0 < held < self.needed[key]]
        if not partial:
            return "nothing runs and subtasks still wait"
        names = ", ".join(
            f"{self.job_names[job]}/{self.plans[job].region_name(self.plans[job].regions[region])} "
            f"holds {held} of {self.needed[(job, region)]}"
            for (job, region), held in partial[:6]
        )
        return (f"deadlock: all {self.cluster.total_slots} slots are held by partially started regions "
                f"({names}); none can finish and free a slot")


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


# ---- benchmark --------------------------------------------------------------------------------------


def bench_schedule(parallelism: int = 10_000, slots: int = 1_000, repeats: int = 3) -> dict[str, Any]:
    """The strategy and the pool over the 10k x 10k all-to-all blocking job, end to end in simulated
    time. Planning is timed apart from scheduling."""
    graph = JobGraph(f"all-to-all-{parallelism}")
    graph.add_vertex("source", parallelism)
    graph.add_vertex("sink", parallelism)
    graph.connect("source", "sink", "hash", "blocking", keys=["key"])
    hosts = max(1, slots // 100)
    cluster = Cluster.parse(";".join(f"h{i}:slots={slots // hosts}" for i in range(hosts)))
    plan_times, schedule_times = [], []
    result = None
    for _ in range(repeats):
        start = time.perf_counter()
        plan = Plan(graph)
        planned = time.perf_counter()
        result = simulate([plan], cluster)
        schedule_times.append(time.perf_counter() - planned)
        plan_times.append(planned - start)
    assert result is not None
    return {
        "parallelism": parallelism,
        "slots": cluster.total_slots,
        "hosts": hosts,
        "regions": len(result.runs),
        "completed": result.completed,
        "simulated_makespan": result.makespan,
        "plan_wall_s": round(statistics.median(plan_times), 3),
        "schedule_wall_s": round(statistics.median(schedule_times), 3),
        "total_wall_s": round(statistics.median(plan_times) + statistics.median(schedule_times), 3),
    }


__all__ = ["simulate", "parse_durations", "bench_schedule", "SimulationResult", "RegionRun"]
