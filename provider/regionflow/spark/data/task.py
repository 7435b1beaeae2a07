"""The unit task: everything one Spark submission needs, written by the runner as a JSON file.

A unit is one region or a shard of regions. The file carries the job reference and mode (the
program rebuilds the same plan from them), the unit's regions, the attempt, where data lives, and
one input descriptor reference per partition group the unit reads from outside, and the run's context
and rendered vertex fields. No pyspark here.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any

from ...core.adaptive import apply
from ...core.errors import SpecError
from ...core.graph import load_job
from ...core.plan import Plan
from ...localfiles import write_json_atomically
from .store import safe_component

MAX_KEY_LENGTH = 120


def unit_key_for(name: str) -> str:
    """A store key for a unit name such as ``orders+clean[2]``; a long name keeps a readable head and
    a hash of the whole, so two units never share a key."""
    key = safe_component(name)
    if len(key) > MAX_KEY_LENGTH:
        key = f"{key[:MAX_KEY_LENGTH - 17]}-{hashlib.sha256(name.encode()).hexdigest()[:16]}"
    return key


@dataclass
class UnitTask:
    job: str  # "package.module:attribute" or a job spec file path
    mode: str
    run_id: str
    data_dir: str
    unit_key: str
    unit_name: str
    regions: list[int]
    attempt_id: str
    host: str = "localhost"
    width: int = 1
    slots: int = 1  # the grant: a unit writes at most this many files per output (one per core)
    max_shards: int | None = 1  # how the plan was cut into units (`Plan.shards`), to route rows to them
    inputs: dict[str, dict[str, Any]] = field(default_factory=dict)  # group id -> descriptor ref
    reference: bool = False
    # what each granted slot is sized to (`UnitLayout.slot_request`); {}: the host's slot as it is
    slot_request: dict[str, Any] = field(default_factory=dict)
    # nodes of a YARN or Kubernetes host's master the executors must avoid (the job's blocklist)
    excluded_nodes: list[str] = field(default_factory=list)
    # adaptive vertices' decided parallelism (`core.adaptive`): the program plans with the same values
    parallelism: dict[str, int] = field(default_factory=dict)
    subtasks: int = 0  # the planner's subtask count, checked by `plan()` (0: not checked)
    input_bytes: int | None = None  # bytes it reads from committed partitions (None: it reads none)
    result_path: str | None = None  # reference runs write their sink figures here
    # the run as its vertex functions see it (`RunContext.to_dict`): built once per try, copied into a
    # speculative copy's template, never computed again where the attempt runs
    context: dict[str, Any] = field(default_factory=dict)
    # the vertices' templated fields as rendered for the run ({vertex: {"sink": path, "reads": [...]}})
    rendered: dict[str, dict[str, Any]] = field(default_factory=dict)
    # key-grouped edges whose key groups this unit writes unsorted: their consumer's region was last decided as
    # one shard (`spark.data.history`); the others' files are sorted by key group
    unsorted_key_groups: list[int] = field(default_factory=list)

    def write(self, path: str) -> str:
        return write_json_atomically(path, asdict(self))

    def plan(self) -> Plan:
        """The plan this unit belongs to: the job rebuilt from its reference, adaptive vertices at the
        parallelism decided for the run, under the run's mode."""
        plan = Plan(apply(load_job(self.job), self.parallelism), self.mode)
        if self.subtasks and plan.topology.subtask_count != self.subtasks:
            raise SpecError(
                f"unit {self.unit_name}: the job {self.job!r} plans {plan.topology.subtask_count} subtasks here, but "
                f"the run was planned with {self.subtasks}; the job changed after the run started, or the unit task "
                f"lost its adaptive parallelism ({self.parallelism or 'none recorded'}): start a new run")
        return plan

    @classmethod
    def read(cls, path: str) -> UnitTask:
        try:
            with open(path, encoding="utf-8") as handle:
                data = json.load(handle)
        except (OSError, json.JSONDecodeError) as error:
            raise SpecError(f"cannot read unit task file {path!r}: {error}") from None
        return cls(**data)
