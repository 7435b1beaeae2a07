"""The plan of a DAG as the plugin's plan page shows it, as a JSON-able dict (no Airflow import here).

The plan comes from the reference `regionflow.transform` leaves in the first region task's
``executor_config`` (the job spec without functions, and the mode), so the api-server never parses a
DAG file. Any exchange mode can be previewed; under the DAG's own mode, each logical region also shows
the state and timing of its task in a DAG run (from Airflow's task instances, passed in by the caller)
and how many of its shards wait for or hold slots, and an adaptive region decided for the run its decision
(both from regionflow's store).
"""
from __future__ import annotations

import graphlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from ..core.modes import ExchangeMode
from ..core.plan import Plan, graph_of_reference
from ..plan_document import plan_document
from ..store.records import DecisionRecord, GrantRecord, GrantState

MAX_PLAN_SUBTASKS = 10_000  # above this the view leaves out the per-subtask plan (``regionflow plan`` has it)
TERMINAL_STATES = frozenset({"success", "failed", "skipped", "upstream_failed", "removed"})


@dataclass(frozen=True)
class TaskInstanceRow:
    """One task instance of a DAG run, as Airflow's metadata database has it (times in epoch seconds)."""

    task_id: str
    map_index: int
    state: str | None
    started_at: float | None = None
    ended_at: float | None = None


@dataclass(frozen=True)
class SlotUse:
    """How many shards of a region task wait for slots in the FIFO queue and how many hold a grant."""

    waiting: int = 0
    holding: int = 0


def plan_view(reference: Mapping[str, Any], dag_id: str, mode: str | ExchangeMode | None = None,
              run_id: str | None = None, task_instances: Iterable[TaskInstanceRow] = (),
              slots: Mapping[str, SlotUse] | None = None,
              decisions: Mapping[str, DecisionRecord] | None = None) -> dict[str, Any]:
    """The vertices (with their declared range, if adaptive), the edges with the exchange each gets, the
    logical regions (boxes: their vertices, task id, column in the drawing, execution regions and slots)
    under `mode` (None: the DAG's own), and ``plan``: what ``regionflow plan --format json`` prints for that
    mode. With a run under the DAG's own mode, an adaptive region decided for the run (`decisions`, from the
    store, by region task id) shows its decision, and its vertices their decided value. A bad `mode` raises
    `SpecError` naming the modes there are."""
    dag_mode = ExchangeMode.parse(reference.get("mode"))
    shown = dag_mode if mode is None or (isinstance(mode, str) and not mode.strip()) else ExchangeMode.parse(mode)
    plan, document = _planned(json.dumps(reference, sort_keys=True), shown.value)
    graph = plan.graph
    preview = shown is not dag_mode
    region_of = {plan.topology.vertex_names[v]: logical.index
                 for logical in plan.region_set.logical for v in logical.vertices}
    states = _task_states(task_instances) if run_id and not preview else {}
    slots = slots or {}
    decided_now = (decisions or {}) if run_id and not preview else {}
    decided_values = {name: value for d in decided_now.values() for name, value in d.decided.items()}
    regions = []
    for logical, column in zip(plan.region_set.logical, _columns(plan, region_of), strict=False):
        task_id = plan.region_task_id(logical.index)
        members = logical.regions
        region: dict[str, Any] = {
            "index": logical.index, "task_id": task_id, "column": column,
            "vertices": [plan.topology.vertex_names[v] for v in logical.vertices],
            "execution_regions": len(members),
            "slots_per_region": max(plan.slots(plan.regions[r]) for r in members),
        }
        if run_id and not preview:
            region.update(states.get(task_id, _NOT_STARTED))
            use = slots.get(task_id, SlotUse())
            region.update({"shards_waiting_for_slots": use.waiting, "shards_holding_slots": use.holding})
            decision = decided_now.get(task_id)
            region["decision"] = None if decision is None else {
                "shards": decision.shards, "input_bytes": decision.input_bytes, "reason": decision.reason}
        regions.append(region)
    view: dict[str, Any] = {
        "dag_id": dag_id, "run_id": run_id, "mode": shown.value, "dag_mode": dag_mode.value, "preview": preview,
        "modes": [m.value for m in ExchangeMode],
        "vertices": [{"name": v.name, "parallelism": v.parallelism, "region": region_of[v.name],
                      "range": None if v.parallelism_range is None else list(v.parallelism_range),
                      "decided": decided_values.get(v.name)}
                     for v in graph.vertices.values()],
        "edges": [{"src": e.src, "dst": e.dst, "distribution": e.distribution.name, "keys": list(e.keys),
                   "exchange": shown.exchange_for(e).name.lower(), "declared": e.exchange is not None}
                  for e in graph.edges],
        "regions": regions,
        "region_count": len(plan.regions),
        "min_slots": plan.min_slots,
    }
    subtasks = plan.topology.subtask_count
    view["plan"] = document
    if view["plan"] is None:
        view["plan_left_out"] = (f"{subtasks} subtasks: more than {MAX_PLAN_SUBTASKS}; "
                                 f"run `airflow regionflow plan {dag_id} --mode {shown.value} --format json`")
    return view


