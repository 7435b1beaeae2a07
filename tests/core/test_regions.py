"""Pipelined regions: FLIP-119 example, execution regions, cycle merge, readiness wiring, order."""
from __future__ import annotations

from pathlib import Path

import core_jobs
import pytest

from regionflow.core.graph import load_job
from regionflow.core.modes import ExchangeMode
from regionflow.core.plan import Plan
from regionflow.core.region_graph import tarjan_components
from regionflow.core.regions import build_regions
from regionflow.core.topology import ExecutionTopology

JOBS = Path(__file__).resolve().parents[2] / "examples" / "jobs"
MODES = [m.value for m in ExchangeMode]


def make_job(vertices, edges=(), name="r"):
    return core_jobs.make_job(vertices, edges, name)


def region_sets(plan):
    return {frozenset(plan.subtask_names(region)) for region in plan.regions}


def region_index_by_name(plan):
    return {name: region.index for region in plan.regions for name in plan.subtask_names(region)}


def logical_sets(plan):
    names = plan.topology.vertex_names
    return {frozenset(names[v] for v in logical.vertices) for logical in plan.region_set.logical}


def check_order(plan):
    """Every blocking input's producer region is scheduled no later than its consumer region."""
    topology = plan.topology
    region_of = plan.region_set.region_of
    for consumer in range(topology.subtask_count):
        for exec_edge, producers in topology.inputs_of(consumer):
            if exec_edge.blocking:
                for producer in producers:
                    assert region_of[producer] <= region_of[consumer]


def singles(vertex, parallelism):
    return {frozenset([f"{vertex}#{i}"]) for i in range(parallelism)}


# ---- FLIP-119 example -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def flip119():
    return load_job(str(JOBS / "flip119.json"))


FLIP119 = {
    "all-blocking": (
        singles("A", 2) | singles("B", 2) | singles("C", 4) | singles("D", 4),
        {frozenset("A"), frozenset("B"), frozenset("C"), frozenset("D")},
        3,
    ),
    "forward-pipelined-only": (
        {frozenset({"A#0", "B#0"}), frozenset({"A#1", "B#1"})} | singles("C", 4) | singles("D", 4),
        {frozenset("AB"), frozenset("C"), frozenset("D")},
        2,
    ),
    "pointwise-pipelined-only": (
        {frozenset({"A#0", "B#0", "C#0", "C#1"}), frozenset({"A#1", "B#1", "C#2", "C#3"})} | singles("D", 4),
        {frozenset("ABC"), frozenset("D")},
        1,
    ),
    "all-pipelined": (
        {frozenset({"A#0", "A#1", "B#0", "B#1", "C#0", "C#1", "C#2", "C#3", "D#0", "D#1", "D#2", "D#3"})},
        {frozenset("ABCD")},
        0,
    ),
}


@pytest.mark.parametrize("mode", list(FLIP119))
def test_flip119_regions(flip119, mode):
    plan = Plan(flip119, mode)
    regions, logical, blocking = FLIP119[mode]
    assert region_sets(plan) == regions
    assert len(plan.regions) == len(regions)
    assert logical_sets(plan) == logical
    assert len(plan.blocking_edges) == blocking
    assert [r.index for r in plan.regions] == list(range(len(plan.regions)))
    check_order(plan)


def test_flip119_default_mode_is_forward_pipelined_only(flip119):
    assert region_sets(Plan(flip119)) == FLIP119["forward-pipelined-only"][0]


