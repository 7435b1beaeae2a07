"""`regionflow plan`: text and JSON output, --inputs, and errors reported without a traceback."""
from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from regionflow.cli import main
from regionflow.core.graph import load_job
from regionflow.core.plan import Plan

JOBS = Path(__file__).resolve().parents[1] / "examples" / "jobs"
FLIP119 = str(JOBS / "flip119.json")


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def write_spec(tmp_path, spec, name="job.json"):
    path = tmp_path / name
    path.write_text(spec if isinstance(spec, str) else json.dumps(spec))
    return str(path)


# ---- success -----------------------------------------------------------------------------------------------


def test_plan_text_default_mode(capsys):
    code, out, err = run(capsys, "plan", FLIP119)
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0] == ("job flip119: mode forward-pipelined-only, 12 subtasks, 10 regions, 2 blocking edges, "
                        "min slots 1")
    header = next(i for i, line in enumerate(lines) if line.split() == ["#", "region", "slots", "subtasks"])
    rows = [line.split(None, 3) for line in lines[header + 1:] if line.strip()]
    assert len(rows) == 10
    assert ["0", "A+B[0]", "1", "A#0, B#0"] in rows
    assert ["1", "A+B[1]", "1", "A#1, B#1"] in rows
    assert {row[1] for row in rows} >= {"C[0]", "C[3]", "D[0]", "D[3]"}
    assert "inputs:" not in out


@pytest.mark.parametrize("mode, regions, slots", [
    ("all-blocking", 12, 1), ("batch", 12, 1), ("pointwise-pipelined-only", 6, 2),
    ("all-pipelined", 1, 4), ("pipelined", 1, 4),
])
def test_plan_text_modes(capsys, mode, regions, slots):
    code, out, _ = run(capsys, "plan", FLIP119, "--mode", mode)
    assert code == 0
    assert f"{regions} regions" in out.splitlines()[0] and f"min slots {slots}" in out.splitlines()[0]


@pytest.mark.parametrize("mode", ["all-blocking", "forward-pipelined-only", "pointwise-pipelined-only",
                                  "all-pipelined"])
def test_plan_json_matches_plan(capsys, mode):
    code, out, err = run(capsys, "plan", FLIP119, "--mode", mode, "--format", "json")
    assert code == 0 and err == ""
    data = json.loads(out)
    spark_conf = data.pop("spark_conf")
    assert data == Plan(load_job(FLIP119), mode).to_dict()
    # FLIP119 declares no resources: each region gets one-core executors, one per slot, memory from the host
    assert [conf["spark.cores.max"] for conf in spark_conf] == [str(slots) for slots in data["slots"]]
    assert not any("memory" in key for conf in spark_conf for key in conf)
    assert data["mode"] == mode
    assert data["region_count"] == {"all-blocking": 12, "forward-pipelined-only": 10,
                                    "pointwise-pipelined-only": 6, "all-pipelined": 1}[mode]
    assert data["min_slots"] == {"all-blocking": 1, "forward-pipelined-only": 1,
                                 "pointwise-pipelined-only": 2, "all-pipelined": 4}[mode]
    assert "inputs" not in data


def test_plan_json_pointwise_regions(capsys):
    _, out, _ = run(capsys, "plan", FLIP119, "--mode", "pointwise-pipelined-only", "--format", "json")
    data = json.loads(out)
    assert sorted(map(sorted, data["regions"])) == sorted(
        [["A#0", "B#0", "C#0", "C#1"], ["A#1", "B#1", "C#2", "C#3"], ["D#0"], ["D#1"], ["D#2"], ["D#3"]]
    )
    assert data["blocking_edges"] == [{"src": "C", "dst": "D", "distribution": "HASH"}]
    assert data["logical_regions"] == [["A", "B", "C"], ["D"]]


