"""YARN and Kubernetes hosts (submit backend): spark-submit arguments and pod templates, checked exactly.

Neither YARN nor Kubernetes can run on the machine the tests run on (no ResourceManager, no API
server): these tests build the real SparkSubmitHook of Airflow's Spark provider from regionflow's
arguments and check the command it would run, and the pod template regionflow writes."""
from __future__ import annotations

import json

import pytest

from regionflow.core.resources import ResourceProfile
from regionflow.scheduling.hosts import Cluster
from regionflow.spark.data.task import UnitTask
from regionflow.spark.launch.cluster_managers import excluded_nodes, pod_template, write_pod_template
from regionflow.spark.launch.sizing import gpu_discovery_script
from regionflow.spark.launch.submission import unit_submission
from regionflow.spark.launch.submit import RegionSubmission
from regionflow.spark.launch.submit_args import SubmitConfigError, build_submit_kwargs, spark_child_env

APP = "/jobs/region.py"


def DRIVER_ENV(prefix: str) -> dict[str, str]:  # noqa: N802 - reads like the constant it stands for
    """The hook hands spark-submit's environment (`spark_child_env`) to the cluster's driver side."""
    return {prefix + key: value for key, value in spark_child_env(local_ip=None).items()}

REQUEST = ResourceProfile.of(cpu=2, heap_mib=2048, gpu=1)
CLUSTER = Cluster.parse("n1:slots=4,master=yarn;n2:slots=4,master=yarn;"
                        "p1:slots=4,master=k8s://https://api.k:6443;p2:slots=4,master=k8s://api.k:6443;"
                        "local:2")


def command_for(master: str, **extra) -> list[str]:
    kwargs = build_submit_kwargs(application=APP, application_args=["--task", "t.json"], master=master, slots=3,
                                 slot_profile=REQUEST, job_conf=None, py_files=[], name="region r", **extra)
    return RegionSubmission(APP, kwargs).make_hook()._build_spark_submit_command(APP)


def confs(command: list[str]) -> dict[str, str]:
    pairs = [command[i + 1] for i, arg in enumerate(command) if arg == "--conf"]
    return dict(pair.split("=", 1) for pair in pairs)


def test_a_yarn_submission_asks_one_executor_container_per_slot_and_excludes_blocked_nodes():
    command = command_for("yarn", excluded_nodes=["n2", "bad-node"])
    assert command[command.index("--master") + 1] == "yarn"
    assert command[command.index("--executor-cores") + 1] == "2"
    assert command[command.index("--executor-memory") + 1] == "2048m"
    assert "--total-executor-cores" not in command and command[command.index("--name") + 1] == "regionflow region r"
    assert confs(command) == {
        **DRIVER_ENV("spark.yarn.appMasterEnv."),
        "spark.ui.enabled": "false",
        "spark.dynamicAllocation.enabled": "false",
        "spark.executor.instances": "3",
        "spark.task.cpus": "2",
        "spark.executor.resource.gpu.amount": "1",
        "spark.task.resource.gpu.amount": "1",
        "spark.executor.resource.gpu.discoveryScript": gpu_discovery_script(),
        "spark.yarn.exclude.nodes": "bad-node,n2",
        "spark.master": "yarn",
    }


def test_a_kubernetes_submission_asks_pods_per_slot_and_keeps_them_off_blocked_nodes(tmp_path):
    template = write_pod_template(str(tmp_path), ["p2", "p1", "p2"])
    command = command_for("k8s://api.k:6443", excluded_nodes=["p1", "p2"], pod_template_file=template)
    assert command[command.index("--master") + 1] == "k8s://https://api.k:6443"
    assert confs(command) == {
        **DRIVER_ENV("spark.kubernetes.driverEnv."),
        "spark.ui.enabled": "false",
        "spark.dynamicAllocation.enabled": "false",
        "spark.executor.instances": "3",
        "spark.kubernetes.executor.request.cores": "2",
        "spark.task.cpus": "2",
        "spark.executor.resource.gpu.amount": "1",
        "spark.task.resource.gpu.amount": "1",
        "spark.executor.resource.gpu.discoveryScript": gpu_discovery_script(),
        "spark.executor.resource.gpu.vendor": "nvidia.com",
        "spark.kubernetes.executor.podTemplateFile": template,
        "spark.master": "k8s://https://api.k:6443",
    }
    with open(template, encoding="utf-8") as handle:
        assert json.load(handle) == {
            "apiVersion": "v1", "kind": "Pod",
            "spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "kubernetes.io/hostname", "operator": "NotIn", "values": ["p1", "p2"]}]}]}}}},
        }
    assert write_pod_template(str(tmp_path), ["p1", "p2"]) == template  # one file per content


def test_a_kubernetes_pod_may_ask_a_fraction_of_a_core():
    kwargs = build_submit_kwargs(application=APP, application_args=[], master="k8s://https://api.k", slots=2,
                                 slot_profile=ResourceProfile.of(cpu=0.5, heap_mib=1024), job_conf=None, py_files=[],
                                 name="r")
    assert kwargs["conf"]["spark.kubernetes.executor.request.cores"] == "0.5" and kwargs["executor_cores"] == 1


def test_kubernetes_exclusions_without_a_written_template_are_an_error():
    with pytest.raises(SubmitConfigError, match="pod template"):
        command_for("k8s://https://api.k:6443", excluded_nodes=["p1"])


def test_a_jobs_blocked_hosts_become_excluded_nodes_of_the_same_master_only():
    reads = []

    def blocked():
        reads.append(1)
        return ["n2", "p2", "local"]

    assert excluded_nodes(CLUSTER.host("n1"), CLUSTER.hosts, blocked) == ["n2"]
    assert excluded_nodes(CLUSTER.host("p1"), CLUSTER.hosts, blocked) == ["p2"]  # k8s://api.k:6443 is the same
    assert excluded_nodes(CLUSTER.host("local"), CLUSTER.hosts, blocked) == []
    assert len(reads) == 2  # a local host never reads the blocklist


def test_a_unit_task_with_excluded_nodes_writes_the_pod_template_next_to_it(tmp_path):
    task = UnitTask(job="m:job", mode="all-pipelined", run_id="r", data_dir=str(tmp_path), unit_key="u",
                    unit_name="u", regions=[0], attempt_id="a1", excluded_nodes=["p2"])
    submission = unit_submission(task, str(tmp_path / "u-a1.json"), CLUSTER.host("p1"), 2, {}, [])
    path = submission.hook_kwargs["conf"]["spark.kubernetes.executor.podTemplateFile"]
    assert path.startswith(str(tmp_path)) and json.load(open(path, encoding="utf-8")) == pod_template(["p2"])


def test_without_the_cncf_kubernetes_provider_a_kubernetes_host_is_an_error_naming_the_extra(monkeypatch):
    # the provider is installed here (test extras); this stands in for an installation without it
    monkeypatch.setattr("regionflow.spark.launch.submit_args.kubernetes_provider_installed", lambda: False)
    with pytest.raises(SubmitConfigError, match=r"cncf-kubernetes.*airflow-provider-regionflow\[kubernetes\]"):
        command_for("k8s://https://api.k:6443")
