"""Benchmark of the slot pool: a discrete-event run of many bulks through a busy cluster.

`bench_pool` builds a cluster of `hosts` hosts with `slots` slots in all, in three slot classes
(70 % standard, 20 % high-memory, 10 % gpu hosts), and pushes `bulks` bulks of 1..16 slot
requests through it: mostly standard requests, some high-memory or gpu-only, some mixing
standard and gpu requests, from `jobs` jobs. Bulks arrive as a Poisson stream whose offered load
is `load` times the cluster's capacity (so the queue grows to thousands of waiting bulks) and
each granted bulk finishes after a random virtual duration, releasing its slots. Every 500th
release blocklists a host for the finished bulk's job for 30 virtual seconds, as speculation
would, so the blocklist paths run too.

A *decision* is one `submit` or `release` call: each one queues, grants or frees slots and
re-decides what runs, and its latency includes every grant it makes. A submit rejected as
unfulfillable is not counted (with the default cluster none is). `decisions_per_s` is
decisions divided by the time spent inside those calls; `loop_decisions_per_s` divides by the
whole loop's wall time (event queue and bookkeeping included). The prebuilt workload is frozen
out of the garbage collector's scans (`gc.freeze`); the pool's own objects are not.

The baseline runs a smaller workload of the same kind (`baseline_bulks` bulks) through
`NaivePool`, which applies FIFO with reservations by re-scanning every waiting bulk on each call;
`speedup` compares it with the real pool on that very workload.
"""
from __future__ import annotations

import gc
import heapq
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from regionflow.core.errors import SpecError
from regionflow.core.resources import ResourceProfile
from regionflow.scheduling.errors import UnfulfillableBulk
from regionflow.scheduling.hosts import Host
from regionflow.scheduling.pool import Bulk, Grant, SlotPool

STANDARD = ResourceProfile.of(cpu=1, heap_mib=1024)
HIGH_MEMORY = ResourceProfile.of(cpu=1, heap_mib=6144)
GPU = ResourceProfile.of(cpu=1, heap_mib=2048, gpu=1)
MEAN_DURATION_S = 60.0
BLOCK_EVERY_N_RELEASES = 500
BLOCK_EXPIRY_S = 30.0


@dataclass(frozen=True)
class Workload:
    hosts: tuple[Host, ...]
    bulks: tuple[Bulk, ...]
    arrivals: tuple[float, ...]
    durations: tuple[float, ...]


class _Pool(Protocol):
    def submit(self, bulk: Bulk) -> list[Grant]: ...
    def release(self, bulk_id: str) -> list[Grant]: ...
    def block(self, job_id: str, host: str, expiry_s: float | None = None) -> object: ...


def bench_pool(bulks: int = 100_000, slots: int = 1000, hosts: int = 100, seed: int = 0,
               baseline_bulks: int = 10_000, load: float = 1.2, jobs: int = 50) -> dict[str, Any]:
    """Run the benchmark and the naive baseline; return the figures as a flat dict."""
    if bulks < 1 or slots < 1 or hosts < 1 or jobs < 1 or load <= 0 or baseline_bulks < 0:
        raise SpecError("bench_pool needs bulks, slots, hosts, jobs >= 1, load > 0 and baseline_bulks >= 0")
    workload = make_workload(bulks, slots, hosts, seed, load, jobs)
    main = run_workload(workload, _real_pool)
    result = {"bulks": bulks, "slots": slots, "hosts": hosts, **main}
    if baseline_bulks:
        small = make_workload(baseline_bulks, slots, hosts, seed, load, jobs)
        naive = run_workload(small, lambda clock, cluster: NaivePool(cluster, clock))
        ours = run_workload(small, _real_pool)
        result.update({
            "baseline_bulks": baseline_bulks,
            "baseline_decisions_per_s": naive["decisions_per_s"],
            "baseline_p99_decision_us": naive["p99_decision_us"],
            "same_workload_decisions_per_s": ours["decisions_per_s"],
            "speedup": round(ours["decisions_per_s"] / naive["decisions_per_s"], 1),
        })
    return result


def _real_pool(clock: Callable[[], float], cluster: tuple[Host, ...]) -> SlotPool:
    return SlotPool(cluster, clock=clock)