def test_plan_json_inputs(capsys):
    code, out, _ = run(capsys, "plan", FLIP119, "--format", "json", "--inputs")
    assert code == 0
    inputs = json.loads(out)["inputs"]
    assert inputs["A#1"] == {}
    assert inputs["B#0"] == {"A->B": ["A#0"]}
    assert inputs["C#0"] == inputs["C#1"] == {"B->C": ["B#0"]}
    assert inputs["C#2"] == inputs["C#3"] == {"B->C": ["B#1"]}
    for d in range(4):
        assert inputs[f"D#{d}"] == {"C->D": ["C#0", "C#1", "C#2", "C#3"]}


def test_plan_text_inputs(capsys):
    code, out, _ = run(capsys, "plan", FLIP119, "--inputs")
    assert code == 0
    lines = out.splitlines()
    assert "inputs:" in lines
    assert "  B#1 <- A->B: A#1" in lines
    assert "  C#3 <- B->C: B#1" in lines
    assert "  D#0 <- C->D: C#0, C#1, C#2, C#3" in lines


def test_plan_inputs_rescale_3_to_7(capsys, tmp_path):
    path = write_spec(tmp_path, {"vertices": [{"id": "a", "parallelism": 3}, {"id": "b", "parallelism": 7}],
                                 "edges": [{"src": "a", "dst": "b", "distribution": "RESCALE"}]})
    _, out, _ = run(capsys, "plan", path, "--format", "json", "--inputs")
    inputs = json.loads(out)["inputs"]
    assert [inputs[f"b#{i}"]["a->b"] for i in range(7)] == [
        ["a#0"], ["a#0"], ["a#0"], ["a#1"], ["a#1"], ["a#2"], ["a#2"]
    ]


def test_plan_cyclic_merge_example(capsys):
    code, out, _ = run(capsys, "plan", str(JOBS / "cyclic_merge.json"), "--format", "json")
    assert code == 0
    data = json.loads(out)
    assert data["region_count"] == 1
    assert sorted(data["regions"][0]) == ["v1#0", "v2#0", "v3#0", "v4#0"]
    assert len(data["logical_regions"]) == 1


def test_plan_module_attribute(capsys, tmp_path, monkeypatch):
    module = f"rf_cli_jobs_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{module}.py").write_text(textwrap.dedent(
        """
        from regionflow.core.graph import JobGraph

        def job():
            graph = JobGraph("modjob")
            graph.add_vertex("A", 2)
            graph.add_vertex("B", 2)
            graph.connect("A", "B", "forward")
            return graph
        """
    ))
    monkeypatch.syspath_prepend(str(tmp_path))
    code, out, _ = run(capsys, "plan", f"{module}:job", "--format", "json")
    assert code == 0
    data = json.loads(out)
    assert data["job"] == "modjob" and data["region_count"] == 2


# ---- errors ---------------------------------------------------------------------------------------------------


def assert_error(code, out, err, *fragments):
    assert code == 2
    assert out == ""
    assert err.startswith("regionflow: error: ")
    assert "Traceback" not in err
    for fragment in fragments:
        assert fragment in err


def test_missing_file(capsys, tmp_path):
    path = str(tmp_path / "absent.json")
    assert_error(*run(capsys, "plan", path), path, "does not exist")


def test_invalid_json(capsys, tmp_path):
    path = write_spec(tmp_path, "{not json")
    assert_error(*run(capsys, "plan", path), "not valid JSON")


def test_spec_not_an_object(capsys, tmp_path):
    assert_error(*run(capsys, "plan", write_spec(tmp_path, "[]")), "JSON object")


def test_unknown_mode(capsys):
    assert_error(*run(capsys, "plan", FLIP119, "--mode", "turbo"), "'turbo'")


def test_unknown_distribution(capsys, tmp_path):
    path = write_spec(tmp_path, {"vertices": [{"id": "A", "parallelism": 1}, {"id": "B", "parallelism": 1}],
                                 "edges": [{"src": "A", "dst": "B", "distribution": "sideways"}]})
    assert_error(*run(capsys, "plan", path), "'sideways'", "A -> B")


