"""The plan as ``regionflow plan --format json`` prints it and the UI plugin's plan JSON carries it.

`Plan.to_dict` (regions, slots, slot requests) plus, per execution region, the Spark conf a grant of
its slots gets on a cluster master (``spark_conf``, `regionflow.spark.launch.sizing`): executor cores and
memory, memory fraction, off-heap, GPUs. A region whose requests declare nothing shows cores only;
its memory is then the granted host's slot. On a ``local[k]`` master the same memory goes to the one
JVM (``spark.driver.memory`` = slots x per-slot memory). Adaptive vertices (``parallelism=(min, max)``)
are listed under ``adaptive_parallelism`` with what they declare, the value the plan uses, their
``target_bytes_per_subtask`` when given, and ``at_grant``: true when the value is decided again as the
region's unit starts (`core.adaptive.at_grant`), else the reason it is not (for logical regions cut
into at most `max_shards` shards: ``regionflow run``'s default, 1, unless told); ``key_groups``: K, when
its blocking inputs are stored by key group (`core.keygroups`); ``per_run``: true when, in Airflow, the
region's value is decided per DAG run by its decision task (`core.run_decision`; ``decided`` is then the
parse-time value, and the run's value is in the decision task's XCom and log).
"""
from __future__ import annotations

from typing import Any

from .core.adaptive import grant_time_blocker
from .core.keygroups import key_grouped_edges
from .core.plan import Plan
from .core.resources import UNKNOWN
from .core.run_decision import run_time_blocker
from .spark.launch.sizing import region_spark_conf, slot_size


def plan_document(plan: Plan, inputs: bool = False, max_shards: int | None = 1) -> dict[str, Any]:
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
    adaptive: dict[str, dict[str, Any]] = {}
    names = plan.topology.vertex_names
    key_groups = {names[plan.topology.edges[edge].dst]: k for edge, k in key_grouped_edges(plan, max_shards).items()}
    for logical in plan.region_set.logical:
        at_grant: str | bool | None = None  # found once per logical region
        per_run = False
        for v in logical.vertices:
            vertex = plan.graph.vertices[names[v]]
            if vertex.parallelism_range is None:
                continue
            if at_grant is None:
                at_grant = grant_time_blocker(plan, logical.index, max_shards) or True
                per_run = run_time_blocker(plan, logical.index, max_shards) is None
            entry: dict[str, Any] = {"declared": list(vertex.parallelism_range), "decided": vertex.parallelism}
            if vertex.target_bytes_per_subtask is not None:
                entry["target_bytes_per_subtask"] = vertex.target_bytes_per_subtask
            entry["at_grant"] = at_grant
            if vertex.name in key_groups:
                entry["key_groups"] = key_groups[vertex.name]
            if per_run:
                entry["per_run"] = True
            adaptive[vertex.name] = entry
    if adaptive:
        data["adaptive_parallelism"] = adaptive
    return data
