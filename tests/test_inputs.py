"""Every input kind through its declared model: job specs, host specs, [regionflow] options.

- A table of bad inputs per kind: each must give exit 2 (CLI) or a RegionflowError whose one-line
  message names the field (JSON path, host field, option) and the value.
- `regionflow schema` prints JSON Schema from the same declarations: the example jobs validate
  against it, and bad specs fail both the schema and the model.
- Property tests (Hypothesis): random job specs and host specs give a clean result or a one-line
  error, never a traceback, in bounded time and memory (`MEMORY_BOUND`, enforced by `memory_bound`).
"""
from __future__ import annotations

import json
import math
import resource
import time
from pathlib import Path

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from memory_bound import MemoryBoundExceeded, MiB, memory_bound

from regionflow.cli import main
from regionflow.cli.schema import schema_of
from regionflow.config import RegionflowConfig
from regionflow.core.errors import RegionflowError
from regionflow.core.graph import MAX_PARALLELISM, JobGraph
from regionflow.core.jobspec import VERTEX
from regionflow.scheduling.hosts import Cluster

JOBS = Path(__file__).resolve().parents[1] / "examples" / "jobs"
V = [{"id": "A", "parallelism": 2}, {"id": "B", "parallelism": 2}]


def job(vertices=None, edges=None, **top):
    spec = {"name": "j", "vertices": V if vertices is None else vertices, **top}
    if edges is not None:
        spec["edges"] = edges
    return spec


def edge(**fields):
    return {"src": "A", "dst": "B", "distribution": "forward", **fields}


def vertex(**fields):
    return {"id": "A", "parallelism": 1, **fields}


