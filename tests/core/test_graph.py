"""JobGraph model, validation errors, the JSON spec format and load_job."""
from __future__ import annotations

import json
import textwrap

import core_jobs
import pytest

from regionflow.core.errors import JobGraphError, RegionflowError, ResourceError, SpecError
from regionflow.core.graph import Distribution, Edge, Exchange, JobGraph, load_job
from regionflow.core.resources import UNKNOWN, ResourceProfile

JOBS = __import__("pathlib").Path(__file__).resolve().parents[2] / "examples" / "jobs"


def make_job(vertices, edges=(), name="job"):
    return core_jobs.make_job(vertices, edges, name)


# ---- model ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ("FORWARD", Distribution.FORWARD),
        ("forward", Distribution.FORWARD),
        ("RESCALE", Distribution.RESCALE),
        ("POINTWISE", Distribution.RESCALE),
        ("pointwise", Distribution.RESCALE),
        ("HASH", Distribution.HASH),
        ("REBALANCE", Distribution.REBALANCE),
        ("BROADCAST", Distribution.BROADCAST),
        ("ALL_TO_ALL", Distribution.BROADCAST),
        ("all-to-all", Distribution.BROADCAST),
        (" Hash ", Distribution.HASH),
        (Distribution.REBALANCE, Distribution.REBALANCE),
    ],
)
def test_distribution_parse(text, expected):
    assert Distribution.parse(text) is expected


def test_distribution_pointwise_flags():
    assert {d for d in Distribution if d.is_pointwise} == {Distribution.FORWARD, Distribution.RESCALE}


@pytest.mark.parametrize("value", ["SHUFFLE", "", "hashed", 3])
def test_distribution_parse_unknown(value):
    with pytest.raises(SpecError) as info:
        Distribution.parse(value)
    assert repr(value) in str(info.value)
    assert isinstance(info.value, RegionflowError)


@pytest.mark.parametrize(
    "value, expected",
    [
        ("PIPELINED", Exchange.PIPELINED),
        ("pipelined", Exchange.PIPELINED),
        ("BLOCKING", Exchange.BLOCKING),
        (" blocking ", Exchange.BLOCKING),
        (None, None),
        (Exchange.BLOCKING, Exchange.BLOCKING),
    ],
)
def test_exchange_parse(value, expected):
    assert Exchange.parse(value) is expected


@pytest.mark.parametrize("value", ["STREAMING", "batch", ""])
def test_exchange_parse_unknown(value):
    with pytest.raises(SpecError) as info:
        Exchange.parse(value)
    assert repr(value) in str(info.value)


def test_connect_parses_and_keeps_keys():
    graph = make_job({"A": 2, "B": 3})
    edge = graph.connect("A", "B", "hash", "blocking", ["x", "y"])
    assert edge == Edge("A", "B", Distribution.HASH, Exchange.BLOCKING, ("x", "y"))
    assert graph.edges == [edge]
    assert "A -HASH-> B [blocking]" == edge.label
    assert Edge("A", "B", Distribution.FORWARD).label == "A -FORWARD-> B"


def test_connect_unknown_distribution_names_edge_and_value():
    graph = make_job({"A": 1, "B": 1})
    with pytest.raises(SpecError) as info:
        graph.connect("A", "B", "zigzag")
    assert "'zigzag'" in str(info.value) and "A -> B" in str(info.value)


def test_connect_unknown_exchange_names_edge_and_value():
    graph = make_job({"A": 1, "B": 1})
    with pytest.raises(SpecError) as info:
        graph.connect("A", "B", "forward", "eventually")
    assert "'eventually'" in str(info.value) and "A -> B" in str(info.value)


def test_two_edges_may_join_the_same_pair():
    graph = make_job({"A": 3, "B": 3}, [("A", "B", "forward", "pipelined"), ("A", "B", "hash", "blocking")])
    assert graph.validate() is graph
    assert [(e.distribution, e.exchange) for e in graph.edges] == [
        (Distribution.FORWARD, Exchange.PIPELINED),
        (Distribution.HASH, Exchange.BLOCKING),
    ]


def test_vertex_defaults():
    graph = JobGraph()
    vertex = graph.add_vertex("A", 4)
    assert vertex.resources is UNKNOWN and vertex.slot_sharing_group is None
    assert graph.vertices == {"A": vertex}


def test_topological_order_is_stable_and_producers_first():
    graph = make_job({"D": 1, "C": 1, "B": 1, "A": 1}, [("A", "B", "hash"), ("C", "B", "hash"), ("B", "D", "hash")])
    order = graph.topological_order()
    assert order == ["C", "A", "B", "D"]


