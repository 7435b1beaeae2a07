"""`regionflow.transform(dag)`: compile a DAG's vertex operators into pipelined-region tasks.

It builds the JobGraph from the `SparkVertexOperator`s (explicit exchanges from ``>> forward() >>``
etc., plain ``>>`` as FORWARD or RESCALE), plans it (invalid graphs raise here, so they show as DAG
import errors), and rewrites the DAG: the vertex operators go, and each logical region becomes one
`RegionOperator` task named after its vertices, mapped over its shards when it has more than one.
Blocking edges between logical regions become Airflow dependencies; tasks the user linked to a
vertex are linked to its region task. A region task one of whose shards reads only some shards of an
upstream region task (a pointwise blocking edge) waits per shard instead: Airflow's ``one_success`` rule
on its upstream region tasks, then each shard defers until the partitions it reads are committed
(`regionflow.triggers.inputs`). An adaptive region cut into shards whose inputs are stored by key group is
decided per run (`core.run_decision`): a decision task ``<region task id>__decide`` runs after its upstream
region tasks, and the region task is mapped over its result. Each region task carries its slot requests in
``executor_config["regionflow"]`` for the RegionExecutor's FIFO bulk pool, through the typed, versioned
`regionflow.contract` (`RegionSlots`); the task of the first logical region also carries the plan's
reference (the job spec, without functions, and the mode), which the UI plugin reads from the
serialized DAG (the api-server parses no DAG file). Each region task also carries the `JobGraph` itself
(``regionflow_job``, which Airflow does not serialize) for the task process that parsed the DAG file, and
the graph goes into the `collecting` registry when `load_dag_file_job` is the one importing the file;
nothing is kept in process-global state.

With ``speculation`` on (per DAG here, per vertex with ``SparkVertexOperator(speculation=...)``), every
eligible mapped region task gets a `SpeculationSensor` task ``<region task id>__speculation`` with the
same upstream tasks and no downstream. Every sink writes through regionflow's committer, so sinks do
not make a region ineligible; a vertex with speculation off does, and so does a vertex declared with
``external_writes=True`` (its function writes outside the committer itself). A region with a single
shard has no siblings to compare with, so it gets no sensor. Invalid settings raise at parse time naming the option.
"""
from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from .config import RegionflowConfig
from .contract import NoSlots, RegionNeed, RegionSlots, to_executor_config
from .core.adaptive import apply, decided, decided_plan, grant_time_blocker
from .core.errors import JobGraphError
from .core.graph import Distribution, JobGraph
from .core.modes import ExchangeMode
from .core.plan import Plan
from .core.registry import register_job
from .core.resources import ResourceProfile
from .core.run_decision import run_time_blocker
from .core.templates import vertex_templates
from .operators.decision import RegionDecisionOperator, decision_task_id
from .operators.region import RegionOperator
from .operators.vertex import SparkVertexOperator
from .scheduling.fit import misfits
from .scheduling.speculation_policy import SpeculationConfig, SpeculationPolicy, parse_switch
from .sensors.speculation import SpeculationSensor, speculation_task_id
from .units.dags import attach_job, attached_job
from .units.layout import UnitLayout

log = logging.getLogger(__name__)

@dataclass
class TransformResult:
    plan: Plan
    layout: UnitLayout
    region_tasks: dict[int, Any]  # logical region index -> task (or mapped task)
    speculation: dict[int, SpeculationPolicy] = field(default_factory=dict)  # logical region -> policy
    speculation_tasks: dict[int, Any] = field(default_factory=dict)  # logical region -> its sensor task
    decision_tasks: dict[int, Any] = field(default_factory=dict)  # logical region decided per run -> its task