def test_unknown_vertex_in_edge(capsys, tmp_path):
    path = write_spec(tmp_path, {"vertices": [{"id": "A", "parallelism": 1}],
                                 "edges": [{"src": "A", "dst": "Ghost", "distribution": "hash", "keys": ["k"]}]})
    assert_error(*run(capsys, "plan", path), "'Ghost'")


def test_forward_unequal(capsys, tmp_path):
    path = write_spec(tmp_path, {"vertices": [{"id": "A", "parallelism": 2}, {"id": "B", "parallelism": 5}],
                                 "edges": [{"src": "A", "dst": "B", "distribution": "forward"}]})
    assert_error(*run(capsys, "plan", path), "A -> B", "FORWARD")


def test_cycle_simple(capsys, tmp_path):
    path = write_spec(tmp_path, {
        "vertices": [{"id": n, "parallelism": 1} for n in ("loop1", "loop2")],
        "edges": [{"src": "loop1", "dst": "loop2", "distribution": "forward"},
                  {"src": "loop2", "dst": "loop1", "distribution": "forward"}],
    })
    assert_error(*run(capsys, "plan", path), "cycle", "loop1", "loop2")


def test_cycle_with_downstream_vertex(capsys, tmp_path):
    path = write_spec(tmp_path, {
        "vertices": [{"id": n, "parallelism": 1} for n in ("loop1", "loop2", "after")],
        "edges": [{"src": "loop1", "dst": "loop2", "distribution": "forward"},
                  {"src": "loop2", "dst": "loop1", "distribution": "forward"},
                  {"src": "loop2", "dst": "after", "distribution": "forward"}],
    })
    assert_error(*run(capsys, "plan", path), "cycle", "loop1", "loop2")


def test_mixed_resources(capsys, tmp_path):
    path = write_spec(tmp_path, {"vertices": [{"id": "A", "parallelism": 1, "resources": {"cpu": 1}},
                                              {"id": "B", "parallelism": 1}]})
    assert_error(*run(capsys, "plan", path), "A", "B", "resources")


def test_bad_module_reference(capsys):
    assert_error(*run(capsys, "plan", "rf_no_such_module_abc:job"), "'rf_no_such_module_abc'")


def test_unrecognised_reference(capsys):
    assert_error(*run(capsys, "plan", "just-a-word"), "'just-a-word'")


def test_no_command_prints_help(capsys):
    assert main([]) == 2
    assert "plan" in capsys.readouterr().out


# ---- bad input found by trying what a new user would (issue 18): one line, exit 2, the culprit named ---------

def _job(vertices, edges=()):
    return {"name": "j", "vertices": vertices, "edges": list(edges)}


TWO = [{"id": "A", "parallelism": 2}, {"id": "B", "parallelism": 2}]
BAD_SPECS = [
    (_job([{"id": ["A"], "parallelism": 1}]), "vertices[0].id must be a string"),
    (_job([{"id": "A", "parallelism": 10**9}]), "('A').parallelism is 1000000000"),
    (_job([{"id": "A", "parallelism": 32769}]), "at most 32768"),
    (_job([{"id": "A", "parallelism": 1, "resources": {"cpu": float("nan")}}]), "('A').resources.cpu is nan"),
    (_job([{"id": "A", "parallelism": 1, "resources": {"heap_mib": float("inf")}}]), "('A').resources.heap_mib is inf"),
    (_job([{"id": "A", "parallelism": 1, "sink": "../../etc"}]), "vertex 'A': sink path '../../etc' leaves"),
    (_job([{"id": "A", "parallelism": 1, "sink": {"path": "/.."}}, ]), None),  # absolute: used as given
    (_job(TWO, [{"src": "A", "dst": "B", "distribution": "forward", "keys": ["k"]}]),
     "A -> B is FORWARD but names key columns ['k']"),
    (_job(TWO, [{"src": ["A"], "dst": "B", "distribution": "forward"}]), "edges[0].src must be a string"),
]