# ---- validation -----------------------------------------------------------------------------------


def _raises(graph, error=JobGraphError):
    with pytest.raises(error) as info:
        graph.validate()
    assert isinstance(info.value, RegionflowError)
    return str(info.value)


def test_cycle_message_names_cycle_vertices():
    graph = make_job({"A": 1, "B": 1, "C": 1, "S": 1},
                     [("S", "A", "hash"), ("A", "B", "hash"), ("B", "C", "hash"), ("C", "A", "hash")])
    message = _raises(graph)
    assert "cycle" in message
    for vertex in "ABC":
        assert vertex in message


def test_cycle_with_a_downstream_vertex_sorting_first():
    # X <-> Y is the cycle; A hangs below it and sorts before X and Y
    graph = make_job({"X": 1, "Y": 1, "A": 1}, [("X", "Y", "hash"), ("Y", "X", "hash"), ("X", "A", "hash")])
    message = _raises(graph)
    assert "cycle" in message and "X" in message and "Y" in message


def test_cycle_with_downstream_vertices_sorting_first_longer():
    graph = make_job({"p": 1, "q": 1, "r": 1, "a": 1, "b": 1},
                     [("p", "q", "hash"), ("q", "r", "hash"), ("r", "p", "hash"), ("r", "a", "hash"),
                      ("a", "b", "hash")])
    message = _raises(graph)
    for vertex in "pqr":
        assert f"{vertex}" in message


def test_self_loop_rejected():
    message = _raises(make_job({"A": 2}, [("A", "A", "hash")]))
    assert "A -> A" in message


@pytest.mark.parametrize("src, dst, missing", [("A", "Z", "Z"), ("Q", "A", "Q")])
def test_edge_naming_unknown_vertex(src, dst, missing):
    graph = make_job({"A": 1, "B": 1}, [(src, dst, "rebalance")])
    message = _raises(graph)
    assert repr(missing) in message and f"{src} -> {dst}" in message


def test_duplicate_vertex_name():
    graph = JobGraph()
    graph.add_vertex("A", 1)
    graph.add_vertex("B", 1)
    graph.add_vertex("A", 2)
    message = _raises(graph)
    assert "duplicate" in message and "'A'" in message


@pytest.mark.parametrize("parallelism", [0, -3, "2", 2.0, True, None, 32769, 1000000000])
def test_bad_parallelism(parallelism):
    graph = JobGraph()
    graph.add_vertex("good", 2)
    graph.add_vertex("bad", parallelism)
    message = _raises(graph)
    assert "'bad'" in message and repr(parallelism) in message


def test_parallelism_up_to_flinks_limit_is_fine():
    graph = JobGraph()
    graph.add_vertex("wide", 32768)
    assert graph.validate() is graph


@pytest.mark.parametrize("fn", [42, "clean orders", "module_only", ":function_only", ["m:f"]])
def test_a_vertex_function_that_is_neither_callable_nor_a_reference_fails_validation(fn):
    graph = JobGraph()
    graph.add_vertex("clean", 1, fn=fn)
    message = _raises(graph)
    assert "'clean'" in message and repr(fn) in message and "package.module:function" in message


def test_a_vertex_function_reference_or_callable_passes_validation():
    graph = JobGraph()
    graph.add_vertex("a", 1, fn="regionflow.examples.orders:generate_orders")
    graph.add_vertex("b", 1, fn=len)
    graph.add_vertex("c", 1)
    assert graph.validate() is graph


def test_a_sink_that_is_not_a_path_fails_validation():
    graph = JobGraph()
    graph.add_vertex("totals", 1, sink=123)  # type: ignore[arg-type]
    message = _raises(graph)
    assert "vertex 'totals'.sink must be a string or object" in message and "got 123" in message


@pytest.mark.parametrize("path", ["../../etc", "..", ".", "a/../../b", "./"])
def test_a_relative_sink_may_not_leave_the_sinks_folder(path):
    with pytest.raises(JobGraphError) as info:
        JobGraph().add_vertex("totals", 1, sink=path)
    assert repr(path) in str(info.value) and "absolute path" in str(info.value)


@pytest.mark.parametrize("path, where", [("a/../b", "/data/sinks/b"), ("./x/y", "/data/sinks/x/y"),
                                          ("/abs/out", "/abs/out"), ("s3a://bucket/out", "s3a://bucket/out")])