BAD_JOBS = [
    (job(nodes=[]), ["unknown key 'nodes'"]),
    (job(name=""), ["name is empty"]),
    (job(name=3), ["name must be a string", "3"]),
    (job(vertices=[]), ["vertices is empty"]),
    (job(vertices={"A": 1}), ["vertices must be an array"]),
    (job(vertices=["A"]), ["vertices[0] must be an object", "'A'"]),
    (job(vertices=[{"parallelism": 1}]), ["vertices[0] needs 'id'"]),
    (job(vertices=[{"id": "A"}]), ["('A') needs 'parallelism'"]),
    (job(vertices=[vertex(id="")]), ["vertices[0].id is empty"]),
    (job(vertices=[vertex(id="a#b")]), ["id = 'a#b'", "'#'"]),
    (job(vertices=[vertex(id=["A"])]), ["vertices[0].id must be a string", "['A']"]),
    (job(vertices=[vertex(id=None)]), ["vertices[0].id must be a string", "None"]),
    (job(vertices=[vertex(parallelism=0)]), ["('A').parallelism is 0", "at least 1"]),
    (job(vertices=[vertex(parallelism=-2)]), ["('A').parallelism is -2"]),
    (job(vertices=[vertex(parallelism=32769)]), ["('A').parallelism is 32769", "at most 32768"]),
    (job(vertices=[vertex(parallelism=10**12)]), ["('A').parallelism is 1000000000000"]),
    (job(vertices=[vertex(parallelism=1.5)]), ["('A').parallelism must be an integer", "1.5"]),
    (job(vertices=[vertex(parallelism="2")]), ["('A').parallelism must be an integer", "'2'"]),
    (job(vertices=[vertex(parallelism=True)]), ["('A').parallelism must be an integer", "True"]),
    (job(vertices=[vertex(parallelism=None)]), ["('A').parallelism must be an integer"]),
    (job(vertices=[vertex(paralelism=2)]), ["'paralelism'", "did you mean 'parallelism'"]),
    (job(vertices=[vertex(resource={"cpu": 1})]), ["'resource'", "did you mean 'resources'"]),
    (job(vertices=[vertex(resources=3)]), ["('A').resources must be an object"]),
    (job(vertices=[vertex(resources="cpu=1")]), ["('A').resources must be an object", "'cpu=1'"]),
    (job(vertices=[vertex(resources={"cpu": "lots"})]), ["resources.cpu must be a number", "'lots'"]),
    (job(vertices=[vertex(resources={"cpu": -1})]), ["resources.cpu is -1", "at least 0"]),
    (job(vertices=[vertex(resources={"cpu": float("nan")})]), ["resources.cpu is nan", "finite"]),
    (job(vertices=[vertex(resources={"cpu": float("inf")})]), ["resources.cpu is inf", "finite"]),
    (job(vertices=[vertex(resources={"heap_mib": -5})]), ["resources.heap_mib is -5"]),
    (job(vertices=[vertex(resources={"gpu": True})]), ["resources.gpu must be a number", "True"]),
    (job(vertices=[vertex(resources={"unknown": True, "cpu": 1})]), ["resources.unknown must be a number"]),
    (job(vertices=[vertex(resources={"cpu": [1]})]), ["resources.cpu must be a number"]),
    (job(vertices=[vertex(slot_sharing_group="")]), ["slot_sharing_group is empty"]),
    (job(vertices=[vertex(slot_sharing_group=1)]), ["slot_sharing_group must be a string"]),
    (job(vertices=[vertex(fn=42)]), ["('A').fn must be a string", "42"]),
    (job(vertices=[vertex(fn="clean orders")]), ["fn = 'clean orders'", "package.module:function"]),
    (job(vertices=[vertex(fn="module_only")]), ["fn = 'module_only'"]),
    (job(vertices=[vertex(fn=":f")]), ["fn = ':f'"]),
    (job(vertices=[vertex(sink=123)]), ["('A').sink must be a string or object", "123"]),
    (job(vertices=[vertex(sink="")]), ["('A').sink is empty"]),
    (job(vertices=[vertex(sink="../../etc")]), ["vertex 'A': sink path '../../etc' leaves"]),
    (job(vertices=[vertex(sink="a/../../b")]), ["sink path 'a/../../b' leaves"]),
    (job(vertices=[vertex(sink={"format": "parquet"})]), ["sink needs 'path'"]),
    (job(vertices=[vertex(sink={"path": "out", "format": "csv"})]), ["sink.format is 'csv'", "parquet"]),
    (job(vertices=[vertex(sink={"path": "out", "fmt": "parquet"})]), ["'fmt'", "did you mean 'format'"]),
    (job(vertices=[vertex(reads=[""])]), ["reads[0] is empty"]),
    (job(vertices=[vertex(reads=[1])]), ["reads[0] must be a string"]),
    (job(vertices=[vertex(reads=3)]), ["('A').reads must be a string or array"]),
    (job(vertices=V + [V[0]]), ["duplicate vertex name 'A'"]),
    (job(edges={"src": "A"}), ["edges must be an array"]),
    (job(edges=["A->B"]), ["edges[0] must be an object"]),
    (job(edges=[{"src": "A", "distribution": "forward"}]), ["needs 'dst'"]),
    (job(edges=[{"dst": "B", "distribution": "forward"}]), ["needs 'src'"]),
    (job(edges=[{"src": "A", "dst": "B"}]), ["(A -> B) needs 'distribution'"]),
    (job(edges=[edge(src=["A"])]), ["edges[0].src must be a string"]),
    (job(edges=[edge(dst="")]), ["edges[0] ('A').dst is empty"]),
    (job(edges=[edge(distribution="spray")]), ["unknown distribution 'spray'"]),
    (job(edges=[edge(distribution=3)]), ["distribution must be a string"]),
    (job(edges=[edge(exchange="later")]), ["unknown exchange 'later'"]),
    (job(edges=[edge(exchange=1)]), ["exchange must be a string or null"]),
    (job(edges=[edge(weight=1)]), ["(A -> B) has unknown key 'weight'"]),
    (job(edges=[edge(key=["k"])]), ["'key'", "did you mean 'keys'"]),
    (job(edges=[edge(distribution="hash")]), ["A -> B is HASH but names no key columns"]),
    (job(edges=[edge(distribution="hash", keys=[])]), ["keys is empty"]),
    (job(edges=[edge(distribution="hash", keys=[""])]), ["keys[0] is empty"]),
    (job(edges=[edge(distribution="hash", keys=5)]), ["keys must be a string or array"]),
    (job(edges=[edge(keys=["k"])]), ["A -> B is FORWARD but names key columns ['k']"]),
    (job(edges=[edge(dst="C")]), ["unknown vertex 'C'"]),
    (job(edges=[edge(dst="A")]), ["self-loop"]),
    (job(vertices=[vertex(), vertex(id="B", parallelism=3)], edges=[edge()]), ["parallelisms differ"]),
    (job(edges=[edge(), edge(src="B", dst="A")]), ["cycle"]),
]