def test_flip119_all_blocking_readiness_wiring(flip119):
    plan = Plan(flip119, "all-blocking")
    region_set = plan.region_set
    index = region_index_by_name(plan)
    c_regions = sorted(index[f"C#{i}"] for i in range(4))
    d_regions = sorted(index[f"D#{i}"] for i in range(4))
    for d in range(4):
        region = plan.regions[index[f"D#{d}"]]
        assert len(region.consumed) == 1
        group, also_produces = region.consumed[0]
        assert also_produces is False
        assert sorted(region_set.group_producers[group]) == c_regions
        assert sorted(region_set.group_consumers[group]) == d_regions
        assert plan.topology.groups[group].edge == 2
        assert max(c_regions) < region.index
    # A regions read nothing; B#i reads the forward group of A#i; C#0, C#1 read B#0; C#2, C#3 read B#1
    for a in range(2):
        assert len(plan.regions[index[f"A#{a}"]].consumed) == 0
    for b in range(2):
        (group, _), = plan.regions[index[f"B#{b}"]].consumed
        assert region_set.group_producers[group] == [index[f"A#{b}"]]
        assert region_set.group_consumers[group] == [index[f"B#{b}"]]
    for c, b in [(0, 0), (1, 0), (2, 1), (3, 1)]:
        (group, _), = plan.regions[index[f"C#{c}"]].consumed
        assert region_set.group_producers[group] == [index[f"B#{b}"]]
        assert sorted(region_set.group_consumers[group]) == sorted([index[f"C#{2 * b}"], index[f"C#{2 * b + 1}"]])
    # schedule order: each A before its B before its Cs before every D
    for a in range(2):
        assert index[f"A#{a}"] < index[f"B#{a}"] < index[f"C#{2 * a}"] < min(d_regions)
    assert region_set.internal_groups == {}
    check_order(plan)


def test_flip119_pointwise_readiness(flip119):
    plan = Plan(flip119, "pointwise-pipelined-only")
    index = region_index_by_name(plan)
    region = plan.regions[index["D#2"]]
    (group, also), = region.consumed
    assert not also
    assert sorted(plan.region_set.group_producers[group]) == sorted({index["C#0"], index["C#2"]})
    assert plan.regions[index["A#0"]].consumed == () or plan.regions[index["A#0"]].consumed == []


def test_region_of_subtask_and_members_sorted(flip119):
    plan = Plan(flip119, "pointwise-pipelined-only")
    for region in plan.regions:
        assert list(region.members) == sorted(region.members)  # a list, or a range (one subtask, or a whole region)
        assert len(region) == len(region.members)
        for subtask in region.members:
            assert plan.region_set.region_of_subtask(subtask) is region
    assert len(plan.region_set) == 6
    assert list(plan.region_set) == plan.regions


# ---- cycle merge -----------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_cyclic_merge_example(mode):
    plan = Plan(load_job(str(JOBS / "cyclic_merge.json")), mode)
    assert region_sets(plan) == {frozenset({"v1#0", "v2#0", "v3#0", "v4#0"})}
    assert logical_sets(plan) == {frozenset({"v1", "v2", "v3", "v4"})}
    assert len(plan.region_set.logical) == 1


def test_cyclic_merge_built_in_code():
    graph = make_job(
        {"v1": 1, "v2": 1, "v3": 1, "v4": 1},
        [("v1", "v2", "forward", "blocking"), ("v2", "v4", "forward", "blocking"),
         ("v1", "v3", "forward", "pipelined"), ("v3", "v4", "forward", "pipelined")],
    )
    plan = Plan(graph, "all-blocking")
    assert len(plan.regions) == 1 and len(plan.region_set.logical) == 1
    assert plan.slots(plan.regions[0]) == 1  # all four share one slot
    # the blocking groups are now internal to the one region
    assert set(plan.region_set.internal_groups.values()) == {0}
    assert plan.regions[0].consumed in ((), [])


@pytest.mark.parametrize("mode", MODES)
def test_pipelined_and_blocking_edge_on_same_pair_is_one_region(mode):
    graph = make_job({"A": 3, "B": 3}, [("A", "B", "forward", "pipelined"), ("A", "B", "hash", "blocking")])
    plan = Plan(graph, mode)
    assert region_sets(plan) == {frozenset({"A#0", "A#1", "A#2", "B#0", "B#1", "B#2"})}
    assert len(plan.region_set.logical) == 1
    assert plan.min_slots == 3