def make_workload(bulks: int, slots: int, hosts: int, seed: int, load: float, jobs: int) -> Workload:
    rng = random.Random(seed)
    cluster = make_cluster(slots, hosts)
    shapes = [_random_requests(rng) for _ in range(bulks)]
    mean_size = statistics.fmean(len(requests) for requests in shapes)
    arrival_rate = load * slots / (mean_size * MEAN_DURATION_S)
    arrivals, now = [], 0.0
    for _ in range(bulks):
        now += rng.expovariate(arrival_rate)
        arrivals.append(now)
    made = tuple(
        Bulk(f"b{i}", f"job{rng.randrange(jobs)}", f"region-{i}", requests) for i, requests in enumerate(shapes)
    )
    durations = tuple(rng.uniform(0.2, 1.8) * MEAN_DURATION_S for _ in range(bulks))
    return Workload(cluster, made, tuple(arrivals), durations)


def make_cluster(slots: int, hosts: int) -> tuple[Host, ...]:
    per_host = max(1, slots // hosts)
    made = []
    for i in range(hosts):
        if i % 10 == 9:
            made.append(Host.of(f"gpu{i}", per_host, mem=4096 * per_host, gpu=per_host))
        elif i % 10 in (7, 8):
            made.append(Host.of(f"mem{i}", per_host, mem=8192 * per_host))
        else:
            made.append(Host.of(f"std{i}", per_host, mem=2048 * per_host))
    return tuple(made)


def _random_requests(rng: random.Random) -> tuple[ResourceProfile, ...]:
    size = rng.randint(1, 16)
    kind = rng.random()
    if kind < 0.70:
        return (STANDARD,) * size
    if kind < 0.85:
        return (HIGH_MEMORY,) * size
    if kind < 0.95:
        return (GPU,) * size
    gpus = rng.randint(1, size)
    return (GPU,) * gpus + (STANDARD,) * (size - gpus)


def run_workload(workload: Workload,
                 make_pool: Callable[[Callable[[], float], tuple[Host, ...]], _Pool]) -> dict[str, Any]:
    """Discrete-event loop: arrivals submit, finishes release; every call is timed."""
    now = [0.0]
    pool = make_pool(lambda: now[0], workload.hosts)
    events: list[tuple[float, int, int]] = [(t, i, i) for i, t in enumerate(workload.arrivals)]
    heapq.heapify(events)
    finish_base = len(workload.bulks)
    latencies: list[int] = []
    timer = time.perf_counter_ns
    released = rejected = max_pending = 0
    gc.collect()
    gc.freeze()  # the prebuilt workload is the benchmark's data, not the pool's: keep it out of GC scans
    wall_start = time.perf_counter()
    while events:
        now[0], _, code = heapq.heappop(events)
        if code < finish_base:
            started = timer()
            try:
                grants = pool.submit(workload.bulks[code])
                latencies.append(timer() - started)
            except UnfulfillableBulk:
                grants = []
                rejected += 1  # neither queued nor granted: not a decision
        else:
            index = code - finish_base
            bulk = workload.bulks[index]
            started = timer()
            grants = pool.release(bulk.bulk_id)
            latencies.append(timer() - started)
            released += 1
            if released % BLOCK_EVERY_N_RELEASES == 0:
                pool.block(bulk.job_id, workload.hosts[index % len(workload.hosts)].name, BLOCK_EXPIRY_S)
        for grant in grants:
            index = int(grant.bulk_id[1:])
            heapq.heappush(events, (now[0] + workload.durations[index], finish_base + index, finish_base + index))
        max_pending = max(max_pending, getattr(pool, "pending_count", 0))
    wall_s = time.perf_counter() - wall_start
    gc.unfreeze()
    return _figures(latencies, wall_s, released, rejected, max_pending)


def _figures(latencies: list[int], wall_s: float, released: int, rejected: int, max_pending: int) -> dict[str, Any]:
    inside_s = sum(latencies) / 1e9
    ordered = sorted(latencies)
    return {
        "decisions": len(latencies),
        "decisions_per_s": round(len(latencies) / inside_s),
        "loop_decisions_per_s": round(len(latencies) / wall_s),
        "median_decision_us": round(ordered[len(ordered) // 2] / 1000, 2),
        "p99_decision_us": round(ordered[int(len(ordered) * 0.99)] / 1000, 2),
        "max_decision_us": round(ordered[-1] / 1000, 1),
        "completed": released,
        "rejected": rejected,
        "max_pending": max_pending,
        "wall_s": round(wall_s, 2),
    }


class NaivePool:
    """Baseline: FIFO with reservations like the real pool, but every call re-scans every waiting bulk.

    Feasibility uses per-class counts (cheap per bulk); what makes it naive is the full scan of
    the queue on each submit and release, O(waiting bulks) per decision.
    """

    def __init__(self, hosts: tuple[Host, ...], clock: Callable[[], float]) -> None:
        self._clock = clock
        self._hosts = list(hosts)
        offers = list(dict.fromkeys(host.slot_profile for host in hosts))
        self._offers = offers
        self._class_of = [offers.index(host.slot_profile) for host in hosts]
        self._free = [host.slots for host in hosts]
        self._pending: list[Bulk] = []
        self._running: dict[str, list[int]] = {}
        self._blocked: dict[tuple[str, str], float] = {}
        self._needs: dict[str, list[tuple[list[int], int]]] = {}

    @property
    def pending_count(self) -> int:
        return len(self._pending)

    def submit(self, bulk: Bulk) -> list[Grant]:
        counts: dict[ResourceProfile, int] = {}
        for request in bulk.requests:
            counts[request] = counts.get(request, 0) + 1
        self._needs[bulk.bulk_id] = [
            ([c for c, offer in enumerate(self._offers) if profile.fits_in(offer)], count)
            for profile, count in counts.items()
        ]
        self._pending.append(bulk)
        return self._scan()

    def release(self, bulk_id: str) -> list[Grant]:
        for host in self._running.pop(bulk_id):
            self._free[host] += 1
        return self._scan()

    def block(self, job_id: str, host: str, expiry_s: float | None = None) -> None:
        self._blocked[(job_id, host)] = self._clock() + (expiry_s or 60.0)

    def _scan(self) -> list[Grant]:
        budget = [0] * len(self._offers)
        for host, free in enumerate(self._free):
            budget[self._class_of[host]] += free
        grants, still_waiting = [], []
        for bulk in self._pending:
            plan = self._plan(bulk, budget)
            hosts = self._hosts_for(bulk, plan) if plan is not None else None
            if plan is None or hosts is None:
                still_waiting.append(bulk)
                for fit, count in self._needs[bulk.bulk_id]:
                    for klass in fit:
                        budget[klass] -= min(budget[klass], count)
                continue
            for klass, count in plan.items():
                budget[klass] -= count
            self._running[bulk.bulk_id] = hosts
            del self._needs[bulk.bulk_id]
            grants.append(Grant(bulk.bulk_id, bulk.job_id, bulk.label, ()))
        self._pending = still_waiting
        return grants

    def _plan(self, bulk: Bulk, budget: list[int]) -> dict[int, int] | None:
        plan: dict[int, int] = {}
        for fit, count in self._needs[bulk.bulk_id]:
            for klass in fit:
                take = min(budget[klass] - plan.get(klass, 0), count)
                if take > 0:
                    plan[klass] = plan.get(klass, 0) + take
                    count -= take
            if count:
                return None
        return plan

    def _hosts_for(self, bulk: Bulk, plan: dict[int, int]) -> list[int] | None:
        """Hosts in host order for the planned counts, skipping the job's blocklisted hosts."""
        now = self._clock()
        taking: dict[int, int] = {}
        for klass, count in plan.items():
            for host, spec in enumerate(self._hosts):
                if not count:
                    break
                if self._class_of[host] != klass or self._blocked.get((bulk.job_id, spec.name), 0.0) > now:
                    continue
                take = min(count, self._free[host])
                if take > 0:
                    taking[host] = take
                    count -= take
            if count:
                return None
        for host, count in taking.items():
            self._free[host] -= count
        return [host for host, count in taking.items() for _ in range(count)]


__all__ = ["bench_pool", "make_workload", "make_cluster", "run_workload", "NaivePool", "Workload"]


if __name__ == "__main__":
    print(bench_pool())
