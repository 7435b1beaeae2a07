"""Execution topology: pointwise wiring, partition groups, subtask ids, O(n) grouping."""
from __future__ import annotations

import gc

import core_jobs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from regionflow.core.topology import (
    ExecutionTopology,
    gc_paused,
    pointwise_consumers,
    pointwise_producers,
)


def make_job(vertices, edges=(), name="t"):
    return core_jobs.make_job(vertices, edges, name)


def names(topology, ids):
    return [topology.subtask_name(s) for s in ids]


def reads(topology, subtask_name):
    """{edge label: producer subtask names} for one consumer subtask, via inputs_of."""
    result = {}
    for exec_edge, producers in topology.inputs_of(topology.subtask_id(subtask_name)):
        result.setdefault(exec_edge.index, []).extend(names(topology, producers))
    return result


# ---- pointwise wiring -------------------------------------------------------------------------------


def test_pointwise_3_to_7():
    assert [pointwise_consumers(p, 3, 7) for p in range(3)] == [(0, 3), (3, 5), (5, 7)]
    assert [pointwise_producers(c, 3, 7) for c in range(7)] == [
        (0, 1), (0, 1), (0, 1), (1, 2), (1, 2), (2, 3), (2, 3)
    ]


def test_pointwise_7_to_3():
    assert [pointwise_producers(c, 7, 3) for c in range(3)] == [(0, 2), (2, 4), (4, 7)]
    assert [pointwise_consumers(p, 7, 3) for p in range(7)] == [
        (0, 1), (0, 1), (1, 2), (1, 2), (2, 3), (2, 3), (2, 3)
    ]


def test_pointwise_equal_is_one_to_one():
    for n in (1, 4, 9):
        assert [pointwise_producers(i, n, n) for i in range(n)] == [(i, i + 1) for i in range(n)]
        assert [pointwise_consumers(i, n, n) for i in range(n)] == [(i, i + 1) for i in range(n)]


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 50), st.integers(1, 50))
def test_pointwise_wiring_partitions_and_is_inverse_consistent(s, t):
    consumer_ranges = [pointwise_consumers(p, s, t) for p in range(s)]
    producer_ranges = [pointwise_producers(c, s, t) for c in range(t)]
    # every range is non-empty and inside bounds
    assert all(0 <= lo < hi <= t for lo, hi in consumer_ranges)
    assert all(0 <= lo < hi <= s for lo, hi in producer_ranges)
    # consumers covered; when S >= T each consumer range is one consumer and they cover range(T)
    covered = sorted(c for lo, hi in consumer_ranges for c in range(lo, hi))
    if s <= t:
        assert covered == list(range(t))  # a partition of range(T)
    else:
        assert set(covered) == set(range(t))
    read = sorted(p for lo, hi in producer_ranges for p in range(lo, hi))
    if s >= t:
        assert read == list(range(s))  # a partition of range(S)
    else:
        assert set(read) == set(range(s))
    # the distinct ranges tile range(T) and range(S): contiguous, disjoint, in order
    for ranges, size in ((consumer_ranges, t), (producer_ranges, s)):
        distinct = sorted(set(ranges))
        assert distinct[0][0] == 0 and distinct[-1][1] == size
        assert all(a[1] == b[0] for a, b in zip(distinct, distinct[1:], strict=False))
    # inverse consistency
    for p in range(s):
        for c in range(t):
            assert (p in range(*producer_ranges[c])) == (c in range(*consumer_ranges[p])), (p, c)
    # the number of distinct groups is min(S, T)
    groups = {(pointwise_producers(c, s, t), pointwise_consumers(pointwise_producers(c, s, t)[0], s, t))
              for c in range(t)}
    assert len(groups) == min(s, t)


def test_pointwise_consumer_ranges_partition_range_t_exhaustive():
    # consumer ranges of all producers partition range(T) for every S, T in 1..50 (S <= T: disjoint ranges;
    # S > T: each producer feeds exactly one consumer and together they cover range(T))
    for s in range(1, 51):
        for t in range(1, 51):
            hit = [0] * t
            for p in range(s):
                lo, hi = pointwise_consumers(p, s, t)
                for c in range(lo, hi):
                    hit[c] += 1
            assert all(h >= 1 for h in hit), (s, t)
            if s <= t:
                assert hit == [1] * t, (s, t)
            producers_hit = [0] * s
            for c in range(t):
                lo, hi = pointwise_producers(c, s, t)
                for p in range(lo, hi):
                    producers_hit[p] += 1
            assert all(h >= 1 for h in producers_hit), (s, t)
            if s >= t:
                assert producers_hit == [1] * s, (s, t)


def test_inputs_of_3_to_7():
    topology = ExecutionTopology(make_job({"a": 3, "b": 7}, [("a", "b", "rescale")]))
    expected = {0: ["a#0"], 1: ["a#0"], 2: ["a#0"], 3: ["a#1"], 4: ["a#1"], 5: ["a#2"], 6: ["a#2"]}
    for index, producers in expected.items():
        assert reads(topology, f"b#{index}") == {0: producers}
    for index in range(3):
        assert topology.inputs_of(topology.subtask_id(f"a#{index}")) == []


def test_inputs_of_7_to_3():
    topology = ExecutionTopology(make_job({"a": 7, "b": 3}, [("a", "b", "pointwise")]))
    assert reads(topology, "b#0") == {0: ["a#0", "a#1"]}
    assert reads(topology, "b#1") == {0: ["a#2", "a#3"]}
    assert reads(topology, "b#2") == {0: ["a#4", "a#5", "a#6"]}


