"""Key groups (`regionflow.core.keygroups`): the ranges every parallelism reads cover the key groups exactly
once, a unit's range is the union of its subtasks', and which edges are key-grouped depends on the declared
ranges only, never on a decided value. Pure: the Spark run is in tests/spark/test_run_adaptive.py."""
import pytest
from hypothesis import given
from hypothesis import strategies as st
from random_graphs import SETTINGS, F, random_jobs

from regionflow.core.adaptive import apply, decided_plan
from regionflow.core.graph import JobGraph
from regionflow.core.keygroups import key_group_range, key_grouped_edges
from regionflow.core.plan import Plan
from regionflow.plan_document import plan_document
from regionflow.spark.driver.exchange import Span, key_groups_read, share_of_bytes


@pytest.mark.parametrize("key_groups", [1, 6, 8, 13])
def test_every_parallelism_up_to_k_reads_each_key_group_once_in_subtask_order(key_groups):
    for parallelism in range(1, key_groups + 1):
        ranges = [key_group_range(i, i + 1, parallelism, key_groups) for i in range(parallelism)]
        assert [g for r in ranges for g in r] == list(range(key_groups))
        assert all(len(r) >= 1 for r in ranges)  # no subtask idle: p <= K
        assert max(map(len, ranges)) - min(map(len, ranges)) <= 1  # as even as integers allow
        for subtask, read in enumerate(ranges):  # Flink's operator index of a key group: kg * p // K
            assert all(g * parallelism // key_groups == subtask for g in read)


def test_a_run_of_subtasks_reads_the_union_of_their_ranges():
    assert key_group_range(0, 2, 6, 8) == range(0, 3)  # subtasks 0 and 1 of 6: key groups 0-1 and 2
    assert key_group_range(2, 6, 6, 8) == range(3, 8)
    assert key_group_range(0, 6, 6, 8) == range(0, 8)


@pytest.mark.parametrize("size", [0, 7, 1000, 360 * 1024 + 3])
def test_the_bytes_counted_for_the_units_of_any_parallelism_add_up_to_the_dataset(size):
    """A key-grouped dataset is one directory of rows sorted by key group: a unit is counted its key groups'
    share of its bytes, and the units of one parallelism are counted the dataset's bytes exactly once."""
    for parallelism in range(1, 9):
        shares = [share_of_bytes(size, key_groups_read(Span(i, i + 1), parallelism, 8), 8)
                  for i in range(parallelism)]
        assert sum(shares) == size and all(share >= 0 for share in shares)
        assert max(shares) - min(shares) <= size // 8 + 1  # as even as the key groups
    assert key_groups_read(Span(0, 2), 4, None) is None  # not key-grouped: no range


def test_more_subtasks_than_key_groups_is_refused_naming_both():
    with pytest.raises(ValueError, match=r"subtasks \[0, 9\) of 9 cannot read 8 key groups"):
        key_group_range(0, 9, 9, 8)


def job(consumer=(1, 8), distribution="hash", tail=None) -> JobGraph:
    graph = JobGraph("groups")
    graph.add_vertex("scan", 2, fn="m:f")
    graph.add_vertex("agg", consumer, fn="m:g")
    keys = {"keys": ["k"]} if distribution == "hash" else {}
    graph.connect("scan", "agg", distribution, "blocking" if tail else None, **keys)
    if tail:
        graph.add_vertex("out", 3, fn="m:h")
        graph.connect("agg", "out", tail, "pipelined")
    return graph.validate()


def edge_into_agg(plan) -> int:
    return next(e.index for e in plan.topology.edges if plan.topology.vertex_names[e.dst] == "agg")


def test_a_blocking_hash_edge_into_an_adaptive_region_of_several_shards_has_k_equal_to_the_declared_max():
    plan = decided_plan(job(), 4, "all-blocking")
    assert plan.graph.vertices["agg"].parallelism == 4
    assert key_grouped_edges(plan, 8) == {edge_into_agg(plan): 8}
    assert key_grouped_edges(plan, 2) == {edge_into_agg(plan): 8}
    # planned at 1 (a one-slot cluster), the region is still cut into shards at its max: the same answer
    assert key_grouped_edges(decided_plan(job(), 1, "all-blocking"), 8) == {edge_into_agg(plan): 8}
    # a pointwise pipelined tail keeps a region per subtask pair: several shards too
    pointwise = decided_plan(job(tail="rescale"), 4, "all-blocking")
    assert key_grouped_edges(pointwise, 8) == {edge_into_agg(pointwise): 8}


def test_a_rebalance_edge_is_key_grouped_like_a_hash_edge():
    plan = decided_plan(job(distribution="rebalance"), 4, "all-blocking")
    assert key_grouped_edges(plan, 8) == {edge_into_agg(plan): 8}


@pytest.mark.parametrize("decided", [1, 2, 5, 8])
def test_the_answer_is_the_same_for_every_decided_value(decided):
    """The producers ran with the plan of one value, the consumer runs with another: both must agree."""
    plan = Plan(apply(job(), {"agg": decided}), "all-blocking")
    assert key_grouped_edges(plan, 4) == {edge_into_agg(plan): 8}


@pytest.mark.parametrize("graph, mode, max_shards, why", [
    (job(), "all-blocking", 1, "one shard: decided at grant time, read whole"),
    (job(consumer=4), "all-blocking", 8, "a fixed parallelism"),
    (job(consumer=(1, 1)), "all-blocking", 8, "at most one subtask"),
    (job(distribution="rescale"), "all-blocking", 8, "pointwise: the wiring itself needs the value"),
    (job(), "all-pipelined", 8, "pipelined: one logical region, nothing stored"),
    (job(tail="rebalance"), "all-blocking", 8, "agg and out pipelined all-to-all: one region at any value"),
])
def test_no_key_groups_where_routing_by_unit_already_serves(graph, mode, max_shards, why):
    plan = decided_plan(graph, 4, mode)
    assert key_grouped_edges(plan, max_shards) == {}, why


def test_the_plan_document_shows_k_on_the_adaptive_vertex_whose_inputs_are_key_grouped():
    plan = decided_plan(job(), 4, "all-blocking")
    assert plan_document(plan, max_shards=4)["adaptive_parallelism"]["agg"] == {
        "declared": [1, 8], "decided": 4, "at_grant": "the region runs as several shards, each with its own grant",
        "key_groups": 8, "per_run": True}
    assert "key_groups" not in plan_document(plan, max_shards=1)["adaptive_parallelism"]["agg"]


@SETTINGS
@given(random_jobs(), st.data())
def test_one_plan_at_max_gives_each_logical_region_the_count_of_its_own_vertices_at_max(job, data):
    """`Plan.regions_at_max` sets every adaptive vertex to its max in one plan: a logical region's count is the
    one it has with only its own vertices at their max (what `several_shards_at_max` used to build a plan for)."""
    graph, mode = job
    forward = {name for edge in graph.edges for name in (edge.src, edge.dst) if edge.distribution is F}
    ranged = JobGraph("ranged")
    for name, vertex in graph.vertices.items():
        top = data.draw(st.integers(vertex.parallelism, 8)) if name not in forward else None
        ranged.add_vertex(name, (1, top) if top and top > 1 else vertex.parallelism)
    for edge in graph.edges:
        ranged.connect(edge.src, edge.dst, edge.distribution, edge.exchange, edge.keys)
    plan = decided_plan(ranged.validate(), data.draw(st.integers(1, 8)), mode)
    names = plan.topology.vertex_names
    for logical in plan.region_set.logical:
        members = [names[v] for v in logical.vertices]
        tops = {n: span[1] for n in members if (span := plan.graph.vertices[n].parallelism_range)}
        alone = Plan(apply(plan.graph, tops), plan.mode)
        own = next(len(o.regions) for o in alone.region_set.logical if o.vertices == logical.vertices)
        assert plan.regions_at_max[logical.index] == own
