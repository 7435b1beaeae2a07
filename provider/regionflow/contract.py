"""The contract between `regionflow.transform` (DAG parse time) and the RegionExecutor, the speculation
sensor and the UI plugin (run time): what a task carries in ``executor_config["regionflow"]``.

The transform writes it, Airflow serializes it with the DAG and copies it into every task instance, and
the readers get it back from a task instance or the serialized DAG, possibly from a DAG file parsed by
another regionflow release. So it is versioned, and read through one function that checks it and says
what to do when it does not hold. Standard library and `regionflow.core` only: the executor, the
sensor and the plugin import this module, never the transformer.

Two kinds of task carry it:

- a **region task** (`RegionSlots`): per shard, its slot requests (one resource profile per slot) and
  its label; the task of the first logical region also carries the plan's reference (the job spec
  without functions, and the mode) for the UI's plan page; a task of a region without upstream regions
  also carries the run's declaration (`RegionNeed`: every shard shape of every region task of the
  DAG), which the executor checks against the cluster when the run starts (FLIP-138); a task whose
  shards read the partitions of only some shards of an upstream region task also says it
  ``waits_for_inputs`` (per shard, the producer units it reads): a try whose inputs are not all
  committed when it is queued first runs without slots, defers until they are, and queues for its
  slots when it resumes (see `INPUTS_GATE_NOTE`);
- a task that runs **without slots** (`NoSlots`): the speculation sensor, whose pokes are a few store
  reads and must not wait behind regions in the FIFO queue.

A task without the key is not regionflow's (any Airflow task the RegionExecutor runs): it asks for one
slot of unknown size.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .core.errors import RegionflowError
from .core.resources import ResourceProfile

KEY = "regionflow"
VERSION = 1
# The message of the admission row the RegionExecutor records, released at once, when it runs a try of a
# task that `waits_for_inputs` without slots; the task reads it to know it must wait (defer) first.
INPUTS_GATE_NOTE = ("inputs gate: run without slots to defer until the partition groups it reads are committed; "
                    "it queues for its slots when it resumes")


def is_inputs_gate(message: str | None) -> bool:
    """Whether an admission row's message marks the slotless first run of a try that waits for its inputs."""
    return message == INPUTS_GATE_NOTE


class ContractError(RegionflowError, ValueError):
    """A task's ``executor_config["regionflow"]`` is not what this regionflow reads."""


@dataclass(frozen=True)
class RegionNeed:
    """One shard shape of one region task of the DAG: what a run declares at its start (FLIP-138)."""

    task_id: str
    label: str  # the shard's label, as its bulk is labelled
    shard: int
    requests: tuple[ResourceProfile, ...]

    def bulk_label(self, dag_id: str) -> str:
        """The label the shard's bulk carries in the pool."""
        return shard_bulk_label(dag_id, self.task_id, self.shard, self.label)


def shard_bulk_label(dag_id: str, task_id: str, map_index: int, label: str) -> str:
    """The label of a region task shard's bulk in the pool, e.g. ``d.totals[1] (totals[shard 1: 2 regions])``."""
    return f"{dag_id}.{task_id}[{max(map_index, 0)}] ({label})"


@dataclass(frozen=True)
class RegionSlots:
    """What a region task asks the RegionExecutor for, per shard (index = the task's map index, 0 when
    it is not mapped): its slot requests and its label."""

    requests: tuple[tuple[ResourceProfile, ...], ...]
    labels: tuple[str, ...]
    plan: Mapping[str, Any] | None = None  # `Plan.reference`: {"job": spec, "mode": mode}
    run_needs: tuple[RegionNeed, ...] = ()  # on tasks of regions without upstream regions: the run's declaration
    # per shard, the unit keys of the producer units it reads, when the task `waits_for_inputs` (else empty)
    inputs: tuple[tuple[str, ...], ...] = ()
    # per shard, smaller slot requests it may start with when its full request has waited (its adaptive
    # vertices decided for fewer slots: `UnitLayout.smaller_requests`), largest first; empty: none
    smaller: tuple[tuple[tuple[ResourceProfile, ...], ...], ...] = ()

    def __post_init__(self) -> None:
        if len(self.requests) != len(self.labels) or not self.requests:
            raise ContractError(f"a region task needs one slot request list and one label per shard; got "
                                f"{len(self.requests)} request lists and {len(self.labels)} labels")
        if any(not shard for shard in self.requests):
            raise ContractError("every shard of a region task asks for at least one slot")

        if self.smaller and len(self.smaller) != len(self.requests):
            raise ContractError(f"a region task with smaller requests lists them per shard; got {len(self.smaller)} "
                                f"lists for {len(self.requests)} shards")
        if self.inputs and len(self.inputs) != len(self.requests):
            raise ContractError(f"a region task that waits for its inputs names them per shard; got {len(self.inputs)} "
                                f"input lists for {len(self.requests)} shards")

    @property
    def shards(self) -> int:
        return len(self.requests)

    @property
    def waits_for_inputs(self) -> bool:
        """Whether each try first defers, without slots, until the producer units its shard reads commit."""
        return bool(self.inputs)

    def inputs_of(self, map_index: int) -> tuple[str, ...]:
        """The unit keys of the producer units the shard a task instance runs reads (`waits_for_inputs`)."""
        return self.inputs[max(map_index, 0)] if self.inputs else ()

    def smaller_of(self, map_index: int) -> tuple[tuple[ResourceProfile, ...], ...]:
        """The smaller requests the shard a task instance runs may start with (largest first; () for none)."""
        return self.smaller[max(map_index, 0)] if self.smaller else ()

    def shard(self, map_index: int) -> tuple[tuple[ResourceProfile, ...], str]:
        """The slot requests and label of the shard a task instance runs (`map_index` -1: not mapped)."""
        shard = max(map_index, 0)
        if shard >= self.shards:
            raise ContractError(f"map index {map_index} is beyond the task's {self.shards} shard(s); the DAG "
                                f"changed since the run was created: clear the run, or re-parse the DAG file")
        return self.requests[shard], self.labels[shard]