def transform(dag, mode: ExchangeMode | str | None = None, max_shards: int | None = None,
              config: RegionflowConfig | None = None, executor: str | None = None,
              speculation: bool | str | None = None,
              speculation_config: SpeculationConfig | Mapping[str, Any] | None = None) -> TransformResult:
    """`executor`: the executor alias for the region tasks when regionflow is one of several
    executors (``[core] executor = LocalExecutor,regionflow:regionflow.executors.RegionExecutor``).
    `speculation`: on/off for the DAG (vertices may override; None: ``[regionflow] speculation``);
    `speculation_config`: the detector's settings (quantile, multiplier, min_runtime, interval,
    max_attempts, weight_by_input); a mapping overrides only the keys it names, the others come
    from the ``[regionflow] speculation_*`` options."""
    config = config or RegionflowConfig.from_airflow()
    dag_speculation = config.speculation if speculation is None else \
        parse_switch(speculation, "(transform speculation=)")
    spec_config = speculation_settings(config.speculation_config, speculation_config)
    vertices = [task for task in dag.tasks if isinstance(task, SparkVertexOperator)]
    if not vertices:
        if attached_job(dag) is not None:
            raise JobGraphError(f"DAG {dag.dag_id!r} was already transformed (its vertices are region tasks now); "
                                f"call regionflow.transform(dag) once, at the end of the DAG file")
        raise JobGraphError(f"DAG {dag.dag_id!r} has no SparkVertexOperator; declare vertices before transform(dag)")
    plan_mode = ExchangeMode.parse(mode) if mode is not None else config.mode
    plan = decided_plan(job_graph_of(dag.dag_id, vertices, plan_mode), config.cluster.total_slots, plan_mode)
    graph, decisions = plan.graph, decided(plan.graph)
    if decisions:
        log.info("DAG %s: adaptive parallelism for %d slot(s): %s", dag.dag_id, config.cluster.total_slots,
                 ", ".join(f"{name}={value}" for name, value in decisions.items()))
    _check_fits(dag.dag_id, plan, config)
    shards_limit = config.max_shards if max_shards is None else max_shards
    if isinstance(shards_limit, bool) or not isinstance(shards_limit, int) or shards_limit < 1:
        raise JobGraphError(f"transform(dag {dag.dag_id!r}, max_shards={max_shards!r}): max_shards must be an "
                            f"integer >= 1 (or None for [regionflow] max_shards, {config.max_shards})")
    layout = UnitLayout(plan, shards_limit)
    run_blockers = {lr.index: run_time_blocker(plan, lr.index, shards_limit) for lr in plan.region_set.logical}
    per_run = {index for index, blocker in run_blockers.items() if blocker is None}
    _check_byte_targets(dag.dag_id, plan, shards_limit, run_blockers)
    # a region decided per run: each shard asks for the slots of one shard at the value that gives it the most
    # shards (a shard that gets several regions in a run with more subtasks runs them one at a time on those)
    wide = UnitLayout(Plan(apply(graph, _most_shards(plan, per_run, shards_limit)), plan.mode), shards_limit) \
        if per_run else layout
    outside_links = _links_to_outside(dag, vertices)
    _remove_vertices(dag, vertices)
    slots = {logical.index: _region_slots(plan, wide if logical.index in per_run else layout, logical.index,
                                          config.largest_host_slots)
             for logical in plan.region_set.logical}
    upstream = _region_dependencies(plan)
    slots = _declare_runs(plan, slots, upstream)
    waiting = _waiting_regions(plan, layout, upstream, outside_links) - _reading_from(per_run, upstream)
    slots = {index: replace(region_slots, inputs=tuple(tuple(layout.keys[p] for p in layout.producer_units(unit))
                                                       for unit in layout.units_of_logical(index)))
             if index in waiting else region_slots for index, region_slots in slots.items()}
    decision_tasks = {index: _decision_task(dag, plan, index, shards_limit, executor) for index in sorted(per_run)}
    region_tasks = {index: _region_task(dag, plan, index, region_slots, shards_limit, executor,
                                        decision_tasks.get(index)) for index, region_slots in slots.items()}
    _wire_regions(upstream, region_tasks, decision_tasks)
    _wire_outside(plan, region_tasks, outside_links)
    flags = {vertex.task_id: vertex.speculation for vertex in vertices}
    policies, sensors = _speculation_tasks(dag, plan, region_tasks, slots, flags, dag_speculation,
                                           spec_config, shards_limit, executor, per_run)
    for task in region_tasks.values():
        attach_job(task, graph)  # what the region tasks run, without any registry (not serialized)
    register_job(graph)  # for load_dag_file_job, when it is the one importing this DAG file
    return TransformResult(plan, layout, region_tasks, policies, sensors, decision_tasks)