def test_inputs_of_all_to_all_and_multiple_edges():
    topology = ExecutionTopology(make_job(
        {"a": 2, "b": 3, "c": 3},
        [("a", "c", "broadcast"), ("b", "c", "forward"), ("b", "c", "hash")],
    ))
    assert reads(topology, "c#1") == {0: ["a#0", "a#1"], 1: ["b#1"], 2: ["b#0", "b#1", "b#2"]}


# ---- groups -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("distribution", ["hash", "rebalance", "broadcast"])
def test_all_to_all_is_one_group_at_10k(distribution):
    topology = ExecutionTopology(make_job({"src": 10_000, "dst": 10_000}, [("src", "dst", distribution)]))
    assert len(topology.groups) == 1
    group = topology.groups[0]
    assert group.producers == range(0, 10_000)
    assert group.consumers == range(10_000, 20_000)
    edge = topology.edges[0]
    assert (edge.group_lo, edge.group_hi) == (0, 1) and edge.all_to_all
    assert topology.subtask_count == 20_000
    # every consumer reads the same group object
    assert topology.consumed_group(edge, 0) is topology.consumed_group(edge, 9_999) is group
    assert topology.produced_group(edge, 17) is group
    assert topology.inputs_of(15_000)[0][1] == range(0, 10_000)


@pytest.mark.parametrize("s, t", [(10_000, 10_000), (10_000, 3), (3, 10_000), (6_000, 4_000), (1, 50), (50, 1)])
def test_pointwise_edge_has_min_s_t_groups(s, t):
    graph = make_job({"a": s, "b": t}, [("a", "b", "forward" if s == t else "rescale")])
    topology = ExecutionTopology(graph)
    assert len(topology.groups) == min(s, t)
    edge = topology.edges[0]
    assert edge.group_hi - edge.group_lo == min(s, t)
    # the groups partition both the producers and the consumers
    producers = sorted(p for g in topology.groups for p in g.producers)
    consumers = sorted(c for g in topology.groups for c in g.consumers)
    assert producers == list(range(s))
    assert consumers == list(range(s, s + t))


def test_group_counts_add_up_over_edges():
    graph = make_job(
        {"a": 1000, "b": 1000, "c": 300, "d": 5000},
        [("a", "b", "forward"), ("b", "c", "rescale"), ("c", "d", "rescale"), ("a", "d", "hash"),
         ("b", "d", "broadcast"), ("a", "c", "rebalance")],
    )
    topology = ExecutionTopology(graph)
    assert len(topology.groups) == 1000 + 300 + 300 + 1 + 1 + 1
    assert [(e.group_lo, e.group_hi) for e in topology.edges] == [
        (0, 1000), (1000, 1300), (1300, 1600), (1600, 1601), (1601, 1602), (1602, 1603)
    ]
    assert [g.index for g in topology.groups] == list(range(len(topology.groups)))
    for exec_edge in topology.edges:
        assert all(g.edge == exec_edge.index for g in topology.groups[exec_edge.group_lo:exec_edge.group_hi])


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 30), st.integers(1, 30))
def test_consumed_and_produced_group_agree_with_wiring(s, t):
    topology = ExecutionTopology(make_job({"a": s, "b": t}, [("a", "b", "rescale")]))
    edge = topology.edges[0]
    for c in range(t):
        group = topology.consumed_group(edge, c)
        assert s + c in group.consumers
        assert group.producers == range(*pointwise_producers(c, s, t))
    for p in range(s):
        group = topology.produced_group(edge, p)
        assert p in group.producers
        assert group.consumers == range(s + pointwise_consumers(p, s, t)[0], s + pointwise_consumers(p, s, t)[1])


# ---- subtask ids ---------------------------------------------------------------------------------------


def test_subtask_layout_follows_topological_order():
    graph = make_job({"sink": 2, "mid": 3, "src": 4}, [("src", "mid", "hash"), ("mid", "sink", "rebalance")])
    topology = ExecutionTopology(graph, "all-blocking")
    assert topology.vertex_names == ["src", "mid", "sink"]
    assert topology.parallelism == [4, 3, 2]
    assert topology.offsets == [0, 4, 7, 9]
    assert topology.subtask_count == 9
    assert topology.subtasks_of("mid") == range(4, 7)
    assert [topology.subtask_name(s) for s in range(9)] == [
        "src#0", "src#1", "src#2", "src#3", "mid#0", "mid#1", "mid#2", "sink#0", "sink#1"
    ]
    for s in range(9):
        assert topology.subtask_id(topology.subtask_name(s)) == s
    assert [topology.vertex_of(s) for s in range(9)] == [0, 0, 0, 0, 1, 1, 1, 2, 2]
    assert [e.index for e in topology.in_edges[2]] == [1]
    assert [e.index for e in topology.out_edges[0]] == [0]
    assert (topology.edges[0].src, topology.edges[0].dst) == (0, 1)


def test_topology_validates_the_graph():
    graph = make_job({"A": 2, "B": 3}, [("A", "B", "forward")])
    with pytest.raises(Exception) as info:
        ExecutionTopology(graph)
    assert "FORWARD" in str(info.value)


def test_gc_paused_restores_state():
    was = gc.isenabled()
    try:
        gc.enable()
        with gc_paused():
            assert not gc.isenabled()
        assert gc.isenabled()
        gc.disable()
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
        gc.enable()
        with pytest.raises(RuntimeError):
            with gc_paused():
                raise RuntimeError("boom")
        assert gc.isenabled()
    finally:
        (gc.enable if was else gc.disable)()