def test_cycle_merge_across_logical_regions_with_pointwise_wiring():
    # A_i-C_i pipelined; A -> B -> C blocking forward: each {A_i, B_i, C_i} is its own cycle
    graph = make_job({"A": 2, "B": 2, "C": 2},
                     [("A", "C", "forward", "pipelined"), ("A", "B", "forward", "blocking"),
                      ("B", "C", "forward", "blocking")])
    plan = Plan(graph, "all-blocking")
    assert region_sets(plan) == {frozenset({"A#0", "B#0", "C#0"}), frozenset({"A#1", "B#1", "C#1"})}
    assert logical_sets(plan) == {frozenset("ABC")}
    check_order(plan)


def test_no_merge_without_cycle():
    # A_i-C_i pipelined; A -> B blocking only: no cycle, B stays apart
    graph = make_job({"A": 2, "B": 2, "C": 2},
                     [("A", "C", "forward", "pipelined"), ("A", "B", "forward", "blocking")])
    plan = Plan(graph, "all-blocking")
    assert region_sets(plan) == {frozenset({"A#0", "C#0"}), frozenset({"A#1", "C#1"})} | singles("B", 2)
    assert logical_sets(plan) == {frozenset("AC"), frozenset("B")}
    check_order(plan)


def _staircase(n):
    """A_i-B_i pipelined; A -> X(n+1) -> B blocking rescale makes region i feed region i+1 (a chain of n),
    and a blocking hash A -> B closes every region into one cycle."""
    return make_job(
        {"A": n, "X": n + 1, "B": n},
        [("A", "B", "forward", "pipelined"), ("A", "X", "rescale", "blocking"),
         ("X", "B", "rescale", "blocking"), ("A", "B", "hash", "blocking")],
    )


def test_staircase_chain_without_closing_edge_keeps_order():
    n = 50
    graph = make_job(
        {"A": n, "X": n + 1, "B": n},
        [("A", "B", "forward", "pipelined"), ("A", "X", "rescale", "blocking"), ("X", "B", "rescale", "blocking")],
    )
    plan = Plan(graph, "all-blocking")
    # A#0 -> X#0 -> B#0 and A#(n-1) -> X#n -> B#(n-1) close two small cycles; the rest is a chain
    sets = region_sets(plan)
    assert len(sets) == 2 * n - 1
    assert frozenset({"A#0", "B#0", "X#0"}) in sets
    assert frozenset({f"A#{n - 1}", f"B#{n - 1}", f"X#{n}"}) in sets
    assert all(frozenset({f"A#{i}", f"B#{i}"}) in sets for i in range(1, n - 1))
    index = region_index_by_name(plan)
    assert all(index[f"A#{i}"] < index[f"A#{i + 1}"] for i in range(n - 1))
    check_order(plan)


def test_large_cycle_merge_is_iterative():
    n = 2500
    plan = Plan(_staircase(n), "all-blocking")
    assert len(plan.regions) == 1
    assert len(plan.regions[0].members) == 3 * n + 1
    assert len(plan.region_set.logical) == 1
    assert plan.min_slots == n + 1


def test_tarjan_deep_chain_is_iterative():
    # region i -> group i -> region i+1, and the last group feeds region 0: one SCC of 20k regions
    n = 20_000
    producers = [[i] for i in range(n)]
    consumers = [[i + 1] for i in range(n - 1)] + [[0]]
    components = tarjan_components(n, producers, consumers)
    assert len(components) == 1 and sorted(components[0]) == list(range(n))
    # open chain: n components in topological order
    components = tarjan_components(n, producers[:-1], consumers[:-1])
    assert components == [[i] for i in range(n)]


# ---- execution regions -----------------------------------------------------------------------------


def test_pipelined_all_to_all_logical_region_is_one_execution_region():
    plan = Plan(make_job({"A": 3, "B": 2}, [("A", "B", "hash", "pipelined")]))
    assert region_sets(plan) == {frozenset({"A#0", "A#1", "A#2", "B#0", "B#1"})}
    assert plan.min_slots == 3