@pytest.mark.parametrize("spec, fragments", BAD_JOBS, ids=[str(i) for i in range(len(BAD_JOBS))])
def test_bad_job_specs(capsys, tmp_path, spec, fragments):
    path = tmp_path / "job.json"
    path.write_text(json.dumps(spec))
    code = main(["plan", str(path)])
    out, err = capsys.readouterr()
    assert out == ""
    assert_one_line_error(code, err, fragments)


def assert_one_line_error(code, err, fragments):
    """Exit 2 and one stderr line (no traceback) that holds every fragment."""
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    for fragment in fragments:
        assert fragment in err, (fragment, err)


BAD_HOSTS = [
    ("", ["--hosts is empty"]),
    (" ", ["--hosts is empty"]),
    ("a", ["must start with NAME:SLOTS"]),
    ("a:0", ["host 'a'.slots is 0", "at least 1", "1 to 32768"]),
    ("a:x", ["host 'a'.slots must be an integer", "got 'x'"]),
    ("a:nan", ["host 'a'.slots must be an integer", "got nan"]),
    ("a:1.5", ["host 'a'.slots must be an integer", "got 1.5"]),
    ("a:40000", ["host 'a'.slots is 40000", "at most 32768"]),
    ("a:2,cpu=0", ["host 'a'.cpu is 0", "greater than 0"]),
    ("a:2,cpu=nan", ["host 'a'.cpu is nan", "finite"]),
    ("a:2,cpu=inf", ["host 'a'.cpu is inf", "finite"]),
    ("a:2,cpu=-1", ["host 'a'.cpu is -1", "greater than 0"]),
    ("a:2,gpu=nan", ["host 'a'.gpu is nan", "finite"]),
    ("a:2,mem=lots", ["host 'a'.mem = 'lots'", "memory size"]),
    ("a:2,mem=-1g", ["host 'a'.mem = '-1g'", "memory size"]),
    ("a:2,cpus=2", ["'cpus'", "did you mean 'cpu'"]),
    ("a:2,slot_mme=1g", ["host 'a'.slot has unknown key 'mme'", "did you mean 'mem'"]),
    ("a:2,affinity=x", ["host 'a'.affinity = 'x'"]),
    ("a:2,affinity=3-1", ["host 'a'.affinity = '3-1'"]),
    ("a:2,affinity=0-100000000", ["core 100000000", "below 8192"]),
    ("a:2,affinity=0+0", ["lists a core twice"]),
    ("a:2,master=mesos://m:5050", ["host 'a'.master = 'mesos://m:5050'"]),
    ("a:2,master=yarn", []),  # fine: YARN and Kubernetes masters are hosts of the submit backend
    ("a:2,slots=3", ["field 'slots' is given twice"]),
    ("a:2;a:2", ["host 'a' is listed twice"]),
    ("a:2,cpu=1,affinity=0", []),  # fine: one pinned core, one cpu
    ("a:2,properties_file=app.properties", ["host 'a'.properties_file = 'app.properties'", "not an absolute path"]),
    ("a:2,master=spark://127.0.0.1:7077,properties_file=/no/such/app.properties", []),  # checked when used
    ('[{"name": "a", "slots": 2, "cpus": 2}]', ["'cpus'", "did you mean 'cpu'"]),
    ('[{"name": "a", "slots": 40000}]', ["host 'a'.slots is 40000"]),
    ('[{"name": "a", "slots": true}]', ["host 'a'.slots must be an integer"]),
    ('[{"name": "a", "slots": 2, "gpu": NaN}]', ["host 'a'.gpu is nan"]),
    ('[{"name": "a", "slots": 2, "slot": {"mme": "1g"}}]', ["host 'a'.slot", "did you mean 'mem'"]),
    ('[{"name": "a", "slots": 2, "affinity": [0, 9000]}]', ["host 'a'.affinity[1] is 9000"]),
    ('[{"slots": 2}]', ["host needs 'name'"]),
    ('{"hosts": 3}', ["a cluster must be a list of hosts"]),
    ('[{"name": "a", "slots": 2}', ["the hosts JSON is malformed"]),
]