@pytest.mark.parametrize("spec, message", BAD_SPECS)
def test_bad_job_specs_exit_2_naming_the_culprit(capsys, tmp_path, spec, message):
    code, out, err = run(capsys, "plan", write_spec(tmp_path, spec))
    if message is None:
        assert code == 0
        return
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
    assert message in err and "Traceback" not in err


def test_unreadable_job_files_exit_2_naming_the_file(capsys, tmp_path):
    not_utf8 = tmp_path / "latin1.json"
    not_utf8.write_bytes(b'{"name": "caf\xe9"}')
    deep = write_spec(tmp_path, "[" * 100000, "deep.json")
    cases = [(str(not_utf8), "is not UTF-8 text"), (str(tmp_path), "is a directory"),
             (deep, "nests JSON too deeply")]
    for path, message in cases:
        code, out, err = run(capsys, "plan", path)
        assert code == 2 and message in err and path in err, err


@pytest.mark.parametrize("argv, message", [
    (["plan", FLIP119, "--mode="], "--mode is empty"),
    (["simulate", FLIP119, "--mode", " "], "--mode is empty"),
    (["simulate", FLIP119, "--hosts="], "--hosts is empty"),
    (["simulate", FLIP119, "--durations", "A=nan"], "'A' has duration 'nan'"),
    (["simulate", FLIP119, "--durations", "A=inf"], "'A' has duration 'inf'"),
])
def test_empty_or_non_finite_cli_values_are_errors_not_defaults(capsys, argv, message):
    code, out, err = run(capsys, *argv)
    assert code == 2 and message in err, err


def test_status_with_a_mistyped_store_url_creates_nothing(capsys, tmp_path):
    missing = tmp_path / "typo" / "regionflow.db"
    code, out, err = run(capsys, "status", "d", "r", "--store-url", f"sqlite:///{missing}")
    assert code == 2 and "no regionflow store at" in err and str(missing) in err
    assert not missing.parent.exists()


def test_debug_adds_the_traceback_to_the_one_line_error(capsys, tmp_path):
    path = write_spec(tmp_path, {"vertices": [{"id": "A", "parallelism": 0}]})
    code, out, err = run(capsys, "--debug", "plan", path)
    assert code == 2 and "Traceback" in err and err.strip().splitlines()[-1].startswith("regionflow: error: ")


@pytest.mark.parametrize("argv, field", [
    (["topology", "--parallelism", "200", "--repeats", "1", "--naive-parallelism", "20", "--format", "json"],
     "build_ms"),
    (["schedule", "--parallelism", "50", "--slots", "10", "--format", "json"], None),
    (["pool", "--bulks", "200", "--slots", "20", "--hosts", "4", "--baseline-bulks", "0", "--format", "json"], None),
])
def test_every_bench_command_runs_and_prints_json(capsys, argv, field):
    """`python benchmarks/micro.py KIND` (benchmarks/ is on pytest's pythonpath)."""
    import micro

    assert micro.main(argv) == 0
    result = json.loads(capsys.readouterr().out)
    assert isinstance(result, dict) and result
    if field:
        assert result[field] >= 0
    machine = result["machine"]  # the interpreter's speed, probed around the run, and the quiet-box estimate
    assert machine["cpu_unit_ms"] > 0 and machine["slowdown"] == pytest.approx(machine["cpu_unit_ms"] / 24, abs=0.01)
    figure = {"topology": "build_ms", "schedule": "schedule_wall_s", "pool": "decisions_per_s"}[argv[0]]
    estimate = result["quiet_estimate"][figure]
    if argv[0] == "pool":
        assert estimate == pytest.approx(result[figure] * machine["slowdown"], rel=0.02, abs=1)
    else:
        assert estimate == pytest.approx(result[figure] / machine["slowdown"], rel=0.02, abs=0.002)
    if argv[0] == "topology":  # the tenth-size build of the same invocation, for the linearity ratio
        assert result["scaling"]["parallelism"] == 20 and result["scaling"]["time_ratio"] > 0
