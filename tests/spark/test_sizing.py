"""Tests of regionflow.spark.launch.sizing: the one mapping from a granted slot request to Spark conf, the
unit's slot size, and the GPU discovery script shipped in the package.

No GPU can run here: the discovery script is run for real on this GPU-less host, and once with a
fake ``nvidia-smi`` on PATH that prints two indices (the only stand-in for hardware in this file)."""
from __future__ import annotations

import json
import os
import subprocess

import pytest

from regionflow.cli.plan import plan_output
from regionflow.core.graph import JobGraph
from regionflow.core.plan import Plan
from regionflow.core.resources import UNKNOWN, ResourceProfile
from regionflow.plan_document import plan_document
from regionflow.spark.launch.masters import Master
from regionflow.spark.launch.sizing import (
    GPU_DISCOVERY_SCRIPT,
    gpu_discovery_script,
    region_spark_conf,
    sized_conf,
    slot_size,
)
from regionflow.spark.launch.submit_args import SubmitConfigError, build_submit_kwargs
from regionflow.units.layout import UnitLayout

HOST_SLOT = ResourceProfile.of(cpu=4, heap_mib=8192)
GPU_REQUEST = ResourceProfile.of(cpu=1, heap_mib=1024, gpu=1)


def test_a_unit_is_sized_to_the_largest_request_in_every_dimension():
    small = ResourceProfile.of(cpu=2, heap_mib=512, managed_mib=256)
    wide = ResourceProfile.of(cpu=1, heap_mib=1024, off_heap_mib=128, gpu=1)
    assert slot_size([small, wide, small], HOST_SLOT) == ResourceProfile.of(
        cpu=2, heap_mib=1024, off_heap_mib=128, managed_mib=256, gpu=1)


@pytest.mark.parametrize("requests", [[], [UNKNOWN], [ResourceProfile.of(cpu=1), UNKNOWN]])
def test_a_unit_with_an_undeclared_request_takes_the_hosts_slot(requests):
    assert slot_size(requests, HOST_SLOT) == HOST_SLOT


def test_a_request_sizes_the_executor_not_the_hosts_slot():
    kwargs = build_submit_kwargs(application="/jobs/r.py", application_args=[], master="spark://127.0.0.1:7077",
                                 slots=3, slot_profile=slot_size([ResourceProfile.of(cpu=2, heap_mib=1024)],
                                                                 HOST_SLOT),
                                 job_conf=None, py_files=[], name="r")
    assert (kwargs["executor_cores"], kwargs["total_executor_cores"], kwargs["executor_memory"]) == (2, 6, "1024m")


def test_gpu_requests_get_the_shipped_discovery_script_which_the_job_may_replace():
    conf = sized_conf(Master.parse("spark://127.0.0.1:7077"), 2, GPU_REQUEST)
    key = "spark.executor.resource.gpu.discoveryScript"
    assert conf.proposed == {key: gpu_discovery_script()}
    assert conf.owned["spark.executor.resource.gpu.amount"] == "1" and key not in conf.owned
    mine = build_submit_kwargs(application="/jobs/r.py", application_args=[], master="spark://127.0.0.1:7077",
                               slots=1, slot_profile=GPU_REQUEST, job_conf={key: "/opt/gpus.sh"}, py_files=[],
                               name="r")
    assert mine["conf"][key] == "/opt/gpus.sh"
    with pytest.raises(SubmitConfigError, match="spark.executor.resource.gpu.amount"):
        build_submit_kwargs(application="/jobs/r.py", application_args=[], master="spark://127.0.0.1:7077",
                            slots=1, slot_profile=GPU_REQUEST, job_conf={"spark.executor.resource.gpu.amount": "2"},
                            py_files=[], name="r")


def test_local_masters_size_one_jvm_for_all_slots():
    conf = sized_conf(Master.parse("local[*]"), 3, ResourceProfile.of(cpu=1, heap_mib=1024, off_heap_mib=100))
    assert conf.owned == {"spark.driver.memory": "3072m", "spark.memory.offHeap.enabled": "true",
                          "spark.memory.offHeap.size": "300m"}


def _run_script(path_dirs: list[str]) -> dict:
    env = {"PATH": os.pathsep.join(path_dirs)}
    done = subprocess.run([gpu_discovery_script()], capture_output=True, text=True, env=env, timeout=30, check=True)
    return json.loads(done.stdout)


def test_the_gpu_discovery_script_finds_no_gpu_on_this_host():
    assert os.access(gpu_discovery_script(), os.X_OK)
    assert _run_script(["/usr/bin", "/bin"]) == {"name": "gpu", "addresses": []}


def test_the_gpu_discovery_script_lists_what_nvidia_smi_lists(tmp_path):
    fake = tmp_path / "nvidia-smi"  # a stand-in: no GPU (nor nvidia-smi) exists on this machine
    fake.write_text("#!/bin/sh\nprintf '0\\n1\\n'\n")
    fake.chmod(0o755)
    assert _run_script([str(tmp_path), "/usr/bin", "/bin"]) == {"name": "gpu", "addresses": ["0", "1"]}


def test_the_script_ships_with_the_package():
    assert os.path.isfile(GPU_DISCOVERY_SCRIPT)
    assert GPU_DISCOVERY_SCRIPT.endswith("spark/launch/resources/gpu_discovery.sh")


def test_unit_tasks_carry_the_slot_request_and_the_plan_shows_each_regions_spark_conf():
    graph = JobGraph("sized")
    graph.add_vertex("load", 2, resources=ResourceProfile.of(cpu=2, heap_mib=1024), fn="m:f")
    graph.add_vertex("score", 2, resources=ResourceProfile.of(cpu=1, heap_mib=2048, managed_mib=1024), fn="m:g",
                     slot_sharing_group="score")
    graph.connect("load", "score", "forward")
    plan = Plan(graph.validate(), "all-pipelined")
    layout = UnitLayout(plan, 1)
    assert layout.slot_request(0, 1) == {"cpu": 2.0, "heap_mib": 2048, "off_heap_mib": 0, "managed_mib": 1024}
    conf = region_spark_conf(ResourceProfile.from_dict(layout.slot_request(0, 1)), plan.slots(plan.regions[0]))
    assert conf["spark.executor.cores"] == "2" and conf["spark.executor.memory"] == "3072m"
    # managed memory is the unified region: 1024 / (3072 - 300 reserved)
    assert conf["spark.memory.fraction"] == f"{1024 / 2772:.4f}" and plan.slots(plan.regions[0]) == 2
    assert conf["spark.cores.max"] == "4"  # 2 slots (one per slot sharing group) of 2-core executors
    document = plan_document(plan)
    assert document["spark_conf"] == [conf] * len(plan.regions)
    assert json.loads(plan_output(plan.graph, plan.mode, "json"))["spark_conf"] == document["spark_conf"]
