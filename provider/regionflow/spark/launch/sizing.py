"""How a granted slot request sizes a Spark application: the one mapping from resources to Spark conf.

A region's slot requests (one per slot sharing group, FLIP-53/FLIP-56) decide *where* it runs: the
pool grants slots whose offer fits them. They also decide *how big* the Spark application is: every
granted slot is sized to `slot_size` of the requests, the smallest profile each request of the unit
fits in (the element-wise maximum). A request that declares nothing (UNKNOWN) takes the host's slot
as it is, so a unit with such a request is sized to the host's slot profile.

The mapping, per granted slot (docs/concepts.md shows it as a table):

================  =========================================  ============================================
request           cluster master: one executor per slot       ``local[k]``: one JVM (driver) for k slots
================  =========================================  ============================================
cpu               ``spark.executor.cores`` = ceil(cpu) (>= 1), ``local[<slots>]``
                  ``spark.cores.max`` = slots x cores
                  (standalone) or ``spark.executor.instances``
                  = slots (YARN, Kubernetes; there also
                  ``spark.kubernetes.executor.request.cores``
                  = cpu), ``spark.task.cpus`` = cores when > 1
heap              ``spark.executor.memory`` = heap + managed  ``spark.driver.memory`` = slots x (heap +
                                                              managed)
managed memory    ``spark.memory.fraction`` = managed /       the same fraction over the driver's heap
                  (heap + managed - 300 MiB), capped at 0.9
off-heap          ``spark.memory.offHeap.enabled`` = true,    off-heap size = slots x off-heap
                  ``spark.memory.offHeap.size`` = off-heap
gpu               ``spark.executor.resource.gpu.amount`` =    not scheduled by Spark in local mode
                  ceil(gpu), ``spark.task.resource.gpu.      (the pool still only grants GPU slots of
                  amount`` = gpu (<= 0.5) or ceil(gpu),       hosts that declare GPUs)
                  ``spark.executor.resource.gpu.
                  discoveryScript`` = `GPU_DISCOVERY_SCRIPT`
other extended    ``spark.executor.resource.<name>.amount``   not scheduled
                  and ``spark.task.resource.<name>.amount``
================  =========================================  ============================================

Why managed memory is a fraction. Flink's managed memory is what its operators sort, hash and cache
in; Spark's equivalent is the unified (execution + storage) region, ``spark.memory.fraction`` x (heap
- 300 MiB reserved). So the JVM heap becomes heap + managed and the fraction makes the unified region
exactly the managed memory, leaving the declared heap (minus Spark's reserve) to user code. Memory
below 512 MiB is raised to 512 MiB: Spark refuses a JVM under 1.5 x its 300 MiB reserve. An UNKNOWN
profile leaves every memory setting at Spark's default.

`SizedConf.owned` are keys regionflow decides from the grant (a job conf may repeat them only with the
same value); `SizedConf.proposed` are defaults a job conf may override (the GPU discovery script).
Nothing here imports PySpark.
"""
from __future__ import annotations

import math
import os
import shutil
import stat
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache

from ...core.resources import ResourceProfile
from .masters import Master, MasterKind

GPU = "gpu"
# Spark keeps 300 MiB of every heap for itself and refuses a JVM whose usable heap is under 1.5x
# that (450 MiB); 512 MiB clears it with the JVM's own accounting.
SPARK_RESERVED_MIB = 300
SPARK_MIN_MEMORY_MIB = 512
MAX_MEMORY_FRACTION = 0.9
_STANDALONE = Master("spark://cluster:7077", MasterKind.STANDALONE)  # the form the plan JSON shows
GPU_DISCOVERY_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "resources", "gpu_discovery.sh")


@dataclass(frozen=True)
class SizedConf:
    """Spark conf for one application: what the grant decides, and defaults the job may override."""

    owned: dict[str, str]
    proposed: dict[str, str] = field(default_factory=dict)


def slot_size(requests: Iterable[ResourceProfile], host_slot: ResourceProfile) -> ResourceProfile:
    """The profile every granted slot of a unit is sized to: the element-wise maximum of its slot
    requests, or `host_slot` when a request declares nothing (or there is none)."""
    size: ResourceProfile | None = None
    for request in requests:
        if request.unknown:
            return host_slot
        size = request if size is None else size.covering(request)
    return host_slot if size is None else size


def sized_conf(master: Master, slots: int, profile: ResourceProfile) -> SizedConf:
    """Spark conf for `slots` slots each of `profile` on `master`: one JVM on a local master, one
    executor per slot on a cluster master. See the module docstring for the mapping."""
    if master.is_local:
        return SizedConf(_local_conf(slots, profile))
    return _executor_conf(master.kind, slots, profile)