def test_sink_paths_resolve_inside_the_data_dir_or_as_given(path, where):
    from regionflow.spark.driver.program import resolve_sink_path

    vertex = JobGraph().add_vertex("totals", 1, sink=path)
    assert resolve_sink_path(vertex, "/data") == where


@pytest.mark.parametrize("name", ["", "a#b"])
def test_bad_vertex_name(name):
    graph = JobGraph()
    graph.add_vertex(name, 1)
    message = _raises(graph)
    assert repr(name) in message


def test_forward_between_unequal_parallelisms():
    message = _raises(make_job({"A": 2, "B": 3}, [("A", "B", "forward")]))
    assert "A -> B" in message and "FORWARD" in message and "2" in message and "3" in message


def test_forward_between_equal_parallelisms_is_fine():
    make_job({"A": 3, "B": 3}, [("A", "B", "forward")]).validate()


def test_hash_without_keys():
    message = _raises(make_job({"A": 2, "B": 3}, [("A", "B", "hash", None, ())]))
    assert "A -> B" in message and "HASH" in message and "key" in message


def test_empty_graph():
    assert "no vertices" in _raises(JobGraph("empty"))


def test_error_classes():
    for error in (JobGraphError, SpecError, ResourceError):
        assert issubclass(error, RegionflowError) and issubclass(error, ValueError)


# ---- spec format ------------------------------------------------------------------------------------


def test_spec_round_trip_full():
    graph = JobGraph("full")
    graph.add_vertex("src", 2, ResourceProfile.of(cpu=1, heap_mib=256, gpu=1), "io")
    graph.add_vertex("mid", 2, ResourceProfile.of(cpu=0.5, managed_mib=128))
    graph.add_vertex("sink", 5, ResourceProfile.of(off_heap_mib=64))
    graph.connect("src", "mid", "forward", "pipelined")
    graph.connect("src", "mid", "hash", "blocking", ["a", "b"])
    graph.connect("mid", "sink", "rescale")
    graph.connect("mid", "sink", "broadcast")
    graph.connect("src", "sink", "rebalance", "pipelined")
    spec = graph.to_spec()
    assert json.loads(json.dumps(spec)) == spec
    again = JobGraph.from_spec(json.loads(json.dumps(spec)))
    assert again.name == "full"
    assert again.vertices == graph.vertices
    assert again.edges == graph.edges
    assert again.to_spec() == spec


def test_to_spec_shape():
    graph = make_job({"A": 2, "B": 2}, [("A", "B", "forward"), ("A", "B", "hash", "BLOCKING", ["k"])], name="j")
    assert graph.to_spec() == {
        "name": "j",
        "vertices": [{"id": "A", "parallelism": 2}, {"id": "B", "parallelism": 2}],
        "edges": [
            {"src": "A", "dst": "B", "distribution": "FORWARD"},
            {"src": "A", "dst": "B", "distribution": "HASH", "exchange": "BLOCKING", "keys": ["k"]},
        ],
    }


def test_from_spec_minimal_and_synonyms():
    spec = {
        "vertices": [{"id": "a", "parallelism": 3}, {"id": "b", "parallelism": 7}, {"id": "c", "parallelism": 7}],
        "edges": [
            {"src": "a", "dst": "b", "distribution": "POINTWISE"},
            {"src": "b", "dst": "c", "distribution": "ALL_TO_ALL", "exchange": "pipelined"},
            {"src": "a", "dst": "c", "distribution": "hash", "keys": "id"},
        ],
    }
    graph = JobGraph.from_spec(spec, name="fallback")
    assert graph.name == "fallback"
    assert [v.parallelism for v in graph.vertices.values()] == [3, 7, 7]
    assert [(e.distribution, e.exchange, e.keys) for e in graph.edges] == [
        (Distribution.RESCALE, None, ()),
        (Distribution.BROADCAST, Exchange.PIPELINED, ()),
        (Distribution.HASH, None, ("id",)),
    ]


def test_from_spec_edges_optional():
    graph = JobGraph.from_spec({"vertices": [{"id": "solo", "parallelism": 4}]})
    assert graph.edges == [] and list(graph.vertices) == ["solo"]


def test_flip119_example_file():
    graph = load_job(str(JOBS / "flip119.json"))
    assert graph.name == "flip119"
    assert {n: v.parallelism for n, v in graph.vertices.items()} == {"A": 2, "B": 2, "C": 4, "D": 4}
    assert [(e.src, e.dst, e.distribution, e.exchange) for e in graph.edges] == [
        ("A", "B", Distribution.FORWARD, None),
        ("B", "C", Distribution.RESCALE, None),
        ("C", "D", Distribution.HASH, None),
    ]
    assert graph.edges[2].keys == ("key",)