def _check_byte_targets(dag_id: str, plan: Plan, shards_limit: int, run_blockers: dict[int, str | None]) -> None:
    """Refuse, at parse time, a ``target_bytes_per_subtask`` that could never take effect: its region is
    decided neither when its one unit is granted nor per run (`run_blockers`: `run_time_blocker` per region)."""
    names = plan.topology.vertex_names
    for logical in plan.region_set.logical:
        targeted = [names[v] for v in logical.vertices if plan.graph.vertices[names[v]].target_bytes_per_subtask]
        run_blocker = run_blockers[logical.index]
        if not targeted or run_blocker is None:
            continue
        blocker = grant_time_blocker(plan, logical.index, shards_limit)
        if blocker is None:
            continue
        if min(len(logical.regions), shards_limit) > 1:  # planned as shards: per run is what it needed
            blocker = run_blocker
        raise JobGraphError(
            f"DAG {dag_id!r}: vertex {targeted[0]!r} declares target_bytes_per_subtask, but its region can be sized "
            f"from bytes neither when granted nor per run: {blocker}; feed it through hash_by(...) or rebalance() "
            f"(stored by key group), or drop target_bytes_per_subtask")


def _most_shards(plan: Plan, logical_regions: set[int], shards_limit: int) -> dict[str, int]:
    """Each adaptive vertex of the given logical regions at its declared max, but no more than `shards_limit`
    (within its range): the most shards of one subtask each."""
    names = plan.topology.vertex_names
    return {names[v]: max(span[0], min(span[1], shards_limit)) for index in logical_regions
            for v in plan.region_set.logical[index].vertices
            if (span := plan.graph.vertices[names[v]].parallelism_range) is not None}


def _reading_from(sources: set[int], upstream: dict[int, set[int]]) -> set[int]:
    """The logical regions that read from one of `sources` (their units' keys are known only per run)."""
    return {index for index, producers in upstream.items() if producers & sources}


def _decision_task(dag, plan: Plan, logical: int, shards_limit: int, executor: str | None):
    region_task_id = plan.region_task_id(logical)
    arguments = dict(task_id=decision_task_id(region_task_id), dag=dag, mode=plan.mode.value, logical=logical,
                     max_shards=shards_limit, region_task_id=region_task_id,
                     executor_config=to_executor_config(NoSlots()))
    if executor:
        arguments["executor"] = executor
    return RegionDecisionOperator(**arguments)


def _check_fits(dag_id: str, plan: Plan, config: RegionflowConfig) -> None:
    """Refuse, at parse time, vertices whose slot request no host of ``[regionflow] hosts`` can serve."""
    problems = misfits(plan, config.cluster.hosts)
    if problems:
        raise JobGraphError(f"DAG {dag_id!r} cannot run on this cluster: " + "; and ".join(problems))


def speculation_settings(defaults: SpeculationConfig,
                         given: SpeculationConfig | Mapping[str, Any] | None) -> SpeculationConfig:
    """A complete SpeculationConfig wins; a mapping overrides the named keys of the configured defaults."""
    if isinstance(given, SpeculationConfig):
        return given
    given = dict(given or {})
    parsed = SpeculationConfig.from_mapping(given)  # names the option at fault; blank means "not given"
    merged = {name: getattr(defaults, name) for name in defaults.__dataclass_fields__}
    merged.update({name: getattr(parsed, name) for name, value in given.items()
                   if value is not None and str(value).strip()})
    return SpeculationConfig(**merged)


