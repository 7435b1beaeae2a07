"""Property tests on random acyclic job graphs, and a brute-force reference for the region partition."""
from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from random_graphs import BC, RB, SETTINGS, F, H, R, random_jobs

from regionflow.core.graph import Exchange, JobGraph
from regionflow.core.modes import ExchangeMode
from regionflow.core.plan import Plan

# which distributions each mode pipelines (written out independently of modes.py)
PIPELINES = {
    ExchangeMode.ALL_BLOCKING: set(),
    ExchangeMode.FORWARD_PIPELINED_ONLY: {F},
    ExchangeMode.POINTWISE_PIPELINED_ONLY: {F, R},
    ExchangeMode.ALL_PIPELINED: {F, R, H, RB, BC},
}

# ---- brute-force reference -----------------------------------------------------------------------------


def flink_pointwise_pairs(s, t):
    """Flink's EdgeManagerBuildUtil.connectPointwise, as (producer, consumer) pairs."""
    if s >= t:
        return [(p, c) for c in range(t) for p in range(c * s // t, (c + 1) * s // t)]
    return [(p, c) for p in range(s) for c in range((p * t + s - 1) // s, ((p + 1) * t + s - 1) // s)]


def subtask_pairs(graph, mode):
    """[(producer name, consumer name, pipelined?)] for every subtask pair of every edge."""
    pairs = []
    for edge in graph.edges:
        s, t = graph.vertices[edge.src].parallelism, graph.vertices[edge.dst].parallelism
        if edge.distribution.is_pointwise:
            wiring = flink_pointwise_pairs(s, t)
        else:
            wiring = [(p, c) for p in range(s) for c in range(t)]
        if edge.exchange is not None:
            pipelined = edge.exchange is Exchange.PIPELINED
        else:
            pipelined = edge.distribution in PIPELINES[mode]
        pairs += [(f"{edge.src}#{p}", f"{edge.dst}#{c}", pipelined) for p, c in wiring]
    return pairs


def _find(parent, x):
    while parent[x] != x:
        parent[x] = parent[parent[x]]
        x = parent[x]
    return x


def _reach(n, arcs):
    """reach[i] = set of nodes reachable from i by one or more arcs (plain BFS per node)."""
    successors = [set() for _ in range(n)]
    for a, b in arcs:
        successors[a].add(b)
    reach = []
    for start in range(n):
        seen, todo = set(), list(successors[start])
        while todo:
            node = todo.pop()
            if node not in seen:
                seen.add(node)
                todo.extend(successors[node])
        reach.append(seen)
    return reach


def merge_cycles(parent, arcs_of):
    """Repeatedly merge the union-find classes that reach each other through arcs_of(classes)."""
    while True:
        roots = sorted({_find(parent, x) for x in range(len(parent))})
        position = {root: i for i, root in enumerate(roots)}
        arcs = {(position[_find(parent, a)], position[_find(parent, b)]) for a, b in arcs_of()}
        reach = _reach(len(roots), arcs)
        merged = False
        for i in range(len(roots)):
            for j in range(i + 1, len(roots)):
                if j in reach[i] and i in reach[j] and _find(parent, roots[i]) != _find(parent, roots[j]):
                    parent[_find(parent, roots[j])] = _find(parent, roots[i])
                    merged = True
        if not merged:
            return


def reference_regions(graph, mode):
    names = [f"{v.name}#{i}" for v in graph.vertices.values() for i in range(v.parallelism)]
    index = {name: i for i, name in enumerate(names)}
    pairs = subtask_pairs(graph, mode)
    parent = list(range(len(names)))
    for producer, consumer, pipelined in pairs:
        if pipelined:
            a, b = _find(parent, index[producer]), _find(parent, index[consumer])
            parent[a] = b
    blocking = [(index[p], index[c]) for p, c, pipelined in pairs if not pipelined]
    merge_cycles(parent, lambda: blocking)
    classes = {}
    for name in names:
        classes.setdefault(_find(parent, index[name]), set()).add(name)
    return {frozenset(members) for members in classes.values()}


def reference_logical_regions(graph, mode, regions):
    names = list(graph.vertices)
    index = {name: i for i, name in enumerate(names)}
    parent = list(range(len(names)))

    def union(a, b):
        ra, rb = _find(parent, a), _find(parent, b)
        if ra != rb:
            parent[ra] = rb

    blocking = []
    for edge in graph.edges:
        pipelined = edge.exchange is Exchange.PIPELINED if edge.exchange else edge.distribution in PIPELINES[mode]
        if pipelined:
            union(index[edge.src], index[edge.dst])
        else:
            blocking.append((index[edge.src], index[edge.dst]))
    for region in regions:
        vertices = sorted({name.rpartition("#")[0] for name in region})
        for vertex in vertices[1:]:
            union(index[vertices[0]], index[vertex])
    merge_cycles(parent, lambda: blocking)
    classes = {}
    for name in names:
        classes.setdefault(_find(parent, index[name]), set()).add(name)
    return {frozenset(members) for members in classes.values()}


def plan_regions(plan):
    return {frozenset(plan.subtask_names(region)) for region in plan.regions}


def plan_logical_regions(plan):
    names = plan.topology.vertex_names
    return {frozenset(names[v] for v in logical.vertices) for logical in plan.region_set.logical}


# ---- reference sanity -----------------------------------------------------------------------------------


def test_reference_on_known_examples():
    graph = JobGraph("flip119")
    for name, p in (("A", 2), ("B", 2), ("C", 4), ("D", 4)):
        graph.add_vertex(name, p)
    graph.connect("A", "B", "forward")
    graph.connect("B", "C", "rescale")
    graph.connect("C", "D", "hash", keys=["k"])
    assert len(reference_regions(graph, ExchangeMode.ALL_BLOCKING)) == 12
    assert len(reference_regions(graph, ExchangeMode.FORWARD_PIPELINED_ONLY)) == 10
    assert frozenset({"A#1", "B#1", "C#2", "C#3"}) in reference_regions(graph, ExchangeMode.POINTWISE_PIPELINED_ONLY)
    assert len(reference_regions(graph, ExchangeMode.ALL_PIPELINED)) == 1
    assert flink_pointwise_pairs(3, 7) == [(0, 0), (0, 1), (0, 2), (1, 3), (1, 4), (2, 5), (2, 6)]
    assert flink_pointwise_pairs(7, 3) == [(0, 0), (1, 0), (2, 1), (3, 1), (4, 2), (5, 2), (6, 2)]


# ---- properties ---------------------------------------------------------------------------------------------


@SETTINGS
@given(random_jobs())
def test_regions_match_brute_force(job):
    graph, mode = job
    plan = Plan(graph, mode)
    expected = reference_regions(graph, mode)
    assert plan_regions(plan) == expected
    assert plan_logical_regions(plan) == reference_logical_regions(graph, mode, expected)


@SETTINGS
@given(random_jobs())
def test_region_invariants(job):
    graph, mode = job
    plan = Plan(graph, mode)
    topology, region_set = plan.topology, plan.region_set
    regions = plan.regions
    region_of = region_set.region_of

    # every subtask in exactly one region; indices are positions; members sorted
    members = sorted(s for region in regions for s in region.members)
    assert members == list(range(topology.subtask_count))
    for position, region in enumerate(regions):
        assert region.index == position
        assert list(region.members) == sorted(region.members)  # a list, or a range for a whole region
        assert all(region_of[s] == position for s in region.members)

    # pipelined neighbours share a region; blocking producers are scheduled no later than consumers
    for consumer in range(topology.subtask_count):
        for exec_edge, producers in topology.inputs_of(consumer):
            expected_pipelined = (exec_edge.edge.exchange is Exchange.PIPELINED if exec_edge.edge.exchange
                                  else exec_edge.edge.distribution in PIPELINES[mode])
            assert exec_edge.blocking is not expected_pipelined
            for producer in producers:
                if exec_edge.blocking:
                    assert region_of[producer] <= region_of[consumer]
                else:
                    assert region_of[producer] == region_of[consumer]

    # region graph (through blocking groups) only points forward in schedule order: acyclic
    for group, producers in region_set.group_producers.items():
        consumers = region_set.group_consumers[group]
        for consumer in consumers:
            assert all(p < consumer for p in producers if p != consumer)

    # readiness wiring: each region consumes exactly the blocking groups it reads that are not internal
    expected_consumed = {r: set() for r in range(len(regions))}
    for exec_edge in topology.edges:
        if not exec_edge.blocking:
            continue
        for group in topology.groups[exec_edge.group_lo:exec_edge.group_hi]:
            producer_regions = {region_of[s] for s in group.producers}
            consumer_regions = {region_of[s] for s in group.consumers}
            if producer_regions == consumer_regions and len(producer_regions) == 1:
                assert region_set.internal_groups[group.index] in producer_regions
                continue
            assert set(region_set.group_producers[group.index]) == producer_regions
            assert set(region_set.group_consumers[group.index]) == consumer_regions
            for r in consumer_regions:
                expected_consumed[r].add((group.index, r in producer_regions))
    for region in regions:
        assert set(region.consumed) == expected_consumed[region.index]
        assert len(region.consumed) == len(set(region.consumed))

    # slots: >= 1 each, per slot sharing group the largest vertex count, summed; min_slots is the max
    slots = [plan.slots(region) for region in regions]
    assert all(s >= 1 for s in slots)
    assert plan.min_slots == max(slots)
    for region, demand in zip(regions, slots, strict=True):
        counts = {}
        for s in region.members:
            vertex = topology.vertex_names[topology.vertex_of(s)]
            counts[vertex] = counts.get(vertex, 0) + 1
        largest = {}
        for vertex, count in counts.items():
            group = graph.vertices[vertex].slot_sharing_group or "default"
            largest[group] = max(largest.get(group, 0), count)
        assert demand == (1 if len(region.members) == 1 else sum(largest.values()))
        assert {r.slot_sharing_group: r.count for r in plan.slot_requests(region)} == largest

    # logical regions partition the vertices; execution regions lie inside their logical region
    logical = region_set.logical
    covered = sorted(v for lr in logical for v in lr.vertices)
    assert covered == list(range(len(topology.vertex_names)))
    logical_of_vertex = {v: lr.index for lr in logical for v in lr.vertices}
    for lr in logical:
        assert lr.regions == sorted(lr.regions)
        for r in lr.regions:
            assert regions[r].logical == lr.index
    assert sorted(r for lr in logical for r in lr.regions) == list(range(len(regions)))
    for region in regions:
        for s in region.members:
            assert logical_of_vertex[topology.vertex_of(s)] == region.logical

    # the logical dependency graph (blocking edges between different logical regions) is acyclic
    arcs = {(logical_of_vertex[e.src], logical_of_vertex[e.dst]) for e in topology.edges
            if e.blocking and logical_of_vertex[e.src] != logical_of_vertex[e.dst]}
    reach = _reach(len(logical), arcs)
    assert all(i not in reach[i] for i in range(len(logical)))

    # to_dict agrees with the regions
    data = plan.to_dict()
    assert data["region_count"] == len(regions)
    assert data["slots"] == slots and data["min_slots"] == plan.min_slots
    assert [set(names) for names in data["regions"]] == [set(plan.subtask_names(r)) for r in regions]
    assert len(data["blocking_edges"]) == sum(1 for e in topology.edges if e.blocking)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_jobs())
def test_plan_reference_round_trip(job):
    graph, mode = job
    plan = Plan(graph, mode)
    again = Plan.from_reference(plan.reference)
    assert again.to_dict(inputs=True) == plan.to_dict(inputs=True)
    assert Plan(JobGraph.from_spec(graph.to_spec()), mode.value).to_dict() == plan.to_dict()


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_jobs())
def test_inputs_of_matches_flink_wiring(job):
    graph, mode = job
    plan = Plan(graph, mode)
    topology = plan.topology
    expected = {}
    for position, edge in enumerate(graph.edges):
        s, t = graph.vertices[edge.src].parallelism, graph.vertices[edge.dst].parallelism
        wiring = flink_pointwise_pairs(s, t) if edge.distribution.is_pointwise else [
            (p, c) for p in range(s) for c in range(t)]
        for p, c in wiring:
            expected.setdefault((f"{edge.dst}#{c}", position), set()).add(f"{edge.src}#{p}")
    actual = {}
    for consumer in range(topology.subtask_count):
        for exec_edge, producers in topology.inputs_of(consumer):
            key = (topology.subtask_name(consumer), exec_edge.index)
            assert key not in actual
            actual[key] = {topology.subtask_name(p) for p in producers}
    assert actual == expected
    # groups per edge: one for all-to-all, min(S, T) for pointwise
    for exec_edge in topology.edges:
        s, t = topology.parallelism[exec_edge.src], topology.parallelism[exec_edge.dst]
        assert exec_edge.group_hi - exec_edge.group_lo == (min(s, t) if exec_edge.edge.distribution.is_pointwise else 1)