@pytest.mark.parametrize("spec, fragments", BAD_HOSTS, ids=[str(i) for i in range(len(BAD_HOSTS))])
def test_bad_host_specs(capsys, spec, fragments):
    code = main(["simulate", str(JOBS / "flip119.json"), "--hosts", spec])
    out, err = capsys.readouterr()
    if not fragments:
        assert code == 0, err
        return
    assert_one_line_error(code, err, fragments)


NAN, INF = float("nan"), float("inf")
# The text form is read into the JSON form's dict and checked by the same model (hostspec.HOST), so a rule
# broken in either form gives the same one line, naming the host, the field and the value: (text, host dict
# of the JSON form, named 'a' unless it says otherwise, fragments).
SAME_RULE_HOSTS = [
    ("a:2,cpu=nan", {"slots": 2, "cpu": NAN}, ["host 'a'.cpu is nan", "finite"]),
    ("a:2,gpu=NaN", {"slots": 2, "gpu": NAN}, ["host 'a'.gpu is nan", "finite"]),
    ("a:2,mem=nan", {"slots": 2, "mem": NAN}, ["host 'a'.mem is nan", "finite"]),
    ("a:2,slot_managed=nan", {"slots": 2, "slot": {"managed": NAN}}, ["host 'a'.slot.managed is nan", "finite"]),
    ("a:2,ext.fpga=inf", {"slots": 2, "ext": {"fpga": INF}}, ["host 'a'.ext.fpga is inf", "finite"]),
    ("a:nan", {"slots": NAN}, ["host 'a'.slots must be an integer", "got nan"]),
    ("a:2,cpu=-1", {"slots": 2, "cpu": -1}, ["host 'a'.cpu is -1", "greater than 0"]),
    ("a:2,slot_cpu=0", {"slots": 2, "slot": {"cpu": 0}}, ["host 'a'.slot.cpu is 0", "greater than 0"]),
    ("a:2,gpu=-1", {"slots": 2, "gpu": -1}, ["host 'a'.gpu is -1", "at least 0"]),
    ("a:2,off_heap=-5", {"slots": 2, "off_heap": -5}, ["host 'a'.off_heap is -5", "at least 0"]),
    ("a:2,slot_ext.fpga=-1", {"slots": 2, "slot": {"ext": {"fpga": -1}}}, ["host 'a'.slot.ext.fpga is -1"]),
    ("a:-2", {"slots": -2}, ["host 'a'.slots is -2", "at least 1"]),
    ("a:40000", {"slots": 40000}, ["host 'a'.slots is 40000", "at most 32768"]),
    ("a:slots=100000000", {"slots": 100000000}, ["host 'a'.slots is 100000000", "at most 32768"]),
    ("a:2,affinity=0-9000", {"slots": 2, "affinity": "0-9000"}, ["host 'a'.affinity = '0-9000'", "core 9000",
                                                                  "below 8192"]),
    ("a:1.5", {"slots": 1.5}, ["host 'a'.slots must be an integer", "got 1.5"]),
    ("a:2,cpu=lots", {"slots": 2, "cpu": "lots"}, ["host 'a'.cpu must be a number", "got 'lots'"]),
    ("a:2,managed=lots", {"slots": 2, "managed": "lots"}, ["host 'a'.managed = 'lots'", "memory size"]),
    ("a:2,cpus=2", {"slots": 2, "cpus": 2}, ["host 'a' has unknown key 'cpus'", "did you mean 'cpu'"]),
    ("a:2,masterr=local", {"slots": 2, "masterr": "local"}, ["unknown key 'masterr'", "did you mean 'master'"]),
    ("a:2,slot_mme=1g", {"slots": 2, "slot": {"mme": "1g"}}, ["host 'a'.slot has unknown key 'mme'",
                                                               "did you mean 'mem'"]),
    ("a:2,ext.cpu=1", {"slots": 2, "ext": {"cpu": 1}}, ["host 'a'.ext = {'cpu': 1}", "not an extended resource"]),
    ("a:2,master=", {"slots": 2, "master": ""}, ["host 'a'.master is empty"]),
    (":2", {"name": "", "slots": 2}, ["host ''.name is empty"]),
    ("a:cpu=2", {"cpu": 2}, ["host 'a' needs 'slots'"]),
    ("a b:2", {"name": "a b", "slots": 2}, ["host 'a b'.name = 'a b'", "letters, digits"]),
    ("a:2,master=mesos://m:5050", {"slots": 2, "master": "mesos://m:5050"},
     ["host 'a'.master = 'mesos://m:5050'", "spark://host:port", "yarn", "k8s://https://host:port"]),
    ("a:2,affinity=0+0", {"slots": 2, "affinity": "0+0"}, ["host 'a'.affinity = '0+0'", "a core twice"]),
    ("a:2,cpu=4,affinity=0-1", {"slots": 2, "cpu": 4, "affinity": [0, 1]}, ["host 'a': cpu=4",
                                                                             "affinity pins only 2 cores"]),
]


