"""Adaptive parallelism decided again when a unit is granted (`regionflow.core.adaptive.at_grant`,
`UnitLayout.at_grant`): from the slots the unit got and the bytes it reads, for a region that runs as
one unit and that nothing outside depends on. Pure: no Spark (the Spark run is in
tests/spark/test_run_adaptive.py)."""
import json

import pytest

from regionflow.core.adaptive import apply, at_grant, decided_plan, grant_time_blocker
from regionflow.core.errors import JobGraphError, SpecError
from regionflow.core.graph import JobGraph
from regionflow.core.jobspec import graph_from_spec
from regionflow.core.plan import Plan
from regionflow.plan_document import plan_document
from regionflow.units.layout import UnitLayout


def job(target=None, consumer=(1, 8), tail="rebalance", tail_parallelism=3) -> JobGraph:
    graph = JobGraph("regrant")
    graph.add_vertex("scan", 2, fn="m:f")
    graph.add_vertex("agg", consumer, fn="m:g", target_bytes_per_subtask=target)
    graph.add_vertex("out", tail_parallelism, fn="m:h", slot_sharing_group="tail")
    graph.connect("scan", "agg", "hash", keys=["k"])
    graph.connect("agg", "out", tail)
    return graph.validate()


def agg_region(plan) -> int:
    return next(logical.index for logical in plan.region_set.logical
                if "agg" in [plan.topology.vertex_names[v] for v in logical.vertices])


@pytest.mark.parametrize("slots, expected", [(8, 8), (5, 5), (2, 2), (1, 1)])
def test_a_blocking_region_runs_at_the_slots_it_was_granted(slots, expected):
    plan = decided_plan(job(), 8, "all-blocking")
    decision = at_grant(plan, agg_region(plan), 1, slots)
    assert decision.values == {"agg": expected} and decision.changed == (expected != 8)
    assert decision.plan.graph.vertices["agg"].parallelism == expected
    assert decision.plan.topology.subtask_count == 2 + expected + 3
    assert f"agg={expected} for {slots} granted slot(s)" in decision.reason


def test_the_bytes_read_cap_the_value_and_never_below_min():
    plan = decided_plan(job(target=1000, consumer=(2, 8)), 8, "all-blocking")
    region = agg_region(plan)
    assert at_grant(plan, region, 1, 8, input_bytes=2500).values == {"agg": 3}  # ceil(2500 / 1000)
    assert at_grant(plan, region, 1, 8, input_bytes=10).values == {"agg": 2}  # min
    assert at_grant(plan, region, 1, 8, input_bytes=10 ** 9).values == {"agg": 8}  # max
    assert at_grant(plan, region, 1, 4, input_bytes=10 ** 9).values == {"agg": 4}  # the grant
    unchanged = at_grant(plan, region, 1, 8, input_bytes=None)  # reads no partition: slots only
    assert unchanged.values == {"agg": 8} and not unchanged.changed and unchanged.plan is plan


def test_in_a_pipelined_region_the_fixed_vertices_slots_count_and_do_not_shrink_it_below_need():
    plan = decided_plan(job(), 8, "all-pipelined")  # one region: scan 2 + agg + out 3 (own group)
    assert plan.graph.vertices["agg"].parallelism == 4
    assert at_grant(plan, 0, 1, 5).values == {"agg": 2}  # agg 2 + out 3 fits 5 slots
    assert at_grant(plan, 0, 1, 2).values == {"agg": 2}  # out alone needs 3: agg is not halved for nothing


