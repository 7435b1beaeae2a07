"""`regionflow simulate`: the four FLIP-119 scenarios, and a property test of fifo-bulk."""
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from random_jobs import random_jobs

from regionflow.cli import main
from regionflow.core.errors import SpecError
from regionflow.core.graph import load_job
from regionflow.core.plan import Plan
from regionflow.scheduling.hosts import Cluster
from regionflow.scheduling.simulate import parse_durations, simulate

JOBS = "examples/jobs/"


def plans(*files, mode=None):
    return [Plan(load_job(JOBS + f), mode) for f in files]


def test_two_slots_pipelined_regions_per_task_wedges_fifo_bulk_completes():
    cluster = Cluster.local_default(2)
    naive = simulate(plans("pipelined_pair.json"), cluster, allocator="per-task")
    assert not naive.completed and "deadlock" in naive.reason
    fifo = simulate(plans("pipelined_pair.json"), cluster)
    assert fifo.completed and fifo.makespan == 1.0


def test_two_jobs_each_needing_the_whole_cluster_complete_oldest_first():
    cluster = Cluster.local_default(2)
    result = simulate(plans("wide.json", "wide.json"), cluster)
    assert result.completed
    assert result.job_makespans == {"wide": 1.0, "wide-2": 2.0}
    assert not simulate(plans("wide.json", "wide.json"), cluster, allocator="per-task").completed


def test_big_region_starts_before_a_stream_of_small_ones_dries_up():
    result = simulate(plans("stream.json", "big.json"), Cluster.local_default(4))
    assert result.completed
    big = next(run for run in result.runs if run.job == "big")
    assert big.start == 1.0  # right after the first wave of the stream, not at its end
    assert result.job_makespans["stream"] > big.end
    assert result.peak_slots == 4


def test_region_bigger_than_cluster_is_rejected_at_once():
    result = simulate(plans("big.json"), Cluster.local_default(3))
    assert not result.completed and result.makespan == 0
    assert "load+join[0]" in result.reason and "needs 4 slots" in result.reason and "3 slots" in result.reason


def test_durations_and_their_errors():
    assert parse_durations("A=2, B=0.5") == {"A": 2.0, "B": 0.5}
    result = simulate(plans("flip119.json", mode="all-blocking"), Cluster.local_default(1),
                      durations={"A": 2.0})
    assert result.makespan == 2 * 2 + 10  # 2 A's of 2.0, 10 others of 1.0, on one slot
    for bad, word in (("A", "VERTEX=SECONDS"), ("A=x", "not a number"), ("A=-1", "finite number of seconds >= 0"),
                      ("A=nan", "finite")):
        try:
            parse_durations(bad)
        except Exception as error:  # noqa: BLE001
            assert word in str(error)
        else:
            raise AssertionError(f"{bad!r} was accepted")


def test_cli_simulate_json_and_exit_codes(capsys):
    assert main(["simulate", JOBS + "wide.json", JOBS + "wide.json", "--slots", "2", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["completed"] is True and len(data["regions"]) == 2
    assert main(["simulate", JOBS + "pipelined_pair.json", "--slots", "2", "--allocator", "per-task"]) == 1
    assert "deadlock" in capsys.readouterr().out
    assert main(["simulate", JOBS + "big.json", "--slots", "0"]) == 2
    assert "--slots" in capsys.readouterr().err


@settings(max_examples=150, deadline=None)
@given(random_jobs(), st.integers(1, 8), st.integers(1, 3))
def test_fifo_bulk_completes_whenever_every_region_fits(job_plans, slots_per_host, hosts):
    cluster = Cluster.parse(";".join(f"h{i}:slots={slots_per_host}" for i in range(hosts)))
    result = simulate(job_plans, cluster)
    fits = all(plan.min_slots <= cluster.total_slots for plan in job_plans)
    assert result.completed == fits, result.reason
    assert result.peak_slots <= cluster.total_slots
    if fits:
        assert all(run.start is not None and run.end is not None for run in result.runs)
        for run in result.runs:
            assert run.start >= run.ready


def test_cli_simulate_takes_gpu_hosts_and_yarn_and_kubernetes_masters(capsys, tmp_path):
    spec = tmp_path / "train.json"
    spec.write_text(json.dumps({"name": "train", "vertices": [
        {"id": "load", "parallelism": 2, "resources": {"cpu": 1, "heap_mib": 512}},
        {"id": "fit", "parallelism": 1, "resources": {"cpu": 1, "heap_mib": 512, "gpu": 1}, "slot_sharing_group": "g"},
    ], "edges": [{"src": "load", "dst": "fit", "distribution": "REBALANCE", "exchange": "BLOCKING"}]}))
    hosts = "n1:2,master=yarn;p1:1,gpu=1,master=k8s://https://api.k:6443"
    assert main(["simulate", str(spec), "--hosts", hosts, "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["completed"] is True
    assert {region["region"].split("[")[0]: region["hosts"] for region in data["regions"]} == {
        "load": ["n1"], "fit": ["p1"]}
    assert main(["simulate", str(spec), "--hosts", "n1:2,master=yarn"]) != 0
    out = capsys.readouterr()
    assert "gpu: asked 1 per slot, the largest slot offers 0 (host 'n1')" in out.out + out.err


def test_a_vertex_given_two_durations_is_refused_naming_it(capsys):
    """`--durations A=1,A=5` kept the last one silently."""
    with pytest.raises(SpecError, match="--durations names vertex 'A' twice; give each vertex one duration"):
        parse_durations("A=1, B=2, A=5")
    assert main(["simulate", JOBS + "flip119.json", "--durations", "A=1,A=5"]) == 2
    assert "vertex 'A' twice" in capsys.readouterr().err
