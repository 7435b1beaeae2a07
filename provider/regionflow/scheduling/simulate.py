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

The event loop and its records are in `simulate_loop`, the two allocators in `simulate_allocators`.
"""
from __future__ import annotations

import math
import statistics
import time
from typing import Any

from ..core.errors import SpecError
from ..core.graph import JobGraph
from ..core.plan import Plan
from ..core.topology import gc_paused
from .hosts import Cluster
from .simulate_allocators import FifoBulkSimulation, PerTaskSimulation
from .simulate_loop import SimulationResult


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


def simulate(plans: list[Plan], cluster: Cluster, durations: dict[str, float] | None = None,
             allocator: str = "fifo-bulk") -> SimulationResult:
    _check_durations(plans, durations or {})
    if allocator not in ("fifo-bulk", "per-task"):
        raise SpecError(f"unknown allocator {allocator!r}; use fifo-bulk or per-task")
    # a run allocates a few small objects per region and event (runs, bulks, grants) and keeps most
    # of them to the end: each collection on the way would rescan all of them
    with gc_paused():
        if allocator == "fifo-bulk":
            return FifoBulkSimulation(plans, cluster, durations or {}).run()
        return PerTaskSimulation(plans, cluster, durations or {}).run()


def _check_durations(plans: list[Plan], durations: dict[str, float]) -> None:
    known = {name for plan in plans for name in plan.graph.vertices}
    unknown = sorted(set(durations) - known)
    if unknown:
        raise SpecError(f"--durations names unknown vertex(es) {', '.join(unknown)}; known: {', '.join(sorted(known))}")


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


__all__ = ["bench_schedule", "parse_durations", "simulate"]
