"""Tests of regionflow.scheduling.fit: slot requests no host can serve, said per vertex and resource,
and refused before anything runs (``regionflow run``'s preflight, ``regionflow.transform`` at parse
time: see tests/airflow/test_transform.py)."""
from __future__ import annotations

import pytest

from regionflow.core.graph import JobGraph
from regionflow.core.plan import Plan
from regionflow.core.resources import ResourceProfile
from regionflow.scheduling.errors import SchedulingError
from regionflow.scheduling.fit import misfits, shortfall
from regionflow.scheduling.hosts import Cluster
from regionflow.units.runner import LocalRunner, RunOptions


def plan_of(**resources: ResourceProfile) -> Plan:
    graph = JobGraph("fit")
    previous = None
    for name, profile in resources.items():
        group = "gpu" if profile.amount("gpu") else None
        graph.add_vertex(name, 2, resources=profile, fn="m:f", slot_sharing_group=group)
        if previous:
            graph.connect(previous, name, "forward")
        previous = name
    return Plan(graph.validate(), "all-pipelined")


def test_a_gpu_request_on_a_cluster_without_gpus_names_vertex_resource_ask_and_largest_offer():
    plan = plan_of(load=ResourceProfile.of(cpu=1, heap_mib=512), train=ResourceProfile.of(cpu=1, heap_mib=512, gpu=1))
    (message,) = misfits(plan, Cluster.parse("a:2;b:4,mem=8g").hosts)
    assert message.startswith("vertex 'train' asks cpu=1,heap=512MiB,gpu=1 per slot, which no host offers: ")
    assert "gpu: asked 1 per slot, the largest slot offers 0 (host 'a')" in message
    assert "hosts: a: 2 x cpu=1,heap=1024MiB; b: 4 x cpu=1,heap=2048MiB" in message


def test_more_memory_than_any_host_names_the_largest_host():
    plan = plan_of(big=ResourceProfile.of(cpu=1, heap_mib=4096))
    (message,) = misfits(plan, Cluster.parse("a:2;b:2,mem=6g").hosts)
    assert "heap_mib: asked 4096 per slot, the largest slot offers 3072 (host 'b')" in message


def test_a_slot_sharing_group_names_all_its_vertices():
    plan = plan_of(a=ResourceProfile.of(cpu=1, heap_mib=700), b=ResourceProfile.of(cpu=1, heap_mib=700))
    (message,) = misfits(plan, Cluster.parse("h:2").hosts)
    assert message.startswith("vertices 'a', 'b' (slot sharing group 'default') asks cpu=2,heap=1400MiB")
    assert "cpu: asked 2 per slot, the largest slot offers 1" in message and "heap_mib: asked 1400" in message


def test_resources_offered_only_on_different_hosts_are_said_to_be_split():
    profile = ResourceProfile.of(cpu=1, heap_mib=4096, gpu=1)
    hosts = Cluster.parse("g:1,gpu=1;m:1,mem=8g").hosts
    assert shortfall(profile, hosts) == ("each resource is offered by some host, but no single host's slot has all "
                                         "of them")


def test_requests_that_fit_give_no_message():
    plan = plan_of(a=ResourceProfile.of(cpu=1, heap_mib=512, gpu=1))
    assert misfits(plan, Cluster.parse("g:2,gpu=2").hosts) == []
    assert shortfall(ResourceProfile.of(cpu=1), Cluster.parse("h:1").hosts) == ""


def test_regionflow_run_refuses_the_job_before_any_spark_work(tmp_path):
    plan = plan_of(train=ResourceProfile.of(cpu=1, heap_mib=512, gpu=1))
    runner = LocalRunner("m:job", plan, RunOptions(data_dir=str(tmp_path), cluster=Cluster.parse("a:2"), progress=None,
                                                   backend="submit"))
    with pytest.raises(SchedulingError, match="job 'fit' cannot run on this cluster: vertex 'train' asks .*gpu"):
        runner.preflight()
    assert list(tmp_path.iterdir()) == []  # nothing claimed, nothing written


def test_a_resource_name_near_a_known_one_gets_a_did_you_mean_where_the_request_is_refused(tmp_path):
    """Issue 43 item 7: {"cpus": 1, "heap_mb": 512} are two extended resources no host offers; the
    preflight of `regionflow run` (misfits) and the pool's unfulfillable-bulk message say what was meant."""
    from regionflow.scheduling.errors import UnfulfillableBulk
    from regionflow.scheduling.pool import Bulk, SlotPool

    typo = ResourceProfile.from_dict({"cpus": 1, "heap_mb": 512})
    plan = plan_of(clean=typo)
    (message,) = misfits(plan, Cluster.parse("a:2").hosts)
    assert ("resource 'cpus' is not a known name (did you mean 'cpu'?); resource 'heap_mb' is not a known name "
            "(did you mean 'heap_mib'?); lower the vertex's resources") in message
    runner = LocalRunner("m:job", plan, RunOptions(data_dir=str(tmp_path), cluster=Cluster.parse("a:2"), progress=None,
                                                   backend="submit"))
    with pytest.raises(SchedulingError, match=r"vertex 'clean' asks .*cpus=1.*did you mean 'cpu'\?"):
        runner.preflight()
    with pytest.raises(UnfulfillableBulk, match=r"no host offers a slot that fits .*did you mean 'heap_mib'\?"):
        SlotPool(Cluster.parse("a:2")).submit(Bulk("b", "job", "clean", (typo,)))


def test_names_a_host_declares_and_gpu_are_never_taken_for_typos():
    gpus = plan_of(train=ResourceProfile.of(cpu=1, gpu=1), tag=ResourceProfile.of(cpu=1, tpus=1))
    messages = misfits(gpus, Cluster.parse("a:2,ext.tpu=2").hosts)
    assert len(messages) == 2 and "did you mean" not in messages[0]  # gpu: known (one edit from cpu)
    assert "resource 'tpus' is not a known name (did you mean 'tpu'?)" in messages[1]  # 'tpu': host a declares it
    assert misfits(plan_of(tag=ResourceProfile.of(cpu=1, tpus=1)), Cluster.parse("a:2,ext.tpus=2").hosts) == []
