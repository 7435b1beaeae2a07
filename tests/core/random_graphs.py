"""Random job graphs for the region build's property tests (test_properties.py, test_regions_reference.py):
a hypothesis strategy of a graph and an exchange mode, and the hypothesis settings they run with."""
from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from regionflow.core.graph import Distribution, Exchange, JobGraph
from regionflow.core.modes import ExchangeMode

F, R, H, RB, BC = (Distribution.FORWARD, Distribution.RESCALE, Distribution.HASH,
                   Distribution.REBALANCE, Distribution.BROADCAST)

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def random_jobs(draw, max_vertices=8):
    n = draw(st.integers(1, max_vertices))
    base = draw(st.integers(1, 6))
    parallelism = draw(st.lists(st.one_of(st.just(base), st.integers(1, 6)), min_size=n, max_size=n))
    groups = draw(st.lists(st.sampled_from([None, None, None, "g1", "g2"]), min_size=n, max_size=n))
    insertion = draw(st.permutations(range(n)))
    edges = []
    if n >= 2:
        for _ in range(draw(st.integers(0, 12))):
            i = draw(st.integers(0, n - 2))
            j = draw(st.integers(i + 1, n - 1))
            choices = [R, H, RB, BC] + ([F, F] if parallelism[i] == parallelism[j] else [])
            distribution = draw(st.sampled_from(choices))
            exchange = draw(st.sampled_from([None, None, Exchange.PIPELINED, Exchange.BLOCKING]))
            edges.append((i, j, distribution, exchange))
    mode = draw(st.sampled_from(list(ExchangeMode)))
    graph = JobGraph("random")
    for v in insertion:  # insertion order differs from the topological order
        graph.add_vertex(f"v{v}", parallelism[v], slot_sharing_group=groups[v])
    for i, j, distribution, exchange in edges:
        graph.connect(f"v{i}", f"v{j}", distribution, exchange, ("k",) if distribution is H else ())
    return graph, mode