def _speculation_tasks(dag, plan: Plan, region_tasks: dict[int, Any],
                       slots: dict[int, RegionSlots], flags: dict[str, bool | None], dag_flag: bool,
                       spec_config: SpeculationConfig, shards_limit: int, executor: str | None, per_run: set[int]):
    policies: dict[int, SpeculationPolicy] = {}
    sensors: dict[int, Any] = {}
    names = plan.topology.vertex_names
    for logical in plan.region_set.logical:
        members = {names[v]: flags.get(names[v]) for v in logical.vertices}
        # a sink is written through regionflow's SinkCommitter (first commit wins); a vertex whose
        # function writes elsewhere itself (external_writes) would write twice
        through = {names[v]: not plan.graph.vertices[names[v]].external_writes for v in logical.vertices}
        policy = SpeculationPolicy.for_region(members, dag_flag, through, spec_config)
        units = slots[logical.index].labels  # at its most shards for a region decided per run
        if policy.enabled and len(units) < 2:
            policy = SpeculationPolicy.off("the region has a single shard: no siblings to compare with")
        policies[logical.index] = policy
        if not policy.enabled:
            continue
        region_task, region_slots = region_tasks[logical.index], slots[logical.index]
        arguments = dict(task_id=speculation_task_id(region_task.task_id), dag=dag,
                         region_task_id=region_task.task_id, total_shards=len(units), mode=plan.mode.value,
                         logical=logical.index, max_shards=shards_limit, decided_per_run=logical.index in per_run,
                         shard_requests=[[p.to_dict() for p in shard] for shard in region_slots.requests],
                         shard_labels=list(region_slots.labels), speculation=spec_config,
                         executor_config=to_executor_config(NoSlots()))
        if executor:
            arguments["executor"] = executor
        sensor = SpeculationSensor(**arguments)
        for upstream in sorted(region_task.upstream_task_ids):
            dag.get_task(upstream) >> sensor
        sensors[logical.index] = sensor
    return policies, sensors


def job_graph_of(dag_id: str, vertices: list[SparkVertexOperator], mode: ExchangeMode) -> JobGraph:
    graph = JobGraph(dag_id, default_mode=mode.value)
    for vertex in vertices:
        graph.add_vertex(vertex.task_id, vertex.parallelism, vertex.vertex_resources, vertex.slot_sharing_group,
                         vertex.fn, vertex.sink, vertex.reads, vertex.external_writes,
                         vertex.target_bytes_per_subtask)
    names = {vertex.task_id: vertex for vertex in vertices}
    for vertex in vertices:
        declared = {edge.src for edge in vertex.regionflow_inputs}
        for edge in vertex.regionflow_inputs:
            graph.connect(edge.src, vertex.task_id, edge.spec.distribution, edge.spec.exchange, edge.spec.keys)
        for upstream in sorted((vertex.upstream_task_ids & names.keys()) - declared):
            equal = names[upstream].parallelism == vertex.parallelism
            graph.connect(upstream, vertex.task_id, Distribution.FORWARD if equal else Distribution.RESCALE)
    return graph.validate()


def _region_slots(plan: Plan, layout: UnitLayout, logical: int, width: int) -> RegionSlots:
    """Per shard of the logical region, its slot requests (as wide as the largest host allows), label and
    smaller requests it may start with (adaptive vertices); the first region also carries the plan's
    reference, once per DAG, for the UI's plan page."""
    units = layout.units_of_logical(logical)
    smaller = tuple(tuple(layout.smaller_requests(u, width)) for u in units)
    return RegionSlots(requests=tuple(tuple(layout.requests(u, layout.width(u, width))) for u in units),
                       labels=tuple(layout.names[u] for u in units),
                       plan=plan.reference if logical == 0 else None,
                       smaller=smaller if any(smaller) else ())


def _declare_runs(plan: Plan, slots: dict[int, RegionSlots], upstream: dict[int, set[int]]) -> dict[int, RegionSlots]:
    """The region tasks without upstream regions carry the run's declaration: every distinct shard
    shape of every region task, which the executor checks against the cluster when the run starts, so
    a run whose later region can never get its slots fails before its first region does any work."""
    needs: list[RegionNeed] = []
    for index, region_slots in slots.items():
        seen: set[tuple[ResourceProfile, ...]] = set()
        for shard, (requests, label) in enumerate(zip(region_slots.requests, region_slots.labels, strict=True)):
            if requests not in seen:
                seen.add(requests)
                needs.append(RegionNeed(plan.region_task_id(index), label, shard, requests))
    return {index: replace(region_slots, run_needs=tuple(needs)) if not upstream.get(index) else region_slots
            for index, region_slots in slots.items()}


