"""Region scheduling strategy (FLIP-119): which pipelined regions may start, restart, release data.

The strategy hands out *units*: by default each execution region is a unit; a runner that starts one
submission per shard of regions passes the shards as units (`units=`), and then a unit's
inputs are the groups its regions read from outside the unit.

Readiness is tracked per blocking partition group, not per vertex: a unit becomes schedulable when
every group it reads from outside has no unfinished producer unit left (other than itself, when it
also writes into that group). So with a pointwise blocking edge B#0 starts as soon as A#0 is done,
while A#1 still runs. Each event costs O(groups and consumers it touches), so a whole 10k x 10k run
is O(n) overall.

Failover: a failed unit restarts with the producer units of the inputs that are no longer available
(released or reported lost) and, transitively, every downstream unit that already consumed from a
restarted unit (its output may differ on the second run). A restarted unit is handed out again only
when its inputs are ready again.

Partition release: a blocking group may be deleted once every consumer unit of it has finished.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from enum import Enum

from ..core.plan import Plan
from ..core.regions import RegionSet
from .errors import SchedulingError


class UnitState(Enum):
    WAITING = "waiting"  # some input group not finished yet
    READY = "ready"  # handed out, not started yet (waiting for slots)
    RUNNING = "running"
    FINISHED = "finished"


RegionState = UnitState  # with default units, a unit is a region


@dataclass
class Progress:
    """What one event changed: units now schedulable (schedule order), groups now deletable."""

    ready: list[int] = field(default_factory=list)
    released_groups: list[int] = field(default_factory=list)


@dataclass
class Restart:
    """Units to restart after a failure; `cancel` lists those among them that are still running or
    handed out and must be stopped by the caller; `ready` those that may start again at once."""

    restarted: list[int]
    cancel: list[int]
    ready: list[int]


class RegionScheduler:
    def __init__(self, plan: Plan, units: Sequence[Sequence[int]] | None = None) -> None:
        self.plan = plan
        region_set = plan.region_set
        if units is None:
            self.units: list[tuple[int, ...]] = [(r,) for r in range(len(region_set.regions))]
            self._wire_region_units(region_set)
        else:
            self.units = [tuple(unit) for unit in units]
            self._wire_shard_units(region_set)
        self.state = [UnitState.WAITING] * len(self.units)
        self.unfinished_producers = {g: len(p) for g, p in self.group_producers.items()}
        self.unfinished_consumers = {g: len(c) for g, c in self.group_consumers.items()}
        self.self_consumers = _self_consumers(self.consumed)
        self.groups_produced = _groups_produced(len(self.units), self.group_producers)
        self.waiting_inputs = [len(consumed) for consumed in self.consumed]
        self.released: set[int] = set()
        self.finished_count = 0

    # ---- wiring -------------------------------------------------------------------------------------

    def _wire_region_units(self, region_set: RegionSet) -> None:
        self.group_producers = region_set.group_producers
        self.group_consumers = region_set.group_consumers
        self.consumed: Sequence[Sequence[tuple[int, bool]]] = [region.consumed for region in region_set.regions]
        self.internal_groups: dict[int, list[int]] = {}
        for group, region in region_set.internal_groups.items():
            self.internal_groups.setdefault(region, []).append(group)

    def _wire_shard_units(self, region_set: RegionSet) -> None:
        unit_of = [-1] * len(region_set.regions)
        for index, unit in enumerate(self.units):
            for region in unit:
                if unit_of[region] != -1:
                    raise SchedulingError(f"region {region} is in units {unit_of[region]} and {index}; "
                                          "units must not overlap")
                unit_of[region] = index
        missing = [r for r, u in enumerate(unit_of) if u == -1]
        if missing:
            raise SchedulingError(f"regions {missing[:10]} are in no unit; units must cover every region")
        self.group_producers, self.group_consumers = {}, {}
        consumed: list[list[tuple[int, bool]]] = [[] for _ in self.units]
        self.consumed = consumed
        self.internal_groups = {}
        groups = set(region_set.group_producers) | set(region_set.internal_groups)
        for group in sorted(groups):
            producers = _distinct_units(unit_of, region_set.group_producers.get(group)
                                        or [region_set.internal_groups[group]])
            consumers = _distinct_units(unit_of, region_set.group_consumers.get(group)
                                        or [region_set.internal_groups[group]])
            if len(producers) == 1 and producers == consumers:
                self.internal_groups.setdefault(producers[0], []).append(group)
                continue
            producer_set = set(producers)
            for consumer in consumers:
                consumed[consumer].append((group, consumer in producer_set))
            self.group_producers[group] = producers
            self.group_consumers[group] = consumers

    # ---- events -----------------------------------------------------------------------------------

    def start(self) -> list[int]:
        """Units schedulable at the start: those that read no blocking group from outside."""
        return self._mark_ready(u for u in range(len(self.units))
                                if self.waiting_inputs[u] == 0 and self.state[u] is UnitState.WAITING)

    def on_started(self, unit: int) -> None:
        self._expect(unit, UnitState.READY, "start")
        self.state[unit] = UnitState.RUNNING

    def on_finished(self, unit: int) -> Progress:
        state = self.state[unit]
        if state is not UnitState.RUNNING and state is not UnitState.READY:
            raise SchedulingError(f"{self.unit_name(unit)} reported finished while {state.value}; "
                                  "only a handed-out unit can finish")
        self.state[unit] = UnitState.FINISHED
        self.finished_count += 1
        newly_ready: list[int] = []
        for group in self.groups_produced[unit]:
            self._producer_finished(group, newly_ready)
        if newly_ready:
            newly_ready.sort()
            self._mark_ready(newly_ready)
        return Progress(newly_ready, self._consumer_finished(unit))

    def on_failed(self, unit: int, lost_groups: Iterable[int] = ()) -> Restart:
        """`unit` failed; `lost_groups` are input groups whose partitions can no longer be read."""
        restart = self._restart_set(unit, set(lost_groups))
        cancel = [u for u in restart if u != unit and self.state[u] in (UnitState.READY, UnitState.RUNNING)]
        for u in sorted(restart):
            if self.state[u] is UnitState.FINISHED:
                self._unfinish(u)
        for u in restart:
            self.state[u] = UnitState.WAITING
        for u in restart:
            self.waiting_inputs[u] = self._count_waiting_inputs(u)
        ready = self._mark_ready(u for u in sorted(restart) if self.waiting_inputs[u] == 0)
        return Restart(sorted(restart), sorted(cancel), ready)

    # ---- queries ----------------------------------------------------------------------------------

    @property
    def done(self) -> bool:
        return self.finished_count == len(self.units)

    def counts(self) -> dict[str, int]:
        result = {state.value: 0 for state in UnitState}
        for state in self.state:
            result[state.value] += 1
        return result

    def input_producers(self, unit: int) -> list[int]:
        """The readiness rule, asked by a runner that learns of finishes from elsewhere (one Airflow task per
        unit reads commits): the units that must finish before `unit` may start. They are the producers of
        every group it reads from outside, but itself (a unit that also writes into a group it reads only
        waits for the others). `on_finished` applies the same rule event by event."""
        return sorted({p for group, _ in self.consumed[unit] for p in self.group_producers[group] if p != unit})

    def group_released(self, group: int, finished: Callable[[int], bool]) -> bool:
        """The release rule, asked likewise: a group's partitions may be deleted once every consumer unit
        of it has finished (a group internal to one unit has no consumer listed here: it goes with its
        unit). `on_finished` reports the same groups event by event (`Progress.released_groups`)."""
        return all(finished(consumer) for consumer in self.group_consumers.get(group, ()))

    def unit_name(self, unit: int) -> str:
        regions = self.units[unit]
        first = self.plan.region_name(self.plan.regions[regions[0]])
        return f"region {first}" if len(regions) == 1 else f"unit {unit} ({first} and {len(regions) - 1} more)"

    # ---- internals --------------------------------------------------------------------------------

    def _mark_ready(self, units: Iterable[int]) -> list[int]:
        ready = list(units)
        state, READY = self.state, UnitState.READY
        for u in ready:
            state[u] = READY
        return ready

    def _producer_finished(self, group: int, newly_ready: list[int]) -> None:
        left = self.unfinished_producers[group] - 1
        self.unfinished_producers[group] = left
        if left == 0:
            waiting, self_consumers = self.waiting_inputs, self.self_consumers.get(group, ())
            for consumer in self.group_consumers[group]:
                if consumer in self_consumers:
                    continue
                waiting[consumer] -= 1
                if waiting[consumer] == 0 and self.state[consumer] is UnitState.WAITING:
                    newly_ready.append(consumer)
        elif left == 1:
            # a unit that also writes into the group only waits for the other producers
            for consumer in self.self_consumers.get(group, ()):
                if self.state[consumer] is UnitState.WAITING:
                    self.waiting_inputs[consumer] -= 1
                    if self.waiting_inputs[consumer] == 0:
                        newly_ready.append(consumer)

    def _consumer_finished(self, unit: int) -> list[int]:
        released = []
        unfinished = self.unfinished_consumers
        for group, _ in self.consumed[unit]:
            left = unfinished[group] - 1
            unfinished[group] = left
            if left == 0:
                self.released.add(group)
                released.append(group)
        internal = self.internal_groups.get(unit)
        return released + internal if internal else released

    def _restart_set(self, failed: int, lost_groups: set[int]) -> set[int]:
        restart = {failed}
        frontier = [failed]
        while frontier:
            unit = frontier.pop()
            upstream = [g for g, _ in self.consumed[unit] if g in lost_groups or g in self.released]
            for group in upstream:
                lost_groups.add(group)
                for producer in self.group_producers[group]:
                    if producer not in restart:
                        restart.add(producer)
                        frontier.append(producer)
            for group in self.groups_produced[unit]:
                for consumer in self.group_consumers[group]:
                    if consumer not in restart and self.state[consumer] is not UnitState.WAITING:
                        restart.add(consumer)
                        frontier.append(consumer)
        for group in lost_groups:
            self.released.discard(group)
        return restart

    def _unfinish(self, unit: int) -> None:
        """Undo a finished unit's effects on the groups it writes and reads."""
        self.finished_count -= 1
        for group in self.groups_produced[unit]:
            self.unfinished_producers[group] += 1
            for consumer in self.group_consumers[group]:
                if self.state[consumer] is UnitState.WAITING:
                    self.waiting_inputs[consumer] = self._count_waiting_inputs(consumer)
        for group, _ in self.consumed[unit]:
            self.unfinished_consumers[group] += 1

    def _count_waiting_inputs(self, unit: int) -> int:
        waiting = 0
        for group, also_produces in self.consumed[unit]:
            allowed = 1 if also_produces and self.state[unit] is not UnitState.FINISHED else 0
            if self.unfinished_producers[group] > allowed:
                waiting += 1
        return waiting

    def _expect(self, unit: int, state: UnitState, action: str) -> None:
        if self.state[unit] is not state:
            raise SchedulingError(f"cannot {action} {self.unit_name(unit)}: it is {self.state[unit].value}, "
                                  f"expected {state.value}")


def _distinct_units(unit_of: list[int], regions: Iterable[int]) -> list[int]:
    return list(dict.fromkeys(unit_of[r] for r in regions))


def _self_consumers(consumed: Sequence[Sequence[tuple[int, bool]]]) -> dict[int, set[int]]:
    result: dict[int, set[int]] = {}
    for unit, entries in enumerate(consumed):
        for group, also_produces in entries:
            if also_produces:
                result.setdefault(group, set()).add(unit)
    return result


def _groups_produced(unit_count: int, group_producers: dict[int, list[int]]) -> list[list[int]]:
    produced: list[list[int]] = [[] for _ in range(unit_count)]
    for group, producers in group_producers.items():
        for unit in producers:
            produced[unit].append(group)
    return produced
