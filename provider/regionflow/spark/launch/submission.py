"""How a unit attempt becomes a Spark application: where a grant's application runs (`grant_target`), the
conf regionflow proposes (`default_conf`), and a unit task file plus a slot grant as one spark-submit
(`unit_submission`, a `RegionSubmission` of the region program's entry point)."""
from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ...core.resources import ResourceProfile
from ...scheduling.hosts import Host
from ..data.task import UnitTask
from .cluster_managers import write_pod_template
from .masters import MasterKind
from .orphans import ATTEMPT_VARIABLE
from .sizing import slot_size
from .submit import RegionSubmission
from .submit_args import build_submit_kwargs
from .targets import spark_target

ENTRY_POINT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "driver", "entry.py")


@dataclass(frozen=True)
class GrantTarget:
    """Where one Spark application of a grant runs: `host`'s master with `slots` slots. `held` are the
    granted slots it cannot use (on hosts with another master); `note` says so, or is empty."""

    host: Host
    slots: int
    held: int = 0
    note: str = ""


def grant_target(slot_hosts: Sequence[str], host_of: Callable[[str], Host], *,
                 pool_masters: bool = True) -> GrantTarget:
    """The application of a grant whose slots lie on `slot_hosts` (one host name per slot, first host
    first). One application has one master. Granted hosts that share the first host's ``spark://``
    master pool their slots: that master places one executor per slot over its workers (Spark's
    ``spark.deploy.spreadOut``, on by default), so the executors land on the granted hosts' workers.
    A local master is one JVM on one host, so a grant that also spans other hosts runs on the first
    host's slots only; the others stay held until the region ends (the pool put them in the bulk).
    Without `pool_masters` (the session backend: each host's Spark Connect server is an application of
    its own) the application always runs on the first host's slots only."""
    counts: dict[str, int] = {}
    for name in slot_hosts:
        counts[name] = counts.get(name, 0) + 1
    if not counts:
        raise ValueError("a grant has at least one slot")
    first = host_of(next(iter(counts)))
    first_target = spark_target(first)
    if first_target.is_local or not pool_masters:
        shared = [first.name]
    else:
        shared = [name for name in counts if spark_target(host_of(name)).master == first_target.master]
    slots = sum(counts[name] for name in shared)
    held = len(slot_hosts) - slots
    if not held:
        return GrantTarget(first, slots)
    others = ", ".join(f"{name} ({count})" for name, count in counts.items() if name not in shared)
    return GrantTarget(first, slots, held, f"one Spark application cannot span the granted hosts' masters: it "
                                           f"runs on {first.name} with {slots} slot(s); the slots on {others} stay "
                                           f"held, unused, until it ends")


def default_conf(slots: int, job_conf: dict[str, str]) -> dict[str, str]:
    """Spark conf regionflow proposes for a submission of `slots` slots; the job's own conf wins.
    Regions are small units of work: 200 shuffle partitions and INFO logging only cost time."""
    conf = {"spark.log.level": "WARN", "spark.sql.shuffle.partitions": str(max(2, 2 * slots))}
    conf.update(job_conf)
    return conf


def unit_submission(task: UnitTask, task_path: str, host: Host, slots: int, job_conf: dict[str, str],
                    py_files: Sequence[str], *, on_line: Callable[[str], None] | None = None,
                    forward_output: bool = True, conn_id: str | None = None) -> RegionSubmission:
    task.write(task_path)
    target = spark_target(host)
    master = target.parsed
    pod_template = None
    if task.excluded_nodes and master.kind is MasterKind.KUBERNETES:
        pod_template = write_pod_template(os.path.dirname(os.path.abspath(task_path)), task.excluded_nodes)
    kwargs = build_submit_kwargs(
        application=ENTRY_POINT, application_args=["--task", task_path], master=target.master,
        slots=slots, slot_profile=slot_size([ResourceProfile.from_dict(task.slot_request)], host.slot_profile),
        job_conf=default_conf(slots, job_conf),
        py_files=py_files, name=f"regionflow {task.unit_name} {task.attempt_id}", conn_id=conn_id,
        # the attempt id tags spark-submit and all it starts, so they can be ended if this process dies (orphans)
        env_vars={**driver_env(task.job), ATTEMPT_VARIABLE: task.attempt_id}, excluded_nodes=task.excluded_nodes,
        pod_template_file=pod_template, properties_file=target.properties_file,
    )
    return RegionSubmission(ENTRY_POINT, kwargs, cpu_affinity=target.cpu_affinity, on_line=on_line,
                            forward_output=forward_output)


def driver_env(job_reference: str) -> dict[str, str]:
    """Environment of the Spark driver. A job given as a DAG file makes the driver import Airflow;
    inside an Airflow 3 task the metadata DB URL is replaced by one that refuses any use, which makes
    that import fail: the driver gets an in-memory database it never needs instead."""
    if job_reference.partition("#")[0].endswith(".py"):
        return {"AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": "sqlite://"}
    return {}


def job_modules(job_reference: str) -> list[str]:
    """Modules to ship with --py-files for a ``module:attribute`` job reference."""
    if ":" in job_reference and not os.path.exists(job_reference.split("#")[0]):
        return [job_reference.partition(":")[0]]
    return []
