"""Issue 43, items 6 and 7 on the pure-Python side: fractional memory sizes, ``reads`` given as None, a
job reference that is no job, a DAG file with no job, and extended resource names close to known ones.
Each refusal is one line naming the thing at fault and the fix; nothing here starts Spark or Airflow."""
from __future__ import annotations

import json

import pytest

from regionflow.cli import main
from regionflow.cli.plan import resource_name_warnings
from regionflow.core.errors import RegionflowError, ResourceError, SpecError
from regionflow.core.graph import JobGraph, load_job
from regionflow.core.jobspec import graph_from_spec, load_spec_file
from regionflow.core.resources import ResourceProfile, edit_distance, suspicious_resources


def spec(**resources):
    return {"name": "j", "vertices": [{"id": "clean", "parallelism": 1, "resources": resources}]}


def one_line_error(capsys, argv) -> str:
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    return err


# ---- 6a: memory sizes are whole MiB --------------------------------------------------------------------------


@pytest.mark.parametrize("field", ["heap_mib", "off_heap_mib", "managed_mib"])
def test_a_fractional_memory_size_in_a_spec_names_vertex_field_and_the_whole_number(field):
    with pytest.raises(SpecError) as info:
        graph_from_spec(spec(**{field: 1000.5}))
    assert str(info.value) == (f"vertices[0] ('clean').resources.{field} = 1000.5: memory sizes are whole MiB: "
                               f"write 1001")


def test_a_spec_file_with_a_fractional_heap_fails_plan_in_one_line(tmp_path, capsys):
    path = tmp_path / "job.json"
    path.write_text(json.dumps(spec(cpu=1, heap_mib=1000.5)))
    with pytest.raises(SpecError, match="job.json: vertices\\[0\\] \\('clean'\\).resources.heap_mib = 1000.5"):
        load_spec_file(str(path))
    assert "write 1001" in one_line_error(capsys, ["plan", str(path)])


def test_an_integral_float_memory_size_is_taken_as_whole_mib():
    resources = graph_from_spec(spec(cpu=0.5, heap_mib=1024.0, managed_mib=64.0)).vertices["clean"].resources
    assert (resources.heap_mib, resources.managed_mib, resources.cpu) == (1024, 64, 0.5)
    assert type(resources.heap_mib) is int and resources.describe() == "cpu=0.5,heap=1024MiB,managed=64MiB"


def test_the_profile_itself_refuses_a_fractional_memory_size():
    """The operator's resources={...} and ResourceProfile.of go through the same rule."""
    with pytest.raises(ResourceError, match=r"^resources.heap_mib is 1000.5; memory sizes are whole MiB: write 1001$"):
        ResourceProfile.from_dict({"cpu": 1, "heap_mib": 1000.5})
    with pytest.raises(ResourceError, match="resources.off_heap_mib is 0.25; .* write 1$"):
        ResourceProfile.of(off_heap_mib=0.25)  # type: ignore[arg-type]
    assert ResourceProfile.of(heap_mib=512.0).heap_mib == 512  # type: ignore[arg-type]
    with pytest.raises(ResourceError, match="'heap_mib' is -1.5; resources must be finite numbers >= 0"):
        ResourceProfile.of(heap_mib=-1.5)  # type: ignore[arg-type]  # a negative size: the range rule speaks


# ---- 6e (iv): reads=None is no reads ---------------------------------------------------------------------------


def test_reads_none_is_no_reads_in_python_and_in_a_spec():
    graph = JobGraph("j")
    assert graph.add_vertex("a", 1, reads=None).reads == ()
    assert graph.validate().vertices["a"].reads == ()
    with_null = {"vertices": [{"id": "a", "parallelism": 1, "reads": None}]}
    assert graph_from_spec(with_null).vertices["a"].reads == ()


def test_reads_that_are_no_paths_name_reads():
    with pytest.raises(RegionflowError, match=r"vertex 'a': reads=3 is not a path or a list of paths"):
        JobGraph("j").add_vertex("a", 1, reads=3)  # type: ignore[arg-type]


# ---- 6e (ii), (iii): a reference or a DAG file that holds no job ---------------------------------------------


def test_a_callable_that_needs_arguments_is_no_job_factory(capsys):
    err = one_line_error(capsys, ["plan", "json:dumps"])
    assert "job 'json:dumps' is a function that needs arguments" in err
    assert "name a JobGraph, or a function that takes no arguments and returns one" in err


def test_a_factory_returning_something_else_or_failing_is_one_line(capsys, tmp_path, monkeypatch):
    assert "job 'os:getcwd' returned a str, not a JobGraph; name a JobGraph" in one_line_error(
        capsys, ["plan", "os:getcwd"])
    with pytest.raises(SpecError, match="job 'math:pi' is a float, not a JobGraph; name a JobGraph"):
        load_job("math:pi")
    (tmp_path / "rf_failing_factory.py").write_text("def build():\n    raise KeyError('orders')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert "job 'rf_failing_factory:build': calling it failed: KeyError: 'orders'" in one_line_error(
        capsys, ["plan", "rf_failing_factory:build"])


def test_a_dag_file_without_a_job_says_what_a_job_is(tmp_path, capsys):
    path = tmp_path / "plain_dag.py"
    path.write_text("X = 1\n")
    err = one_line_error(capsys, ["plan", str(path)])
    assert "plain_dag.py' defines no regionflow job (no DAG in it has a SparkVertexOperator" in err
    assert "a job is a DAG of SparkVertexOperator tasks" in err and "--dag-id" not in err


# ---- 7: extended resource names near a known one ----------------------------------------------------------------


def test_names_within_two_edits_of_a_known_one_are_suspicious_and_known_ones_never():
    assert suspicious_resources(["cpus", "heap_mb", "gpus", "Managed_MiB", "offheap_mib", "fpgaa"]) == {
        "cpus": "cpu", "heap_mb": "heap_mib", "gpus": "gpu", "Managed_MiB": "managed_mib",
        "offheap_mib": "off_heap_mib", "fpgaa": "fpga"}
    assert suspicious_resources(["gpu", "fpga", "cpu"]) == {}  # gpu is one edit from cpu, and known
    assert suspicious_resources(["accelerator", "nvme_gb", "bandwidth"]) == {}  # far from every known name
    assert suspicious_resources(["gpux", "tpus"], declared=["tpu", "gpux"]) == {"tpus": "tpu"}
    assert edit_distance("heap_mb", "heap_mib") == 1 and edit_distance("cpus", "gpu") == 2
    assert edit_distance("", "cpu") == 3 and edit_distance("kitten", "sitting") == 3


def test_plan_warns_on_stderr_and_still_prints_the_plan(tmp_path, capsys):
    path = tmp_path / "job.json"
    path.write_text(json.dumps(spec(cpus=1, heap_mb=512, gpu=1)))
    assert main(["plan", str(path)]) == 0
    out, err = capsys.readouterr()
    assert "clean" in out and "warning" not in out
    assert err.strip() == ("regionflow: warning: vertex 'clean': resource 'cpus' is not a known name (did you mean "
                           "'cpu'?); resource 'heap_mb' is not a known name (did you mean 'heap_mib'?); it is taken "
                           "as an extended resource that only a host declaring it offers")
    assert resource_name_warnings(graph_from_spec(spec(cpu=1, gpu=1, fpga=1))) == []