V = [{"id": "A", "parallelism": 1}, {"id": "B", "parallelism": 1}]


@pytest.mark.parametrize(
    "spec, error, fragments",
    [
        ([], SpecError, ["JSON object"]),
        ("vertices", SpecError, ["JSON object"]),
        (None, SpecError, ["JSON object"]),
        ({"vertices": V, "edges": [], "extra": 1}, SpecError, ["extra"]),
        ({"edges": []}, SpecError, ["vertices"]),
        ({"vertices": {"A": 1}}, SpecError, ["vertices"]),
        ({"vertices": ["A"]}, SpecError, ["vertices[0]"]),
        ({"vertices": [{"id": "A"}]}, SpecError, ["vertices[0]", "parallelism"]),
        ({"vertices": [{"parallelism": 1}]}, SpecError, ["vertices[0]", "id"]),
        ({"vertices": [V[0], {"id": "B", "parallelism": 1, "colour": "red"}]},
         SpecError, ["vertices[1]", "'B'", "colour"]),
        ({"vertices": [{"id": "A", "parallelism": 1, "resources": 3}]}, SpecError, ["'A'", "resources"]),
        ({"vertices": [{"id": "A", "parallelism": 1, "resources": {"cpu": "lots"}}]}, SpecError, ["cpu", "'lots'"]),
        ({"vertices": [{"id": "A", "parallelism": 1, "resources": {"cpu": -1}}]}, SpecError, ["cpu", "-1"]),
        ({"vertices": V, "edges": {"src": "A"}}, SpecError, ["edges"]),
        ({"vertices": V, "edges": [{"src": "A", "distribution": "hash"}]}, SpecError, ["edges[0]", "dst"]),
        ({"vertices": V, "edges": ["A->B"]}, SpecError, ["edges[0]"]),
        ({"vertices": V, "edges": [{"src": "A", "dst": "B", "distribution": "hash", "keys": ["k"], "weight": 2}]},
         SpecError, ["edges[0]", "A -> B", "weight"]),
        ({"vertices": V, "edges": [{"src": "A", "dst": "B", "distribution": "spray"}]},
         SpecError, ["A -> B", "'spray'"]),
        ({"vertices": V, "edges": [{"src": "A", "dst": "B", "distribution": "forward", "exchange": "later"}]},
         SpecError, ["A -> B", "'later'"]),
        ({"vertices": V, "edges": [{"src": "A", "dst": "C", "distribution": "forward"}]}, JobGraphError, ["'C'"]),
        ({"vertices": V + [V[0]]}, JobGraphError, ["duplicate", "'A'"]),
        ({"vertices": [{"id": "A", "parallelism": 0}]}, SpecError, ["'A'", "parallelism is 0", "at least 1"]),
        ({"vertices": [{"id": "A", "parallelism": "3"}]}, SpecError, ["'A'", "'3'", "must be an integer"]),
        ({"vertices": [{"id": "A", "parallelism": 2}, {"id": "B", "parallelism": 3}],
          "edges": [{"src": "A", "dst": "B", "distribution": "forward"}]}, JobGraphError, ["A -> B", "FORWARD"]),
        ({"vertices": V, "edges": [{"src": "A", "dst": "B", "distribution": "hash"}]},
         JobGraphError, ["A -> B", "HASH"]),
        ({"vertices": V, "edges": [{"src": "A", "dst": "B", "distribution": "hash", "keys": []}]},
         SpecError, ["A -> B", "keys is empty"]),
        ({"vertices": []}, SpecError, ["vertices is empty"]),
        ({"vertices": [{"id": "A", "paralelism": 2}]}, SpecError, ["'paralelism'", "did you mean 'parallelism'"]),
        ({"vertices": [{"id": "A", "parallelism": 1, "resources": {"cpu": float("nan")}}]}, SpecError,
         ["('A').resources.cpu is nan", "finite"]),
        ({"vertices": [{"id": "A", "parallelism": 1, "resources": {"unknown": True, "cpu": 1}}]}, SpecError,
         ["resources.unknown must be a number"]),
        ({"vertices": V, "edges": [{"src": "A", "dst": "B", "distribution": "hash", "key": ["k"]}]}, SpecError,
         ["edges[0] (A -> B)", "'key'", "did you mean 'keys'"]),
        ({"vertices": V, "nodes": []}, SpecError, ["unknown key 'nodes'"]),
    ],
)
def test_from_spec_errors(spec, error, fragments):
    with pytest.raises(error) as info:
        JobGraph.from_spec(spec)
    for fragment in fragments:
        assert fragment in str(info.value)