@lru_cache(maxsize=64)
def _planned(reference_json: str, mode: str) -> tuple[Plan, dict[str, Any] | None]:
    """The plan of a reference under `mode` and its JSON document (None above MAX_PLAN_SUBTASKS),
    built once per (DAG version, mode): the page refreshes every few seconds, the plan does not change.
    Callers must not modify what they get."""
    plan = Plan(graph_of_reference(json.loads(reference_json)), mode)
    return plan, plan_document(plan) if plan.topology.subtask_count <= MAX_PLAN_SUBTASKS else None


_NOT_STARTED: dict[str, Any] = {"state": None, "shards": {}, "started_at": None, "ended_at": None}


def _columns(plan: Plan, region_of: Mapping[str, int]) -> list[int]:
    """Per logical region, its column in the drawing: the longest chain of regions before it."""
    before: dict[int, set[int]] = {logical.index: set() for logical in plan.region_set.logical}
    for edge in plan.graph.edges:
        src, dst = region_of[edge.src], region_of[edge.dst]
        if src != dst:
            before[dst].add(src)
    column: dict[int, int] = {}
    for region in graphlib.TopologicalSorter(before).static_order():
        column[region] = max((column[r] + 1 for r in before[region]), default=0)
    return [column[logical.index] for logical in plan.region_set.logical]


def _task_states(rows: Iterable[TaskInstanceRow]) -> dict[str, dict[str, Any]]:
    """Per task: its state (the shards' common state, else ``mixed``), the count per state, the first
    start and, once every shard has ended, the last end."""
    by_task: dict[str, list[TaskInstanceRow]] = {}
    for row in rows:
        by_task.setdefault(row.task_id, []).append(row)
    result = {}
    for task_id, shards in by_task.items():
        counts: dict[str, int] = {}
        for shard in shards:
            name = shard.state or "none"
            counts[name] = counts.get(name, 0) + 1
        starts = [s.started_at for s in shards if s.started_at is not None]
        ended = all(s.state in TERMINAL_STATES for s in shards)
        ends = [s.ended_at for s in shards if s.ended_at is not None]
        result[task_id] = {"state": next(iter(counts)) if len(counts) == 1 else "mixed",
                           "shards": dict(sorted(counts.items())),
                           "started_at": min(starts) if starts else None,
                           "ended_at": max(ends) if ended and ends else None}
    return result


def slot_use(grants: Iterable[GrantRecord]) -> dict[str, SlotUse]:
    """Per region task, its shards waiting for and holding slots, from the store's grant records of one
    DAG run (records in other states count for neither)."""
    waiting: dict[str, int] = {}
    holding: dict[str, int] = {}
    for grant in grants:
        counter = holding if grant.is_live else waiting if grant.state is GrantState.WAITING else None
        if counter is not None:
            counter[grant.task_id] = counter.get(grant.task_id, 0) + 1
    return {task: SlotUse(waiting.get(task, 0), holding.get(task, 0)) for task in waiting.keys() | holding.keys()}


__all__ = ["MAX_PLAN_SUBTASKS", "SlotUse", "TaskInstanceRow", "plan_view", "slot_use"]
