"""Where Spark runs on each host: Spark's reading of the hosts the scheduling layer knows.

Scheduling knows a host's name, slots and resources, the cpu cores it is pinned to, and an opaque
``address`` (the ``master`` field the user wrote). This module reads that address as a Spark master
URL through `regionflow.spark.launch.masters` (the one parser), gives a host without one its default, and
checks the two rules that need Spark's reading:

- the address is a master regionflow runs (``local``, ``local[k]``, ``local[*]``, ``spark://``, ``yarn``,
  ``k8s://``);
- ``affinity`` (cpu pinning) only on a local master, since only there the JVM runs on this machine.

A host without a master runs ``local[k]``, k being its pinned cores, else its cpus (at least 1).
A host's ``properties_file`` is the Spark properties file (``--properties-file``) of every application
on its master; it is read, and checked to be private to this user, where it is used (`auth`).

Every place that reads hosts from a user (``[regionflow] hosts``, ``--hosts``) goes through
`parse_cluster` or `check_cluster`, so a bad master is refused when the hosts are parsed, in the
host model's error form (``host 'h1'.master = '...': <what is wrong and the forms>``). Pure Python.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...core.errors import SpecError
from ...scheduling.hosts import Cluster, Host
from .masters import Master, master_problem


@dataclass(frozen=True)
class SparkTarget:
    """How Spark runs on one host: its master URL, the cpu cores a local JVM is pinned to and the
    properties file its applications load (an authenticated master's secret)."""

    master: str
    cpu_affinity: tuple[int, ...] = ()
    properties_file: str | None = None

    @property
    def parsed(self) -> Master:
        return Master.parse(self.master)

    @property
    def is_local(self) -> bool:
        return self.parsed.is_local


def spark_target(host: Host) -> SparkTarget:
    """The Spark master of `host` (its address, else ``local[k]``) and its cpu pinning."""
    if host.address is not None:
        return SparkTarget(host.address, host.cpu_affinity, host.properties_file)
    threads = len(host.cpu_affinity) or max(1, int(host.profile.cpu))
    return SparkTarget(f"local[{threads}]", host.cpu_affinity, host.properties_file)


def host_problem(host: Host) -> str | None:
    """What Spark cannot run about `host` (one line naming it, the field and the fix), or None."""
    if host.address is not None:
        problem = master_problem(host.address)
        if problem is not None:
            return f"host {host.name!r}.master = {host.address!r}: {problem}"
    if host.cpu_affinity and not spark_target(host).is_local:
        return (f"host '{host.name}': affinity only applies to local[k] hosts, not to master={host.address}; "
                f"drop affinity")
    return None


def backend_problem(host: Host, backend: str) -> str | None:
    """What `backend` cannot run on `host` (one line naming both and the fix), or None: a host with a
    ``conn_id`` (a Spark Connect server someone else runs) needs the session backend."""
    if host.conn_id is not None and backend != "session":
        return (f"host {host.name!r} names conn_id {host.conn_id!r} (a Spark Connect server), which only backend "
                f"session uses, but the backend is {backend}; use backend session, or give the host a master")
    return None


def check_cluster(cluster: Cluster) -> Cluster:
    """`cluster` itself once every host is one Spark runs; else `SpecError` for the first host at fault."""
    for host in cluster:
        problem = host_problem(host)
        if problem is not None:
            raise SpecError(problem)
    return cluster


def parse_cluster(spec: str) -> Cluster:
    """`Cluster.parse` (the host model: names, slots, resources) plus the Spark rules of `check_cluster`."""
    return check_cluster(Cluster.parse(spec))


__all__ = ["SparkTarget", "backend_problem", "check_cluster", "host_problem", "parse_cluster", "spark_target"]
