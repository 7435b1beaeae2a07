"""The per-run decision of an adaptive region cut into several shards (`regionflow.core.run_decision`): which
regions it serves (and, for the others, one line saying why not), and the rule: bytes over the declared target,
clamped to the range, the shard count that follows, the same answer for the same inputs. Pure; the Airflow
run is in tests/airflow/test_e2e_session.py (`adaptive_per_run`)."""
import pytest

from regionflow.core.adaptive import apply, decided_plan
from regionflow.core.graph import JobGraph
from regionflow.core.plan import Plan
from regionflow.core.run_decision import for_run, run_time_blocker

MIB = 1 << 20


def job(consumer=(1, 8), distribution="hash", target=MIB, out=None) -> JobGraph:
    graph = JobGraph("per_run")
    graph.add_vertex("scan", 2, fn="m:f")
    graph.add_vertex("agg", consumer, fn="m:g", target_bytes_per_subtask=target)
    graph.connect("scan", "agg", distribution, "blocking", **({"keys": ["k"]} if distribution == "hash" else {}))
    if out:
        graph.add_vertex("out", 3, fn="m:h")
        graph.connect("agg", "out", out, "blocking")
    return graph.validate()


def fixed_member_fed_per_unit() -> JobGraph:
    """agg [1, 8] wired pipelined (RESCALE) to post, fixed at 4, which also reads scan2 through a blocking HASH
    edge: that edge goes into a vertex that is not adaptive, so it is stored per consumer unit."""
    graph = JobGraph("per_unit_member")
    graph.add_vertex("scan", 2, fn="m:f")
    graph.add_vertex("scan2", 2, fn="m:f")
    graph.add_vertex("agg", (1, 8), fn="m:g", target_bytes_per_subtask=MIB)
    graph.add_vertex("post", 4, fn="m:h")
    graph.connect("scan", "agg", "hash", "blocking", keys=["k"])
    graph.connect("agg", "post", "rescale", "pipelined")
    graph.connect("scan2", "post", "hash", "blocking", keys=["k"])
    return graph.validate()


def adaptive_source() -> JobGraph:
    graph = JobGraph("adaptive_source")
    graph.add_vertex("agg", (1, 8), fn="m:g")
    graph.add_vertex("out", 2, fn="m:h")
    graph.connect("agg", "out", "hash", "blocking", keys=["k"])
    return graph.validate()


def agg_region(plan: Plan) -> int:
    return next(lr.index for lr in plan.region_set.logical
                if plan.topology.vertex_names[lr.vertices[0]] == "agg")


@pytest.mark.parametrize(("read", "value"), [(1, 1), (MIB, 1), (2 * MIB, 2), (6 * MIB - 1, 6), (40 * MIB, 8)])
def test_the_value_is_the_bytes_over_the_target_clamped_to_the_range_and_the_shards_follow(read, value):
    plan = decided_plan(job(), 2, "all-blocking")  # planned at the cluster's 2 slots
    logical = agg_region(plan)
    assert run_time_blocker(plan, logical, 8) is None
    decision = for_run(plan, logical, 8, cluster_slots=2, host_slots=2, input_bytes=read)
    assert decision.values == {"agg": value}
    assert decision.shards == value  # one pipelined region per subtask, at most max_shards
    assert f"agg={value}" in decision.reason and f"{value} shard(s)" in decision.reason
    # the same inputs give the same answer (a cleared run decides again)
    assert for_run(plan, logical, 8, 2, 2, read) == decision


def test_more_subtasks_than_max_shards_keep_max_shards_shards():
    plan = decided_plan(job(consumer=(1, 16)), 2, "all-blocking")
    decision = for_run(plan, agg_region(plan), 4, 2, 2, 12 * MIB)
    assert decision.values == {"agg": 12} and decision.shards == 4
    shards = [s for s in Plan(apply(plan.graph, decision.values), plan.mode).shards(4) if s.logical == 1]
    assert [len(s.regions) for s in shards] == [3, 3, 3, 3]


def test_without_a_byte_target_the_value_is_the_clusters_slots():
    plan = decided_plan(job(target=None), 2, "all-blocking")
    decision = for_run(plan, agg_region(plan), 8, cluster_slots=5, host_slots=2, input_bytes=100 * MIB)
    assert decision.values == {"agg": 5} and decision.shards == 5


def test_the_other_units_keep_their_names_downstream_included():
    plan = decided_plan(job(out="rebalance"), 2, "all-blocking")
    decision = for_run(plan, agg_region(plan), 8, 2, 2, 7 * MIB)
    assert decision.values == {"agg": 7}
    after = Plan(apply(plan.graph, decision.values), plan.mode)
    names = [after.shard_name(s) for s in after.shards(8) if s.logical != agg_region(after)]
    assert names == [plan.shard_name(s) for s in plan.shards(8) if s.logical != agg_region(plan)]


@pytest.mark.parametrize(("graph", "max_shards", "why"), [
    (job(consumer=4, target=None), 8, "no adaptive vertex"),
    (job(), 1, "runs as one shard"),
    (job(consumer=(1, 1)), 8, "runs as one shard"),
    (job(distribution="rescale"), 8, "edge scan -RESCALE-> agg"),
    (fixed_member_fed_per_unit(), 8, "edge scan2 -HASH-> post [blocking] into it is stored per consumer unit"),
    (adaptive_source(), 8, "reads no blocking partition"),
])
def test_a_region_that_cannot_be_decided_per_run_says_why(graph, max_shards, why):
    plan = decided_plan(graph, 2, "all-blocking")
    blocker = run_time_blocker(plan, agg_region(plan), max_shards)
    assert blocker is not None and why in blocker, blocker