@pytest.mark.parametrize("text, host, fragments", SAME_RULE_HOSTS, ids=[t for t, _, _ in SAME_RULE_HOSTS])
def test_text_and_json_host_forms_break_a_rule_with_the_same_error(capsys, text, host, fragments):
    spec = json.dumps([{"name": "a", **host}])
    errors = []
    for hosts in (text, spec):
        code = main(["simulate", str(JOBS / "flip119.json"), "--hosts", hosts])
        out, err = capsys.readouterr()
        assert_one_line_error(code, err, fragments)
        errors.append(err)
    assert errors[0] == errors[1]
    messages = []
    for hosts in (text, spec):  # [regionflow] hosts: the same, after the option's name and value
        with pytest.raises(RegionflowError) as info:
            RegionflowConfig.from_values(lambda name, hosts=hosts: {"hosts": hosts}.get(name, ""), airflow_home="/x")
        prefix = f"[regionflow] hosts = {hosts!r}: "
        assert str(info.value).startswith(prefix), info.value
        messages.append(str(info.value)[len(prefix):])
    assert messages[0] == messages[1] and messages[0] in errors[0]


BAD_OPTIONS = [
    ("max_shards", "0", "max_shards = 0 must be at least 1"),
    ("max_shards", "two", "max_shards = 'two' is not a int"),
    ("max_shards", "2.5", "max_shards = '2.5' is not a int"),
    ("blocklist_expiry", "0", "blocklist_expiry = 0.0 must be greater than 0"),
    ("blocklist_expiry", "-5", "blocklist_expiry = -5.0 must be greater than 0"),
    ("blocklist_expiry", "nan", "blocklist_expiry = 'nan' must be a finite number"),
    ("resource_wait_timeout", "inf", "resource_wait_timeout = 'inf' must be a finite number"),
    ("slot_idle_timeout", "-1", "slot_idle_timeout = -1.0 must be at least 0"),
    ("session_base_port", "80", "session_base_port = 80 must be at least 1024"),
    ("session_base_port", "70000", "session_base_port = 70000 must be at most 65535"),
    ("backend", "yarn", "backend = 'yarn'"),
    ("mode", "fast", "mode: unknown exchange mode 'fast'"),
    ("hosts", "a:0", "hosts = 'a:0': host 'a'.slots is 0"),
    ("spark_conf", "{oops", "spark_conf is not valid JSON"),
    ("spark_conf", "[1]", "spark_conf must be a JSON object"),
    ("spark_conf", '{"spark.a": {"b": 1}}', "spark_conf: 'spark.a' must be a string"),
    ("spark_conf", '{"spark.a": null}', "spark_conf: 'spark.a' must be a string"),
    ("speculation", "maybe", "speculation is 'maybe'"),
    ("speculation_quantile", "2", "quantile"),
    ("speculation_multiplier", "0.5", "multiplier"),
]


@pytest.mark.parametrize("option, value, fragment", BAD_OPTIONS, ids=[o + "=" + v for o, v, _ in BAD_OPTIONS])
def test_bad_options(option, value, fragment):
    with pytest.raises(RegionflowError) as info:
        RegionflowConfig.from_values(lambda name: {option: value}.get(name, ""), airflow_home="/x")
    message = str(info.value)
    assert fragment in message and "\n" not in message, message