def test_pipelined_all_to_all_pulls_in_pointwise_neighbours():
    plan = Plan(make_job({"A": 2, "B": 2, "C": 3},
                         [("A", "B", "forward", "pipelined"), ("B", "C", "rebalance", "pipelined")]))
    assert len(plan.regions) == 1 and len(plan.regions[0]) == 7


def test_pointwise_only_logical_region_is_split():
    plan = Plan(make_job({"A": 3, "B": 2}, [("A", "B", "rescale", "pipelined")]))
    assert region_sets(plan) == {frozenset({"A#0", "B#0"}), frozenset({"A#1", "A#2", "B#1"})}
    assert logical_sets(plan) == {frozenset("AB")}
    assert len(plan.region_set.logical[0].regions) == 2


def test_pointwise_chain_split():
    plan = Plan(make_job({"A": 4, "B": 2, "C": 4},
                         [("A", "B", "rescale", "pipelined"), ("B", "C", "rescale", "pipelined")]))
    assert region_sets(plan) == {
        frozenset({"A#0", "A#1", "B#0", "C#0", "C#1"}),
        frozenset({"A#2", "A#3", "B#1", "C#2", "C#3"}),
    }


def test_pointwise_split_with_blocking_all_to_all_inside_logical_region():
    # A-B pipelined forward and B-C pipelined forward; A -> C blocking hash inside the same logical region:
    # every {A_i,B_i,C_i} produces into and reads the hash group, so they all merge
    plan = Plan(make_job({"A": 2, "B": 2, "C": 2},
                         [("A", "B", "forward", "pipelined"), ("B", "C", "forward", "pipelined"),
                          ("A", "C", "hash", "blocking")]))
    assert len(plan.regions) == 1


def test_two_pointwise_logical_regions_keep_own_numbering():
    plan = Plan(make_job({"A": 2, "B": 2, "C": 3, "D": 3},
                         [("A", "B", "forward"), ("B", "C", "hash"), ("C", "D", "forward")]))
    assert region_sets(plan) == {
        frozenset({"A#0", "B#0"}), frozenset({"A#1", "B#1"}),
        frozenset({"C#0", "D#0"}), frozenset({"C#1", "D#1"}), frozenset({"C#2", "D#2"}),
    }
    for logical in plan.region_set.logical:
        for r in logical.regions:
            assert plan.regions[r].logical == logical.index
    names = [plan.region_name(r) for r in plan.regions]
    assert sorted(names) == ["A+B[0]", "A+B[1]", "C+D[0]", "C+D[1]", "C+D[2]"]
    check_order(plan)
    index = region_index_by_name(plan)
    assert max(index["B#0"], index["B#1"]) < min(index[f"C#{i}"] for i in range(3))


def test_independent_vertices():
    plan = Plan(make_job({"A": 2, "B": 1}))
    assert region_sets(plan) == singles("A", 2) | singles("B", 1)
    assert logical_sets(plan) == {frozenset("A"), frozenset("B")}


def test_build_regions_direct():
    topology = ExecutionTopology(make_job({"A": 2, "B": 2}, [("A", "B", "forward")]), "all-blocking")
    region_set = build_regions(topology)
    assert len(region_set) == 4
    assert sorted(len(r) for r in region_set) == [1, 1, 1, 1]


def test_large_all_to_all_blocking_regions_are_cheap():
    n = 10_000
    plan = Plan(make_job({"src": n, "dst": n}, [("src", "dst", "hash")]), "all-blocking")
    assert len(plan.regions) == 2 * n
    assert len(plan.topology.groups) == 1
    (group, _), = plan.regions[-1].consumed
    assert len(plan.region_set.group_producers[group]) == n
    assert len(plan.region_set.group_consumers[group]) == n
    assert all(not r.consumed for r in plan.regions[:n])
    assert plan.min_slots == 1
    plan = Plan(make_job({"src": n, "dst": n}, [("src", "dst", "hash")]), "all-pipelined")
    assert len(plan.regions) == 1 and plan.min_slots == n
