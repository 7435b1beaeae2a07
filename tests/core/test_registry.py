"""JobRegistry, the `collecting` context and load_dag_file_job: no process-global job state."""
from __future__ import annotations

import sys
import textwrap
import threading

import pytest

from regionflow.core.errors import RegionflowError, SpecError
from regionflow.core.graph import JobGraph, load_dag_file_job, load_job
from regionflow.core.registry import JobRegistry, collecting, current_registry, register_job


def graph(name: str) -> JobGraph:
    job = JobGraph(name)
    job.add_vertex("v", 1)
    return job


@pytest.fixture(autouse=True)
def forget_dag_modules():
    """Drop the modules load_dag_file_job imported in a test (each test's files have their own paths)."""
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        if name.startswith("regionflow_dagfile_"):
            del sys.modules[name]


def dag_file(directory, name: str, body: str):
    """A DAG-like file: it registers JobGraphs the way regionflow.transform(dag) does, without Airflow."""
    path = directory / name
    path.write_text(textwrap.dedent("""\
        from regionflow.core.graph import JobGraph
        from regionflow.core.registry import register_job


        def declare(name):
            job = JobGraph(name)
            job.add_vertex("v", 1)
            register_job(job)
            return job


        """) + textwrap.dedent(body))
    return path


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


# ---- load_dag_file_job ----------------------------------------------------------------------------


def test_two_dag_files_get_separate_registries(tmp_path):
    one = dag_file(tmp_path, "one.py", "ALPHA = declare('alpha')\n")
    two = dag_file(tmp_path, "two.py", "BETA = declare('beta')\nGAMMA = declare('gamma')\n")

    alpha = load_dag_file_job(str(one))
    beta = load_dag_file_job(str(two), "beta")
    gamma = load_job(f"{two}#gamma")
    assert (alpha.name, beta.name, gamma.name) == ("alpha", "beta", "gamma")

    modules = {path: next(m for m in sys.modules.values() if getattr(m, "__file__", None) == str(path))
               for path in (one, two)}
    assert modules[one].ALPHA is alpha and modules[two].BETA is beta and modules[two].GAMMA is gamma
    registries = {path: module.__regionflow_jobs__ for path, module in modules.items()}
    assert all(isinstance(registry, JobRegistry) for registry in registries.values())
    assert registries[one] is not registries[two]
    assert registries[one].names() == ["alpha"]
    assert registries[two].names() == ["beta", "gamma"]
    assert current_registry() is None  # nothing left collecting


def test_a_dag_file_is_imported_once(tmp_path):
    path = dag_file(tmp_path, "once.py", "COUNT = declare('once')\n")
    first = load_dag_file_job(str(path))
    assert load_dag_file_job(str(path), "once") is first


def test_nothing_global_holds_a_loaded_job(tmp_path):
    """After loading, no module of regionflow.core keeps the graph (or its name) in a dict, list or set."""
    loaded = load_dag_file_job(str(dag_file(tmp_path, "solo.py", "declare('solo_job')\n")))

    def holds(value) -> bool:
        if isinstance(value, dict):
            return any(holds(item) for pair in value.items() for item in pair)
        if isinstance(value, (list, tuple, set, frozenset)):
            return any(holds(item) for item in value)
        if isinstance(value, JobRegistry):
            return True  # a registry anywhere module-level would be global state
        return value is loaded or value == "solo_job"

    core = [module for name, module in sys.modules.items() if name.startswith("regionflow.core")]
    assert core
    for module in core:
        for attribute, value in vars(module).items():
            if not attribute.startswith("__"):
                assert not holds(value), f"{module.__name__}.{attribute} holds the loaded job"


def test_a_dag_file_importing_another_keeps_its_own_jobs(tmp_path):
    inner = dag_file(tmp_path, "inner.py", "declare('inner')\n")
    outer = dag_file(tmp_path, "outer.py", f"""\
        from regionflow.core.graph import load_dag_file_job
        declare('outer_first')
        INNER = load_dag_file_job({str(inner)!r})
        declare('outer_last')
        """)
    assert load_dag_file_job(str(outer), "outer_last").name == "outer_last"
    with pytest.raises(SpecError, match="defines 2 regionflow jobs \\(outer_first, outer_last\\)"):
        load_dag_file_job(str(outer))
    assert load_dag_file_job(str(inner)).name == "inner"


def test_several_jobs_and_no_name(tmp_path):
    path = dag_file(tmp_path, "many.py", "declare('b')\ndeclare('a')\n")
    with pytest.raises(SpecError, match=r"many.py' defines 2 regionflow jobs \(a, b\); name one with --dag-id"):
        load_dag_file_job(str(path))


def test_no_jobs(tmp_path):
    path = dag_file(tmp_path, "none.py", "X = 1\n")
    with pytest.raises(SpecError) as info:
        load_dag_file_job(str(path))
    message = str(info.value)
    assert "none.py' defines no regionflow job (no DAG in it has a SparkVertexOperator" in message
    assert "a job is a DAG of SparkVertexOperator tasks" in message and "regionflow.transform(dag)" in message
    assert "--dag-id" not in message and "defines 0" not in message
    with pytest.raises(SpecError, match=r"has no regionflow job 'x'; it has: none \(did the file call "
                                        r"regionflow.transform\(dag\)\?\)"):
        load_dag_file_job(str(path), "x")


def test_missing_name(tmp_path):
    path = dag_file(tmp_path, "named.py", "declare('a')\ndeclare('b')\n")
    with pytest.raises(SpecError, match=r"has no regionflow job 'c'; it has: a, b \(did the file call"):
        load_dag_file_job(str(path), "c")


def test_missing_file(tmp_path):
    with pytest.raises(SpecError, match="does not exist"):
        load_dag_file_job(str(tmp_path / "absent.py"))


def test_failing_import_names_the_error_and_can_be_retried(tmp_path):
    path = dag_file(tmp_path, "broken.py", "declare('broken')\n1 / 0\n")
    with pytest.raises(SpecError, match=r"importing DAG file .*broken.py' failed: ZeroDivisionError: division by zero"):
        load_dag_file_job(str(path))
    assert current_registry() is None
    dag_file(tmp_path, "broken.py", "declare('fixed')\n")
    assert load_dag_file_job(str(path)).name == "fixed"  # the failed module was not kept


def test_a_regionflow_error_in_the_file_is_raised_as_is(tmp_path):
    path = dag_file(tmp_path, "invalid.py", """\
        from regionflow.core.errors import JobGraphError
        raise JobGraphError("vertex 'v' is wrong")
        """)
    with pytest.raises(RegionflowError, match="^vertex 'v' is wrong$"):
        load_dag_file_job(str(path))
    assert current_registry() is None
