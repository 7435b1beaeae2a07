"""Adaptive parallelism (regionflow.core.adaptive): ``parallelism=(min, max)`` decided from the slots."""
import json

import pytest

from regionflow.core.adaptive import apply, decide, decided
from regionflow.core.errors import JobGraphError
from regionflow.core.graph import JobGraph
from regionflow.core.jobspec import graph_from_spec
from regionflow.core.plan import Plan
from regionflow.plan_document import plan_document


def job(scan=(2, 8), agg=(2, 8), agg_group=None) -> JobGraph:
    graph = JobGraph("adaptive")
    graph.add_vertex("scan", scan, fn="m:f")
    graph.add_vertex("agg", agg, fn="m:g", slot_sharing_group=agg_group)
    graph.connect("scan", "agg", "hash", keys=["k"])
    return graph.validate()


@pytest.mark.parametrize("slots, expected", [(1, 2), (2, 2), (5, 5), (8, 8), (64, 8)])
def test_the_value_is_the_clusters_slots_within_min_and_max(slots, expected):
    graph, decisions = decide(job(), slots, "all-pipelined")
    assert decisions == {"scan": expected, "agg": expected} == decided(graph)
    assert Plan(graph, "all-pipelined").topology.subtask_count == 2 * expected


def test_fixed_vertices_keep_their_parallelism_and_a_job_without_ranges_is_unchanged():
    graph, decisions = decide(job(agg=3), 6, "all-blocking")
    assert decisions == {"scan": 6} and graph.vertices["agg"].parallelism == 3
    fixed = job(scan=4, agg=4)
    assert decide(fixed, 6) == (fixed, {})


def test_slot_sharing_groups_that_add_up_halve_the_target_until_each_region_fits():
    graph, decisions = decide(job(agg_group="own"), 8, "all-pipelined")
    assert decisions == {"scan": 4, "agg": 4}  # 8 + 8 slots would not fit 8; 4 + 4 does
    assert max(Plan(graph, "all-pipelined").slots(r) for r in Plan(graph, "all-pipelined").regions) == 8


def test_forward_needs_the_same_declaration_on_both_ends():
    graph = JobGraph("f")
    graph.add_vertex("a", (2, 8), fn="m:f")
    graph.add_vertex("b", (2, 8), fn="m:f")
    graph.connect("a", "b", "forward")
    decided_graph, decisions = decide(graph.validate(), 3)
    assert decisions == {"a": 3, "b": 3}
    mixed = JobGraph("m")
    mixed.add_vertex("a", (2, 8), fn="m:f")
    mixed.add_vertex("b", 4, fn="m:f")
    mixed.connect("a", "b", "forward")
    differ = r"FORWARD but the parallelisms differ \(\[2, 8\] vs 4\).*same \[min, max\]"
    with pytest.raises(JobGraphError, match=differ):
        mixed.validate()


def test_the_json_spec_declares_min_and_max_and_round_trips():
    spec = {"name": "s", "vertices": [{"id": "a", "parallelism": [2, 8], "fn": "m:f"}]}
    graph = graph_from_spec(spec)
    assert graph.vertices["a"].parallelism_range == (2, 8) and graph.to_spec()["vertices"][0]["parallelism"] == [2, 8]
    with pytest.raises(Exception, match=r"vertices\[0\].*parallelism = \[8, 2\]: min 8 is above max 2"):
        graph_from_spec({"vertices": [{"id": "a", "parallelism": [8, 2]}]})


def test_a_plan_reference_carries_the_decisions_and_rebuilds_the_same_plan():
    graph, _ = decide(job(), 5, "all-pipelined")
    plan = Plan(graph, "all-pipelined")
    reference = json.loads(json.dumps(plan.reference))
    assert reference["parallelism"] == {"scan": 5, "agg": 5}
    again = Plan.from_reference(reference)
    assert again.topology.subtask_count == plan.topology.subtask_count == 10
    document = plan_document(plan)
    assert document["adaptive_parallelism"] == {"scan": {"declared": [2, 8], "decided": 5, "at_grant": True},
                                                "agg": {"declared": [2, 8], "decided": 5, "at_grant": True}}


def test_applying_a_value_outside_the_declaration_names_the_vertex():
    outside = r"vertex 'scan': parallelism 9 was decided for it, but it declares \(2, 8\)"
    with pytest.raises(JobGraphError, match=outside):
        apply(job(), {"scan": 9})


def test_the_decided_plan_is_the_one_the_decision_built(monkeypatch):
    """DAG parse and `regionflow run` take the plan the decision built instead of planning again."""
    from regionflow.core import plan as plan_module
    from regionflow.core.adaptive import decided_plan

    built = []
    real = plan_module.Plan.__init__

    def counting(self, *args, **kwargs):
        built.append(1)
        real(self, *args, **kwargs)

    monkeypatch.setattr(plan_module.Plan, "__init__", counting)
    plan = decided_plan(job(), 5, "all-pipelined")
    assert decided(plan.graph) == {"scan": 5, "agg": 5} and len(built) == 1
    assert decided_plan(job(scan=4, agg=4), 5).graph.vertices["scan"].parallelism == 4 and len(built) == 2