def _waiting_regions(plan: Plan, layout: UnitLayout, upstream: dict[int, set[int]],
                     links: list[tuple[str, str, str]]) -> set[int]:
    """The logical regions whose shards wait for their own inputs, not for every upstream shard: those
    with several shards, one of which reads only some shards of an upstream region task, and no upstream
    task but region tasks (a task the user linked upstream must still finish first)."""
    names = plan.topology.vertex_names
    logical_of = {names[v]: lr.index for lr in plan.region_set.logical for v in lr.vertices}
    linked = {logical_of[vertex] for direction, vertex, _ in links if direction == "up"}
    return {index for index in upstream if index not in linked and len(layout.units_of_logical(index)) > 1
            and layout.reads_part_of_upstream(index)}


def _region_task(dag, plan: Plan, logical: int, slots: RegionSlots, shards_limit: int, executor: str | None,
                 decision: Any = None):
    names = [plan.topology.vertex_names[v] for v in plan.region_set.logical[logical].vertices]
    arguments = dict(task_id=plan.region_task_id(logical), dag=dag, mode=plan.mode.value, logical=logical,
                     max_shards=shards_limit, executor_config=to_executor_config(slots),
                     weight_rule="absolute", priority_weight=1,
                     vertex_templates=vertex_templates(plan.graph, sorted(names)))
    if slots.waits_for_inputs:
        # its shards start once any upstream shard succeeded, then defer until their own inputs are committed
        arguments.update(waits_for_inputs=True, trigger_rule="one_success")
    if executor:
        arguments["executor"] = executor
    if decision is not None:  # as many shards as the run's decision gives (Airflow's dynamic task mapping)
        return RegionOperator.partial(**arguments).expand(shard=decision.output)
    if slots.shards == 1:
        return RegionOperator(shard=0, **arguments)
    return RegionOperator.partial(**arguments).expand(shard=list(range(slots.shards)))


def _links_to_outside(dag, vertices: list[SparkVertexOperator]) -> list[tuple[str, str, str]]:
    """(direction, vertex, other task) for every link between a vertex and a non-vertex task."""
    vertex_ids = {v.task_id for v in vertices}
    links = []
    for vertex in vertices:
        links += [("up", vertex.task_id, other) for other in vertex.upstream_task_ids - vertex_ids]
        links += [("down", vertex.task_id, other) for other in vertex.downstream_task_ids - vertex_ids]
    return links


def _remove_vertices(dag, vertices: list[SparkVertexOperator]) -> None:
    vertex_ids = {v.task_id for v in vertices}
    for task in dag.tasks:
        if task.task_id not in vertex_ids:
            task.upstream_task_ids.difference_update(vertex_ids)
            task.downstream_task_ids.difference_update(vertex_ids)
    for vertex in vertices:
        dag._remove_task(vertex.task_id)
        dag.task_group.used_group_ids.discard(vertex.task_id)


def _region_dependencies(plan: Plan) -> dict[int, set[int]]:
    """Logical region -> the logical regions it consumes from (across a blocking edge)."""
    logical_of_vertex = plan.logical_of_vertex
    upstream: dict[int, set[int]] = {}
    for exec_edge in plan.topology.edges:
        src, dst = logical_of_vertex[exec_edge.src], logical_of_vertex[exec_edge.dst]
        if src != dst:
            upstream.setdefault(dst, set()).add(src)
    return upstream


def _wire_regions(upstream: dict[int, set[int]], region_tasks: dict[int, Any], decisions: dict[int, Any]) -> None:
    """Each region task after the region tasks it reads from; a region decided per run after its decision
    task, which comes after them."""
    for dst, sources in upstream.items():
        for src in sorted(sources):
            region_tasks[src] >> decisions.get(dst, region_tasks[dst])


def _wire_outside(plan: Plan, region_tasks: dict[int, Any], links: list[tuple[str, str, str]]) -> None:
    logical_of_name = {plan.topology.vertex_names[v]: lr.index for lr in plan.region_set.logical for v in lr.vertices}
    for direction, vertex, other in links:
        region_task = region_tasks[logical_of_name[vertex]]
        other_task = region_task.dag.get_task(other)
        if direction == "up":
            other_task >> region_task
        else:
            region_task >> other_task
