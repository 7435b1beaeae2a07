"""The faster region build (issue 17 item 7) gives exactly what the build before it gave: same regions
in the same schedule order, same logical regions, same group wiring, same slot demand. The reference
is a frozen copy of the old module (regions_reference.py)."""
from __future__ import annotations

import random

import pytest
import regions_reference
from hypothesis import given
from random_graphs import SETTINGS, random_jobs

from regionflow.core.graph import Distribution, Exchange, JobGraph
from regionflow.core.modes import ExchangeMode
from regionflow.core.plan import Plan
from regionflow.core.regions import build_regions
from regionflow.core.topology import ExecutionTopology


def dump(region_set):
    return {
        "regions": [(r.index, list(r.members), r.logical, sorted(r.consumed)) for r in region_set.regions],
        "logical": [(lr.index, lr.vertices, lr.regions) for lr in region_set.logical],
        "region_of": list(region_set.region_of),
        "group_producers": region_set.group_producers,
        "group_consumers": region_set.group_consumers,
        "internal_groups": region_set.internal_groups,
    }


def assert_same_as_reference(graph, mode):
    topology = ExecutionTopology(graph, mode)
    new, old = build_regions(topology), regions_reference.build_regions(topology)
    assert dump(new) == dump(old)
    # consumed lists keep their order too (not only their content)
    assert [list(r.consumed) for r in new.regions] == [list(r.consumed) for r in old.regions]


@SETTINGS
@given(random_jobs())
def test_same_regions_as_the_old_build_on_random_jobs(job):
    graph, mode = job
    assert_same_as_reference(graph, mode)


def _random_large_job(rng: random.Random) -> tuple[JobGraph, ExchangeMode]:
    n = rng.randint(2, 6)
    parallelism = [rng.choice([1, 3, 7, 16, 40, 64]) for _ in range(n)]
    graph = JobGraph("large")
    for v in rng.sample(range(n), n):
        graph.add_vertex(f"v{v}", parallelism[v])
    for _ in range(rng.randint(1, 8)):
        i = rng.randint(0, n - 2)
        j = rng.randint(i + 1, n - 1)
        choices = [Distribution.RESCALE, Distribution.HASH, Distribution.BROADCAST]
        if parallelism[i] == parallelism[j]:
            choices.append(Distribution.FORWARD)
        distribution = rng.choice(choices)
        exchange = rng.choice([None, Exchange.PIPELINED, Exchange.BLOCKING, Exchange.BLOCKING])
        graph.connect(f"v{i}", f"v{j}", distribution, exchange, ("k",) if distribution is Distribution.HASH else ())
    return graph, rng.choice(list(ExchangeMode))


@pytest.mark.parametrize("seed", range(40))
def test_same_regions_as_the_old_build_on_larger_random_jobs(seed):
    graph, mode = _random_large_job(random.Random(seed))
    assert_same_as_reference(graph, mode)


def test_same_min_slots_as_every_region_demand():
    rng = random.Random(7)
    for _ in range(30):
        graph, mode = _random_large_job(rng)
        plan = Plan(graph, mode)
        assert plan.min_slots == max(plan.slots(region) for region in plan.regions)