@pytest.mark.parametrize("keys", [5, 1.5])
def test_from_spec_keys_of_wrong_type_is_a_spec_error(keys):
    spec = {"vertices": V, "edges": [{"src": "A", "dst": "B", "distribution": "hash", "keys": keys}]}
    with pytest.raises(RegionflowError) as info:
        JobGraph.from_spec(spec)
    assert "A -> B" in str(info.value) or "edges[0]" in str(info.value)


def test_from_spec_cycle_names_vertices():
    spec = {
        "vertices": [{"id": n, "parallelism": 1} for n in ("x", "y", "a")],
        "edges": [
            {"src": "x", "dst": "y", "distribution": "forward"},
            {"src": "y", "dst": "x", "distribution": "forward"},
            {"src": "x", "dst": "a", "distribution": "forward"},
        ],
    }
    with pytest.raises(JobGraphError) as info:
        JobGraph.from_spec(spec)
    assert "x" in str(info.value) and "y" in str(info.value)


# ---- load_job ---------------------------------------------------------------------------------------


def test_load_job_file_uses_basename_as_default_name(tmp_path):
    path = tmp_path / "nightly.json"
    path.write_text(json.dumps({"vertices": [{"id": "A", "parallelism": 2}]}))
    graph = load_job(str(path))
    assert graph.name == "nightly"
    assert graph.vertices["A"].parallelism == 2


def test_load_job_file_round_trip(tmp_path):
    original = load_job(str(JOBS / "flip119.json"))
    path = tmp_path / "copy.json"
    path.write_text(json.dumps(original.to_spec()))
    again = load_job(str(path))
    assert again.to_spec() == original.to_spec()


def test_load_job_missing_file(tmp_path):
    path = str(tmp_path / "nope.json")
    with pytest.raises(SpecError) as info:
        load_job(path)
    assert path in str(info.value) and "does not exist" in str(info.value)


def test_load_job_invalid_json(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text('{"vertices": [')
    with pytest.raises(SpecError) as info:
        load_job(str(path))
    assert str(path) in str(info.value) and "not valid JSON" in str(info.value)


def test_load_job_json_not_an_object(tmp_path):
    path = tmp_path / "list.json"
    path.write_text("[1, 2]")
    with pytest.raises(SpecError):
        load_job(str(path))


def test_load_job_unrecognised_reference():
    with pytest.raises(SpecError) as info:
        load_job("no-such-thing")
    assert "'no-such-thing'" in str(info.value)


@pytest.fixture
def job_module(tmp_path, monkeypatch):
    name = f"rf_testjobs_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(
        """
        from regionflow.core.graph import JobGraph

        GRAPH = JobGraph("from_module")
        GRAPH.add_vertex("A", 2)
        GRAPH.add_vertex("B", 4)
        GRAPH.connect("A", "B", "rescale")

        def build():
            graph = JobGraph("built")
            graph.add_vertex("X", 3)
            return graph

        def bad_build():
            graph = JobGraph("bad")
            graph.add_vertex("X", 0)
            return graph

        NOT_A_GRAPH = {"vertices": []}
        """
    ))
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


def test_load_job_module_attribute(job_module):
    graph = load_job(f"{job_module}:GRAPH")
    assert graph.name == "from_module"
    assert list(graph.vertices) == ["A", "B"]


def test_load_job_module_callable(job_module):
    graph = load_job(f"{job_module}:build")
    assert graph.name == "built" and graph.vertices["X"].parallelism == 3


def test_load_job_module_validates(job_module):
    with pytest.raises(JobGraphError) as info:
        load_job(f"{job_module}:bad_build")
    assert "'X'" in str(info.value)


def test_load_job_module_not_a_graph(job_module):
    with pytest.raises(SpecError) as info:
        load_job(f"{job_module}:NOT_A_GRAPH")
    assert "dict" in str(info.value) and "JobGraph" in str(info.value)


def test_load_job_module_missing_attribute(job_module):
    with pytest.raises(SpecError) as info:
        load_job(f"{job_module}:MISSING")
    assert "'MISSING'" in str(info.value)


def test_load_job_missing_module():
    with pytest.raises(SpecError) as info:
        load_job("rf_no_such_module_xyz:GRAPH")
    assert "'rf_no_such_module_xyz'" in str(info.value)