@pytest.mark.parametrize("value, resolved", [
    ("", "/srv/airflow/regionflow-data"),
    ("data", "/srv/airflow/data"),  # relative: to AIRFLOW_HOME, not to the working directory of each process
    ("./runs/../data/", "/srv/airflow/data"),
    ("/var/regionflow", "/var/regionflow"),
    ("hdfs://nn:8020/regionflow", "hdfs://nn:8020/regionflow"),  # a URI: as given
    ("s3a://bucket/regionflow", "s3a://bucket/regionflow"),
    ("file:/tmp/regionflow", "file:/tmp/regionflow"),
])
def test_a_relative_data_dir_is_resolved_once_against_airflow_home(value, resolved, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = RegionflowConfig.from_values(lambda name: {"data_dir": value}.get(name, ""), airflow_home="/srv/airflow")
    assert config.data_dir == resolved


# ---- JSON Schema from the same declarations ------------------------------------------------------------------


@pytest.mark.parametrize("path", sorted(JOBS.glob("*.json")), ids=lambda p: p.name)
def test_example_jobs_validate_against_the_printed_schema(path):
    jsonschema.validate(json.loads(path.read_text()), schema_of("job"))


@pytest.mark.parametrize("index", [0, 12, 20, 25, 44, 61])
def test_bad_specs_fail_the_printed_schema_too(index):
    spec, _ = BAD_JOBS[index]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(spec, schema_of("job"))


def test_schema_command_prints_all_three_kinds(capsys):
    for kind in ("job", "hosts", "config"):
        assert main(["schema", kind]) == 0
        printed = json.loads(capsys.readouterr().out)
        jsonschema.Draft202012Validator.check_schema(printed)
    jsonschema.validate([{"name": "a", "slots": 2, "cpu": 2, "mem": "4g", "slot": {"mem": "2g"}}], schema_of("hosts"))
    assert set(schema_of("config")["properties"]) >= {"hosts", "blocklist_expiry", "backend"}


# ---- property tests -----------------------------------------------------------------------------------------

# Memory one plan, simulate or host parse may add. The largest input the strategies below can build and the
# model accepts (4 vertices at the cap of 32768 subtasks, 5 edges, all-blocking) adds about 280 MiB of address
# space to simulate (about 160 MiB to plan; a host parse under 1 MiB), so 512 MiB leaves 1.8x margin. The plan
# holds about 1.7 KiB per subtask, so without the cap a parallelism such as the issue's 10^9 would need
# terabytes (test_an_uncapped_parallelism_would_exceed_the_memory_bound).
MEMORY_BOUND = 512 * MiB

NAMES = st.sampled_from(["A", "B", "C", "D", "", "a#1", 3, None, ["A"]])
NUMBERS = st.one_of(st.integers(-3, 40000), st.floats(allow_nan=True, allow_infinity=True), st.booleans(),
                    st.text(max_size=3), st.none())
VERTICES = st.lists(st.fixed_dictionaries({"id": NAMES, "parallelism": NUMBERS},
                                          optional={"resources": st.dictionaries(
                                              st.sampled_from(["cpu", "heap_mib", "gpu", "unknown", "x"]), NUMBERS,
                                              max_size=3),
                                              "sink": st.one_of(st.text(max_size=8), st.integers()),
                                              "fn": st.one_of(st.text(max_size=8), st.integers()),
                                              "colour": st.none()}), max_size=4)
EDGES = st.lists(st.fixed_dictionaries({"src": NAMES, "dst": NAMES, "distribution": st.sampled_from(
    ["forward", "rescale", "hash", "rebalance", "broadcast", "spray", 3])},
    optional={"keys": st.one_of(st.lists(st.text(max_size=2), max_size=2), st.integers()),
              "exchange": st.sampled_from(["pipelined", "blocking", "later", None])}), max_size=5)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(vertices=VERTICES, edges=EDGES, mode=st.sampled_from(["all-blocking", "all-pipelined"]))
def test_random_job_specs_plan_cleanly_or_fail_in_one_line(tmp_path_factory, vertices, edges, mode):
    path = tmp_path_factory.mktemp("spec") / "job.json"
    path.write_text(json.dumps({"name": "r", "vertices": vertices, "edges": edges}))
    _one_line_or_success(["plan", str(path), "--mode", mode], seconds=TIME_BOUND)
    _one_line_or_success(["simulate", str(path), "--mode", mode, "--hosts", "a:2;b:1"], seconds=TIME_BOUND)


# The largest spec the strategies build (4 vertices at the 32768 cap, all-blocking) simulates in ~8 s
# on a quiet 2-core box; the bound is what a loaded CI machine needs, and still catches a hang or an
# uncapped parallelism (10^9 subtasks would take hours).
TIME_BOUND = 30.0

TOKENS = st.sampled_from(["a:2", "b:slots=1", "cpu=2", "cpu=nan", "mem=4g", "mem=x", "gpu=1", "affinity=0-1",
                          "affinity=0-99999999", "slot_mem=1g", "slots=99999", "master=local[2]", "cpus=1", "", ":"])


@settings(max_examples=150, deadline=None)
@given(tokens=st.lists(TOKENS, min_size=1, max_size=6), separators=st.lists(st.sampled_from([",", ";"]),
                                                                             min_size=6, max_size=6))
def test_random_host_specs_parse_cleanly_or_fail_in_one_line(tokens, separators):
    spec = "".join(token + separator for token, separator in zip(tokens, separators, strict=False)).rstrip(",;")
    try:
        with memory_bound(MEMORY_BOUND, f"parsing --hosts {spec!r}"):
            cluster = Cluster.parse(spec)
    except RegionflowError as error:
        assert "\n" not in str(error) and str(error)
        return
    assert cluster.total_slots >= 1 and all(math.isfinite(h.profile.cpu) for h in cluster)


def _one_line_or_success(argv, seconds):
    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()
    started = time.monotonic()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), memory_bound(MEMORY_BOUND, argv[0]):
        code = main(argv)
    assert time.monotonic() - started < seconds
    if code == 0 or (argv[0] == "simulate" and code == 1):  # simulate: 1 = the jobs cannot complete
        return
    assert_one_line_error(code, err.getvalue(), [])