def region_spark_conf(profile: ResourceProfile, slots: int) -> dict[str, str]:
    """The cluster-master conf of a region of `slots` slots of `profile`, owned and proposed keys
    together: what ``regionflow plan --format json`` shows per region (``spark_conf``)."""
    conf = sized_conf(_STANDALONE, slots, profile)
    return {**conf.proposed, **conf.owned}


def cores_per_slot(profile: ResourceProfile) -> int:
    """Executor cores for one slot of `profile`: its cpu rounded up, at least 1."""
    if profile.unknown or profile.cpu <= 0:
        return 1
    return max(1, math.ceil(profile.cpu - 1e-9))


def _local_conf(slots: int, profile: ResourceProfile) -> dict[str, str]:
    if profile.unknown:
        return {}
    return _memory_conf("spark.driver.memory", slots * profile.heap_mib, slots * profile.managed_mib,
                        slots * profile.off_heap_mib)


def _executor_conf(kind: MasterKind, slots: int, profile: ResourceProfile) -> SizedConf:
    cores = cores_per_slot(profile)
    owned = {"spark.executor.cores": str(cores), "spark.dynamicAllocation.enabled": "false"}
    if kind is MasterKind.STANDALONE:
        owned["spark.cores.max"] = str(slots * cores)  # a standalone master starts executors until this is reached
    else:
        owned["spark.executor.instances"] = str(slots)  # YARN and Kubernetes start exactly this many
    if kind is MasterKind.KUBERNETES and not profile.unknown and profile.cpu > 0:
        owned["spark.kubernetes.executor.request.cores"] = f"{profile.cpu:g}"  # a pod may ask a fraction of a core
    if cores > 1:
        owned["spark.task.cpus"] = str(cores)
    proposed: dict[str, str] = {}
    if profile.unknown:
        return SizedConf(owned)
    owned.update(_memory_conf("spark.executor.memory", profile.heap_mib, profile.managed_mib, profile.off_heap_mib))
    for resource, amount in profile.extended:
        owned.update(_extended_resource_conf(resource, amount))
        if resource == GPU:
            proposed[f"spark.executor.resource.{GPU}.discoveryScript"] = gpu_discovery_script()
            if kind is MasterKind.KUBERNETES:
                proposed[f"spark.executor.resource.{GPU}.vendor"] = "nvidia.com"  # the pods' resource name
    return SizedConf(owned, proposed)


def _memory_conf(memory_key: str, heap_mib: int, managed_mib: int, off_heap_mib: int) -> dict[str, str]:
    conf: dict[str, str] = {}
    if heap_mib or managed_mib:
        jvm_mib = max(SPARK_MIN_MEMORY_MIB, heap_mib + managed_mib)
        conf[memory_key] = f"{jvm_mib}m"
        if managed_mib:
            fraction = min(MAX_MEMORY_FRACTION, managed_mib / (jvm_mib - SPARK_RESERVED_MIB))
            conf["spark.memory.fraction"] = f"{fraction:.4f}"
    if off_heap_mib:
        conf["spark.memory.offHeap.enabled"] = "true"
        conf["spark.memory.offHeap.size"] = f"{off_heap_mib}m"
    return conf


def _extended_resource_conf(resource: str, amount: float) -> dict[str, str]:
    per_executor = math.ceil(amount - 1e-9)
    per_task = amount if amount <= 0.5 else per_executor  # Spark takes task shares <= 0.5 or whole units
    return {
        f"spark.executor.resource.{resource}.amount": str(per_executor),
        f"spark.task.resource.{resource}.amount": f"{per_task:g}",
    }


@lru_cache(maxsize=1)
def gpu_discovery_script() -> str:
    """Path of regionflow's GPU discovery script, executable. Spark runs it on every executor (and a
    standalone worker may use it as ``spark.worker.resource.gpu.discoveryScript``): it prints
    ``{"name": "gpu", "addresses": [...]}`` with the indices ``nvidia-smi`` lists, and no address on
    a host without ``nvidia-smi``. An installation that lost the file's execute bit gets an
    executable copy in the temp directory."""
    path = GPU_DISCOVERY_SCRIPT
    if os.access(path, os.X_OK):
        return path
    copy = os.path.join(tempfile.gettempdir(), f"regionflow-gpu-discovery-{os.getuid()}.sh")
    shutil.copyfile(path, copy)
    os.chmod(copy, os.stat(copy).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return copy


__all__ = ["GPU_DISCOVERY_SCRIPT", "SizedConf", "cores_per_slot", "gpu_discovery_script", "region_spark_conf",
           "sized_conf", "slot_size"]