@dataclass(frozen=True)
class NoSlots:
    """A task the RegionExecutor runs at once, without slots (the speculation sensor)."""


TaskContract = RegionSlots | NoSlots


def to_executor_config(contract: TaskContract) -> dict[str, Any]:
    """The ``executor_config`` a task is built with: ``{"regionflow": {...}}`` (JSON types only)."""
    body: dict[str, Any] = {"version": VERSION}
    if isinstance(contract, NoSlots):
        body["no_slots"] = True
    else:
        body["requests"] = [[profile.to_dict() for profile in shard] for shard in contract.requests]
        body["labels"] = list(contract.labels)
        if contract.plan is not None:
            body["plan"] = dict(contract.plan)
        if contract.run_needs:
            body["run_needs"] = [{"task_id": need.task_id, "label": need.label, "shard": need.shard,
                                  "requests": _run_lengths(need.requests)} for need in contract.run_needs]
        if contract.inputs:
            body["waits_for_inputs"] = [list(keys) for keys in contract.inputs]
        if contract.smaller:
            body["smaller"] = [[_run_lengths(shape) for shape in shapes] for shapes in contract.smaller]
    return {KEY: body}


def _run_lengths(requests: Sequence[ResourceProfile]) -> list[list[Any]]:
    """``[[profile, count], ...]``: consecutive equal profiles once (a region's requests repeat a few shapes)."""
    runs: list[list[Any]] = []
    for profile in requests:
        if runs and runs[-1][0] == profile:
            runs[-1][1] += 1
        else:
            runs.append([profile, 1])
    return [[profile.to_dict(), count] for profile, count in runs]


def _from_run_lengths(value: Any) -> tuple[ResourceProfile, ...]:
    return tuple(ResourceProfile.from_dict(profile) for profile, count in _list(value) for _ in range(int(count)))


def _run_needs(value: Any) -> tuple[RegionNeed, ...]:
    needs = []
    for need in _list(value):
        requests = _from_run_lengths(need["requests"])
        needs.append(RegionNeed(str(need["task_id"]), str(need["label"]), int(need["shard"]), requests))
    return tuple(needs)


def from_executor_config(executor_config: Mapping[str, Any] | None, task: str) -> TaskContract | None:
    """The contract a task carries, or None for a task that is not regionflow's. `task` names it in
    errors (``dag_id.task_id``). A body written by another contract version, or malformed, is a
    `ContractError` that names the task and the fix."""
    body = (executor_config or {}).get(KEY) if isinstance(executor_config, Mapping) else None
    if body is None:
        return None
    if not isinstance(body, Mapping):
        raise ContractError(f"task {task}: executor_config[{KEY!r}] is {type(body).__name__}, not a mapping; it is "
                            f"regionflow's: leave it to regionflow.transform")
    version = body.get("version", VERSION)  # DAGs serialized before the version field have version 1's layout
    if version != VERSION:
        raise ContractError(f"task {task} was serialized by a regionflow whose task contract is version {version!r}; "
                            f"this one reads version {VERSION}: run the same regionflow release in the dag-processor, "
                            f"scheduler and api-server, and re-parse the DAG (airflow dags reserialize)")
    if body.get("no_slots"):
        return NoSlots()
    try:
        requests = tuple(tuple(ResourceProfile.from_dict(p) for p in _list(shard)) for shard in _list(body["requests"]))
        labels = tuple(str(label) for label in _list(body["labels"]))
        plan = body.get("plan")
        inputs = tuple(tuple(str(key) for key in _list(keys)) for keys in _list(body.get("waits_for_inputs", [])))
        smaller = tuple(tuple(_from_run_lengths(shape) for shape in _list(shapes))
                        for shapes in _list(body.get("smaller", [])))
        return RegionSlots(requests, labels, plan if isinstance(plan, Mapping) else None,
                           _run_needs(body.get("run_needs", [])), inputs, smaller)
    except ContractError as error:
        raise ContractError(f"task {task}: {error}") from None
    except (KeyError, TypeError, ValueError) as error:
        raise ContractError(f"task {task}: executor_config[{KEY!r}] is malformed ({type(error).__name__}: {error}); "
                            f"re-parse the DAG file with this regionflow release") from None


def _list(value: Any) -> Sequence[Any]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise TypeError(f"expected a list, got {type(value).__name__}")
    return value


__all__ = ["INPUTS_GATE_NOTE", "KEY", "VERSION", "ContractError", "NoSlots", "RegionNeed", "RegionSlots",
           "TaskContract", "from_executor_config", "is_inputs_gate", "shard_bulk_label", "to_executor_config"]
