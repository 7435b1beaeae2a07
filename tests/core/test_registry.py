"""JobRegistry and the `collecting` context: no process-global job state."""
from __future__ import annotations

import threading

import pytest

from regionflow.core.graph import JobGraph
from regionflow.core.registry import JobRegistry, collecting, current_registry, register_job


def graph(name: str) -> JobGraph:
    job = JobGraph(name)
    job.add_vertex("v", 1)
    return job


# ---- JobRegistry ----------------------------------------------------------------------------------


def test_registry_keeps_graphs_by_name():
    registry = JobRegistry()
    assert registry.get("a") is None and registry.names() == [] and len(registry) == 0
    b, a = graph("b"), graph("a")
    registry.register(b)
    registry.register(a)
    assert registry.get("a") is a and registry.get("b") is b
    assert registry.names() == ["a", "b"]
    assert "a" in registry and "c" not in registry and len(registry) == 2
    assert repr(registry) == "JobRegistry(a, b)"


def test_registry_last_graph_of_a_name_wins():
    registry = JobRegistry()
    first, second = graph("a"), graph("a")
    registry.register(first)
    registry.register(second)
    assert registry.get("a") is second and registry.names() == ["a"]


def test_registries_are_separate():
    one, two = JobRegistry(), JobRegistry()
    one.register(graph("a"))
    assert two.get("a") is None and two.names() == []


# ---- collecting ---------------------------------------------------------------------------------


def test_register_job_outside_collecting_keeps_nothing():
    assert current_registry() is None
    assert register_job(graph("a")) is False
    assert current_registry() is None


def test_register_job_goes_to_the_innermost_collecting_registry():
    outer, inner = JobRegistry(), JobRegistry()
    with collecting(outer) as entered:
        assert entered is outer and current_registry() is outer
        assert register_job(graph("a")) is True
        with collecting(inner):
            assert current_registry() is inner
            register_job(graph("b"))
        assert current_registry() is outer
        register_job(graph("c"))
    assert current_registry() is None
    assert outer.names() == ["a", "c"]
    assert inner.names() == ["b"]


def test_collecting_ends_on_an_error():
    registry = JobRegistry()
    with pytest.raises(KeyError), collecting(registry):
        raise KeyError("in the block")
    assert current_registry() is None


def test_collecting_is_per_thread():
    seen = []
    registry = JobRegistry()
    with collecting(registry):
        thread = threading.Thread(target=lambda: seen.append((current_registry(), register_job(graph("t")))))
        thread.start()
        thread.join()
    assert seen == [(None, False)]
    assert registry.names() == []
