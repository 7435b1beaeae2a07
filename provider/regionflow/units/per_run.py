"""`regionflow run`'s per-run decisions: an adaptive region cut into several shards (`core.run_decision`) is
decided when its units become ready, from the bytes its producers committed, by the rule the decision task
applies in Airflow, and recorded in the run's partition store the same way (the first decision wins); the run
goes on in the decided layout.

A decision renames no unit outside its region (`core.adaptive.units_moved`), so the units of the two layouts
are matched by key. The strategy of the decided layout is brought to the state the run reached by replaying
its finished units in schedule order and then its running ones (`carried_over`): schedule order puts a unit's
producers before it, and a unit that finished had its producers finished, so each replayed finish finds its
unit ready. The rules stay the strategy's own.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..core.plan import Plan
from ..core.run_decision import run_time_blocker
from ..scheduling.strategy import RegionScheduler
from ..spark.data.store import PartitionStore
from .decisions import decide_and_record
from .layout import UnitLayout


class RunDecisions:
    """The logical regions of a run's plan still to be decided per run, and the values decided so far."""

    def __init__(self, plan: Plan, max_shards: int | None, store: PartitionStore, cluster_slots: int,
                 host_slots: int) -> None:
        self.graph, self.mode, self.max_shards = plan.graph, plan.mode.value, max_shards
        self.store, self.cluster_slots, self.host_slots = store, cluster_slots, host_slots
        self.pending = {logical.index for logical in plan.region_set.logical
                        if run_time_blocker(plan, logical.index, max_shards) is None}
        self.values: dict[str, int] = {}

    def due(self, layout: UnitLayout, units: Iterable[int]) -> list[int]:
        """The logical regions still to be decided that have one of `units` (units of `layout`)."""
        if not self.pending:  # most plans: nothing is decided per run
            return []
        return sorted({layout.shards[unit].logical for unit in units} & self.pending)

    def decide(self, layout: UnitLayout, logical: int) -> dict[str, Any]:
        """Decide logical region `logical` from what its producers committed; returns the recorded decision."""
        recorded = decide_and_record(layout, logical, self.store, self.cluster_slots, self.host_slots)
        self.pending.discard(logical)
        self.values.update(recorded["values"])
        return recorded

    def layout(self) -> UnitLayout:
        """The layout of the run with every decision so far applied."""
        return UnitLayout.for_run(self.graph, self.mode, self.max_shards, self.values)


def carried_over(layout: UnitLayout, finished: Iterable[str], running: Iterable[str]) -> RegionScheduler:
    """The strategy over `layout`'s units in the state a run reached: the units keyed `finished` (producers
    before their consumers: schedule order, or the order they finished in) finished, those keyed `running`
    running, every other one waiting or ready as that gives."""
    index = {key: unit for unit, key in enumerate(layout.keys)}
    scheduler = layout.scheduler()
    scheduler.start()
    for key in finished:
        scheduler.on_finished(index[key])
    for key in running:
        scheduler.on_started(index[key])
    return scheduler


__all__ = ["RunDecisions", "carried_over"]
