"""`python benchmarks/micro.py topology`: build time and peak memory of the execution topology and regions.

Two vertices of parallelism N joined by one all-to-all or pointwise edge, blocking or pipelined.
The grouped build (what regionflow does) is compared, at a size it can finish, with a naive build that
keeps one object per subtask pair and builds the region graph edge by edge, as Flink 1.12 did. The
same grouped build at a tenth of N runs in the same invocation (`scaling`): a linear build takes
about `linear_ratio` (10) times as long at N.
"""
from __future__ import annotations

import statistics
import time
import tracemalloc
from collections.abc import Callable

from regionflow.core.graph import JobGraph
from regionflow.core.plan import Plan
from regionflow.core.region_graph import find, union  # the same union-find, edge by edge
from regionflow.core.topology import gc_paused, pointwise_producers


class _BenchGraph(JobGraph):
    """The bench's own job: checked like any graph except for the per-vertex parallelism cap
    (`MAX_PARALLELISM`, 32768), which stops a user's typo, not the planner; the bench measures
    parallelism 100,000 to show the build stays linear."""

    def validate(self) -> JobGraph:
        return self.validate_structure()


def two_vertex_job(parallelism: int, pattern: str, exchange: str) -> JobGraph:
    distribution = "hash" if pattern == "all-to-all" else "rescale"
    graph = _BenchGraph(f"bench-{pattern}-{exchange}-{parallelism}")
    graph.add_vertex("source", parallelism)
    graph.add_vertex("sink", parallelism)
    graph.connect("source", "sink", distribution, exchange, keys=["key"] if distribution == "hash" else [])
    return graph


def build_grouped(graph: JobGraph) -> Plan:
    plan = Plan(graph)
    _ = plan.min_slots  # slot demand of every region is part of planning
    return plan


def build_naive(graph: JobGraph) -> int:
    """One edge object per (producer, consumer) pair; regions by union-find over those edges; the
    region graph from the same edges. Returns the region count."""
    with gc_paused():
        (src, dst) = list(graph.vertices.values())
        edge = graph.edges[0]
        n_src, n_dst = src.parallelism, dst.parallelism
        pairs = _naive_edges(n_src, n_dst, edge.distribution.is_pointwise)
        parent = list(range(n_src + n_dst))
        if edge.exchange is not None and edge.exchange.value == "pipelined":
            for pair in pairs:
                union(parent, pair.producer, n_src + pair.consumer)
        roots = [find(parent, s) for s in range(n_src + n_dst)]
        region_edges = {(roots[p.producer], roots[n_src + p.consumer]) for p in pairs
                        if roots[p.producer] != roots[n_src + p.consumer]}
        del region_edges
        return len(set(roots))


class _NaiveExecutionEdge:
    __slots__ = ("producer", "consumer", "partition")

    def __init__(self, producer: int, consumer: int) -> None:
        self.producer = producer
        self.consumer = consumer
        self.partition = (producer, consumer)


def _naive_edges(n_src: int, n_dst: int, pointwise: bool) -> list[_NaiveExecutionEdge]:
    if pointwise:
        return [_NaiveExecutionEdge(p, c) for c in range(n_dst) for p in range(*pointwise_producers(c, n_src, n_dst))]
    return [_NaiveExecutionEdge(p, c) for c in range(n_dst) for p in range(n_src)]


def measure(build: Callable[[], object], repeats: int) -> tuple[float, float]:
    """Median wall milliseconds over `repeats` runs, and peak MiB (tracemalloc) of one more run."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        build()
        times.append((time.perf_counter() - start) * 1000)
    tracemalloc.start()
    build()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return statistics.median(times), peak / 2**20


def bench_topology(parallelism: int = 10_000, pattern: str = "all-to-all", exchange: str = "blocking",
                   repeats: int = 5, naive_parallelism: int | None = None) -> dict:
    graph = two_vertex_job(parallelism, pattern, exchange)
    build_ms, peak_mib = measure(lambda: build_grouped(graph), repeats)
    plan = build_grouped(graph)
    result = {
        "parallelism": parallelism,
        "pattern": pattern,
        "exchange": exchange,
        "build_ms": round(build_ms, 2),
        "peak_mib": round(peak_mib, 2),
        "subtasks": plan.topology.subtask_count,
        "regions": len(plan.regions),
        "partition_groups": len(plan.topology.groups),
    }
    if parallelism >= 20:  # the same build at a tenth of the size, in this invocation: linear means ~10x
        tenth = two_vertex_job(parallelism // 10, pattern, exchange)
        tenth_ms, _ = measure(lambda: build_grouped(tenth), repeats)
        result["scaling"] = {
            "parallelism": parallelism // 10,
            "build_ms": round(tenth_ms, 2),
            "time_ratio": round(build_ms / tenth_ms, 2) if tenth_ms else None,
            "linear_ratio": round(parallelism / (parallelism // 10), 2),
        }
    small = naive_parallelism or min(parallelism, 2_000)
    small_graph = two_vertex_job(small, pattern, exchange)
    grouped_ms, grouped_mib = measure(lambda: build_grouped(small_graph), repeats)
    naive_ms, naive_mib = measure(lambda: build_naive(small_graph), max(1, repeats // 2))
    result["baseline"] = {
        "parallelism": small,
        "grouped_ms": round(grouped_ms, 2),
        "grouped_mib": round(grouped_mib, 2),
        "naive_ms": round(naive_ms, 2),
        "naive_mib": round(naive_mib, 2),
        "time_ratio_naive_over_grouped": round(naive_ms / grouped_ms, 1) if grouped_ms else None,
        "memory_ratio_naive_over_grouped": round(naive_mib / grouped_mib, 1) if grouped_mib else None,
    }
    return result
