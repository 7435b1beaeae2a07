"""How a job's blocklist reaches YARN and Kubernetes (submit backend; pure, no PySpark).

regionflow keeps a blocklist per job (DAG run) of hosts: the speculation sensor adds slow hosts, a lost
host is added by the region task. On a local or standalone host the pool simply does not grant
blocked hosts. A YARN or Kubernetes cluster places executors itself, so regionflow names each of its
nodes as a host of that master (``node-1:slots=8,master=yarn;node-2:slots=8,master=yarn``: the host
name is the node name) and tells the cluster manager which of them the job must avoid:

- YARN: ``spark.yarn.exclude.nodes`` = the blocked nodes, comma-separated;
- Kubernetes: an executor pod template (``spark.kubernetes.executor.podTemplateFile``) whose node
  affinity requires ``kubernetes.io/hostname`` not in the blocked nodes. The template is JSON, which
  is YAML; `write_pod_template` writes it once per content.

Neither cluster can run on the machine the tests run on, so the tests check these arguments and
templates exactly (tests/spark/test_cluster_managers.py).
"""
from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterable
from typing import Any

from ...localfiles import write_text_atomically
from ...scheduling.hosts import Host
from .masters import Master, MasterKind
from .targets import spark_target

HOSTNAME_LABEL = "kubernetes.io/hostname"
POD_TEMPLATE_KEY = "spark.kubernetes.executor.podTemplateFile"
YARN_EXCLUDE_KEY = "spark.yarn.exclude.nodes"


def exclusion_conf(master: Master, excluded_nodes: Iterable[str],
                   pod_template_file: str | None = None) -> dict[str, str]:
    """Spark conf that keeps the executors of a submission to `master` off `excluded_nodes`; `{}` when
    there are none or the master places no executors on nodes of its own (local, standalone).
    Kubernetes needs the path of the written template (`write_pod_template`)."""
    nodes = sorted(set(excluded_nodes))
    if not nodes:
        return {}
    if master.kind is MasterKind.YARN:
        return {YARN_EXCLUDE_KEY: ",".join(nodes)}
    if master.kind is MasterKind.KUBERNETES:
        if pod_template_file is None:
            raise ValueError("a Kubernetes submission with excluded nodes needs its pod template written first")
        return {POD_TEMPLATE_KEY: pod_template_file}
    return {}


def pod_template(excluded_nodes: Iterable[str]) -> dict[str, Any]:
    """An executor pod template that keeps pods off `excluded_nodes` (required node affinity)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": HOSTNAME_LABEL, "operator": "NotIn", "values": sorted(set(excluded_nodes))},
            ]}],
        }}}},
    }


def write_pod_template(directory: str, excluded_nodes: Iterable[str]) -> str:
    """Write `pod_template(excluded_nodes)` under `directory`, named by its content; return the path."""
    text = json.dumps(pod_template(excluded_nodes), indent=2, sort_keys=True) + "\n"
    path = os.path.join(directory, f"executor-pod-{hashlib.sha256(text.encode()).hexdigest()[:16]}.json")
    if not os.path.exists(path):
        os.makedirs(directory, exist_ok=True)
        write_text_atomically(path, text)
    return path


def excluded_nodes(host: Host, hosts: Iterable[Host], blocked_hosts: Callable[[], Iterable[str]]) -> list[str]:
    """The job's blocked hosts that are nodes of a YARN or Kubernetes `host`'s master (hosts of `hosts`
    declared with the same master). `blocked_hosts` is only called for such a host: the blocklist is
    read where it is needed, not for every attempt."""
    master = spark_target(host).parsed
    if master.kind not in (MasterKind.YARN, MasterKind.KUBERNETES):
        return []
    blocked = set(blocked_hosts())
    return sorted(other.name for other in hosts
                  if other.name in blocked and spark_target(other).parsed.url == master.url)


__all__ = ["excluded_nodes", "exclusion_conf", "pod_template", "write_pod_template"]