def test_a_graph_read_from_a_spec_is_written_back_to_the_same_spec():
    spec = json.loads((JOBS / "flip119.json").read_text())
    graph = JobGraph.from_spec(spec)
    assert JobGraph.from_spec(graph.to_spec()).to_spec() == graph.to_spec()


def test_the_memory_bound_stops_an_allocation_beyond_it():
    limits = resource.getrlimit(resource.RLIMIT_AS)
    with pytest.raises(MemoryBoundExceeded, match="a 128 MiB buffer needed more than 64 MiB"):
        with memory_bound(64 * MiB, "a 128 MiB buffer"):
            bytearray(128 * MiB)
    with memory_bound(64 * MiB):
        assert len(bytearray(16 * MiB)) == 16 * MiB
    assert resource.getrlimit(resource.RLIMIT_AS) == limits


@pytest.fixture
def uncapped_parallelism():
    """The job model without its parallelism cap (the declared field is frozen: lifted and put back here)."""
    declared = VERTEX.field("parallelism")
    object.__setattr__(declared, "maximum", None)
    yield
    object.__setattr__(declared, "maximum", MAX_PARALLELISM)


def test_an_uncapped_parallelism_would_exceed_the_memory_bound(tmp_path, capsys, uncapped_parallelism):
    def plan(parallelism):
        path = tmp_path / f"p{parallelism}.json"
        path.write_text(json.dumps(job(vertices=[vertex(parallelism=parallelism)])))
        with memory_bound(MEMORY_BOUND, f"plan with parallelism {parallelism}"):
            return main(["plan", str(path)])

    assert plan(MAX_PARALLELISM) == 0  # the largest parallelism the model accepts plans within the bound
    with pytest.raises(MemoryBoundExceeded, match="parallelism 10000000 needed more than 512 MiB"):
        plan(10 ** 7)  # stopped at the bound, long before the ~17 GB it would take
    capsys.readouterr()
