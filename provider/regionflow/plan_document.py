"""The plan as ``regionflow plan --format json`` prints it and the UI plugin's plan JSON carries it.

`Plan.to_dict` (regions, slots, slot requests) plus, per execution region, the Spark conf a grant of
its slots gets on a cluster master (``spark_conf``, `regionflow.spark.sizing`): executor cores and
memory, memory fraction, off-heap, GPUs. A region whose requests declare nothing shows cores only;
its memory is then the granted host's slot. On a ``local[k]`` master the same memory goes to the one
JVM (``spark.driver.memory`` = slots x per-slot memory). Adaptive vertices (``parallelism=(min, max)``)
are listed under ``adaptive_parallelism`` with what they declare and the value the plan uses.
"""
from __future__ import annotations

from typing import Any

from .core.plan import Plan
from .core.resources import UNKNOWN
from .spark.sizing import region_spark_conf, slot_size


def plan_document(plan: Plan, inputs: bool = False) -> dict[str, Any]:
    """`plan` as a JSON-able dict; with `inputs`, the producer subtasks each subtask reads."""
    data = plan.to_dict(inputs=inputs)
    confs: dict[tuple[Any, ...], dict[str, str]] = {}
    spark_conf = []
    for region in plan.regions:
        requests = plan.slot_requests(region)
        shape = (plan.slots(region), requests)
        if shape not in confs:
            size = slot_size((profile for request in requests for profile in request.expand()), UNKNOWN)
            confs[shape] = region_spark_conf(size, plan.slots(region))
        spark_conf.append(confs[shape])
    data["spark_conf"] = spark_conf
    adaptive = {name: {"declared": list(vertex.parallelism_range), "decided": vertex.parallelism}
                for name, vertex in plan.graph.vertices.items() if vertex.parallelism_range is not None}
    if adaptive:
        data["adaptive_parallelism"] = adaptive
    return data