def test_values_that_would_move_another_unit_keep_the_planned_ones():
    # v0 -RESCALE, pipelined-> v1 is one logical region of pointwise regions; at v1=1 they become one
    # region and the run's units come in another order (v3's after v2's). Rows are routed and commits
    # kept by unit position, so that value is refused; one that moves nothing (v1=2) is taken.
    graph = JobGraph("moves")
    for name, parallelism in [("v0", 3), ("v1", (1, 4)), ("v2", 4), ("v3", (1, 2)), ("v4", (1, 4))]:
        graph.add_vertex(name, parallelism, fn="m:f")
    graph.connect("v0", "v1", "rescale", "pipelined")
    graph.connect("v1", "v2", "broadcast", "blocking")
    graph.connect("v0", "v3", "rescale", "blocking")
    graph.connect("v2", "v4", "rebalance", "blocking")
    plan = decided_plan(graph.validate(), 8)
    assert [plan.topology.vertex_names[v] for v in plan.region_set.logical[0].vertices] == ["v0", "v1"]
    moved = Plan(apply(plan.graph, {"v1": 1}), plan.mode)
    assert [s.logical for s in moved.shards(1)] != [s.logical for s in plan.shards(1)]  # what the guard sees
    refused = at_grant(plan, 0, 1, 1)
    assert refused.values == {"v1": 4} and not refused.changed and refused.plan is plan
    assert "v1=1 for 1 granted slot(s)" in refused.reason
    assert "would move or rename another unit of the run" in refused.reason
    taken = at_grant(plan, 0, 1, 2)
    assert taken.values == {"v1": 2} and taken.changed
    assert [s.logical for s in taken.plan.shards(1)] == [s.logical for s in plan.shards(1)]


def test_what_keeps_the_planned_value_is_named():
    blocking = decided_plan(job(), 8, "all-blocking")
    region = agg_region(blocking)
    assert grant_time_blocker(blocking, region, 1) is None
    assert "several shards" in grant_time_blocker(blocking, region, 4)
    kept = at_grant(blocking, region, 4, 2)
    assert kept.values == {"agg": 8} and not kept.changed and kept.reason.startswith("planned values kept")
    assert "no adaptive vertex" in grant_time_blocker(blocking, 0, 1)
    pointwise = decided_plan(job(tail="rescale"), 8, "all-blocking")
    assert "edge agg -RESCALE-> out wires it pointwise" in grant_time_blocker(pointwise, agg_region(pointwise), 1)


def test_a_new_layout_changes_only_the_granted_unit_which_keeps_its_key():
    layout = UnitLayout(decided_plan(job(), 8, "all-blocking"), 1)
    unit = layout.units_of_logical(agg_region(layout.plan))[0]
    regranted, at, decision = layout.at_grant(unit, 2, None)
    assert decision.changed and regranted is not layout and at == unit
    assert [k for i, k in enumerate(regranted.keys) if i != at] == [k for i, k in enumerate(layout.keys) if i != unit]
    assert len(regranted.shards[at].regions) == 2 and len(layout.shards[unit].regions) == 8
    same, same_at, kept = layout.at_grant(unit, 8, None)
    assert (same, same_at, kept.changed) == (layout, unit, False)


def test_the_plan_json_says_which_vertices_are_decided_at_grant():
    document = plan_document(decided_plan(job(target=4096), 8, "all-blocking"), max_shards=1)
    assert document["adaptive_parallelism"] == {"agg": {"declared": [1, 8], "decided": 8,
                                                        "target_bytes_per_subtask": 4096, "at_grant": True}}
    sharded = plan_document(decided_plan(job(), 8, "all-blocking"), max_shards=16)
    assert "several shards" in sharded["adaptive_parallelism"]["agg"]["at_grant"]


def test_a_bytes_target_needs_an_adaptive_vertex_and_a_positive_number():
    with pytest.raises(JobGraphError, match="vertex 'agg': target_bytes_per_subtask is given but parallelism "
                                            "is 3, a fixed number; declare parallelism as \\[min, max\\]"):
        job(target=1000, consumer=3)
    spec = {"vertices": [{"id": "a", "parallelism": [1, 4], "fn": "m:f", "target_bytes_per_subtask": 0}]}
    with pytest.raises(SpecError, match="target_bytes_per_subtask"):
        graph_from_spec(spec)
    spec["vertices"][0]["target_bytes_per_subtask"] = 1 << 20
    graph = graph_from_spec(json.loads(json.dumps(spec)))
    assert graph.vertices["a"].target_bytes_per_subtask == 1 << 20
    assert graph_from_spec(graph.to_spec()).vertices["a"].target_bytes_per_subtask == 1 << 20
