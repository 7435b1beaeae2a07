"""The units of a plan; shared by `regionflow run`, Airflow and the region program.

A unit is a shard of one logical region's execution regions (`Plan.shards`): one Spark attempt, one
atomic commit, one store key. `UnitLayout` fixes the units, their names and keys, the partition groups
each reads from outside, and where those partitions are. The runner, the Airflow region task and the
region program all derive the same layout from the same plan, so they agree on every key and path.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import cached_property
from typing import Any

from ..core.adaptive import GrantDecision, apply, at_grant, grant_time_blocker, smaller_grants
from ..core.graph import JobGraph
from ..core.keygroups import key_grouped_edges
from ..core.plan import Plan, Shard
from ..core.resources import UNKNOWN, ResourceProfile
from ..scheduling.strategy import RegionScheduler
from ..spark.data.descriptors import PartitionLocation
from ..spark.data.store import UNIT_COLUMN, PartitionStore
from ..spark.data.task import unit_key_for
from ..spark.driver.exchange import Span, directories_read, key_groups_read, share_of_bytes
from ..spark.driver.program import CHECKSUM_MODULUS, resolve_sink_path
from ..spark.launch.sizing import slot_size


class UnitLayout:
    def __init__(self, plan: Plan, max_shards: int | None) -> None:
        self.plan = plan
        self.max_shards = max_shards
        self.shards: list[Shard] = plan.shards(max_shards)
        self.unit_of_region = {r: u for u, shard in enumerate(self.shards) for r in shard.regions}
        self.names = [plan.shard_name(shard) for shard in self.shards]
        self.keys = [unit_key_for(name) for name in self.names]
        self._pending_groups: dict[tuple[int, int], set[int]] = {}

    @classmethod
    def for_run(cls, graph: JobGraph, mode: str | None, max_shards: int | None,
                decided: Mapping[str, int]) -> UnitLayout:
        """The layout of a DAG run: `graph` (its parse-time values) with the run's recorded decisions for its
        adaptive regions cut into shards (`PartitionStore.decided_values`, `core.run_decision`) applied."""
        return cls(Plan(apply(graph, decided), mode), max_shards)

    def scheduler(self) -> RegionScheduler:
        return RegionScheduler(self.plan, [shard.regions for shard in self.shards])

    def units_of_logical(self, logical: int) -> list[int]:
        return list(self._units_by_logical.get(logical, ()))

    @cached_property
    def _units_by_logical(self) -> dict[int, list[int]]:
        """Logical region -> its units, in shard order (built once: the transform asks per unit)."""
        units: dict[int, list[int]] = {}
        for unit, shard in enumerate(self.shards):
            units.setdefault(shard.logical, []).append(unit)
        return units

    def at_grant(self, unit: int, slots: int, input_bytes: int | None) -> tuple[UnitLayout, int, GrantDecision]:
        """The layout `unit` runs in once granted `slots` slots, its index there, and the decision:
        its region's adaptive vertices decided again (`core.adaptive.at_grant`). The same layout and
        unit when nothing changes. Only the unit's own regions differ in a new layout (the decision
        refuses values that would move or rename another unit), so the unit keeps its key and name."""
        decision = at_grant(self.plan, self.shards[unit].logical, self.max_shards, slots, input_bytes)
        if not decision.changed:
            return self, unit, decision
        return *self._regranted(decision), decision

    def smaller_requests(self, unit: int, largest_host_slots: int) -> list[tuple[ResourceProfile, ...]]:
        """Smaller slot requests the unit may start with when its full request is not free, largest first
        (`core.adaptive.smaller_grants`: its adaptive vertices at fewer slots); [] when it has none."""
        logical = self.shards[unit].logical
        if grant_time_blocker(self.plan, logical, self.max_shards) is not None:  # most units: no request built
            return []
        full = len(self.requests(unit, self.width(unit, largest_host_slots)))
        shapes: list[tuple[ResourceProfile, ...]] = []
        for decision in smaller_grants(self.plan, logical, self.max_shards, full):
            layout, at = self._regranted(decision)
            shape = layout.requests(at, layout.width(at, largest_host_slots))
            if len(shape) < (len(shapes[-1]) if shapes else full):
                shapes.append(shape)
        return shapes

    def _regranted(self, decision: GrantDecision) -> tuple[UnitLayout, int]:
        """The layout of a decision's plan and the index there of its region's one unit."""
        layout = UnitLayout(decision.plan, self.max_shards)
        return layout, layout.unit_of_region[decision.plan.region_set.logical[decision.logical].regions[0]]

    def width(self, unit: int, largest_host_slots: int) -> int:
        """How many of the unit's regions run at once: as many as the largest host can hold."""
        shard = self.shards[unit]
        region_slots = max(self.plan.slots(self.plan.regions[r]) for r in shard.regions)
        return max(1, min(len(shard.regions), largest_host_slots // region_slots))

    def requests(self, unit: int, width: int) -> tuple[ResourceProfile, ...]:
        return tuple(p for r in self.plan.shard_requests(self.shards[unit], width) for p in r.expand())

    def slot_request(self, unit: int, width: int) -> dict[str, Any]:
        """What every granted slot of the unit is sized to, as the unit task carries it: the smallest
        profile each of its requests fits in; ``{}`` when a request declares nothing (the host's slot)."""
        size = slot_size(self.requests(unit, width), UNKNOWN)
        return {} if size.unknown else size.to_dict()

    def locations(self, group_index: int, store: PartitionStore,
                  host_of: Callable[[int], str]) -> list[PartitionLocation]:
        """Every producer partition of a group (built once per group, shared by all its readers; a
        reader that also writes into the group takes its own partitions from memory)."""
        group = self.plan.topology.groups[group_index]
        region_of = self.plan.region_set.region_of
        locations = []
        for producer in group.producers:
            unit = self.unit_of_region[region_of[producer]]
            path = store.partition_path(self.keys[unit], group.edge)
            locations.append(PartitionLocation(producer, host_of(unit), path))
        return locations

    def input_bytes(self, unit: int, store: PartitionStore) -> int:
        """Bytes the unit reads from committed partitions: its own directory of each producer unit's
        dataset of an edge it reads (on a key-grouped edge, its key groups' share of the one directory), or
        the whole dataset of a BROADCAST edge."""
        topology = self.plan.topology
        total = 0
        for dataset, (_, edge) in zip(self.producer_datasets(unit, store), self._producers_read(unit), strict=True):
            exec_edge, key_groups = topology.edges[edge], self.key_groups.get(edge)
            values = directories_read(exec_edge, self.shards[unit].index, key_groups)
            paths = [dataset] if values is None else [f"{dataset}/{UNIT_COLUMN}={value}" for value in values]
            size = sum(store.fs.size(path) for path in paths)
            if key_groups is not None:
                groups = key_groups_read(self._span(unit, exec_edge.dst), topology.parallelism[exec_edge.dst],
                                         key_groups)
                size = share_of_bytes(size, groups, key_groups)
            total += size
        return total

    def region_input_bytes(self, logical: int, store: PartitionStore) -> int | None:
        """Bytes of the committed partitions logical region `logical` reads, each producer dataset once
        (all its key groups; a broadcast one once); None when it reads none."""
        paths = {path for unit in self.units_of_logical(logical) for path in self.producer_datasets(unit, store)}
        return sum(store.fs.size(path) for path in sorted(paths)) if paths else None

    @cached_property
    def key_groups(self) -> dict[int, int]:
        """``{edge index: K}`` of the key-grouped edges (`core.keygroups`)."""
        return key_grouped_edges(self.plan, self.max_shards)

    def _span(self, unit: int, vertex: int) -> Span:
        """The unit's subtasks of `vertex` (local indices; contiguous: shards are)."""
        topology = self.plan.topology
        offset, end = topology.offsets[vertex], topology.offsets[vertex] + topology.parallelism[vertex]
        local = [s - offset for r in self.shards[unit].regions for s in self.plan.regions[r].members
                 if offset <= s < end]
        return Span(min(local), max(local) + 1)

    def sink_figures(self, store: PartitionStore, data_dir: str) -> dict[str, dict]:
        """Per sink vertex: rows and checksum summed over the committed units' manifests, and its path."""
        totals: dict[str, dict] = {}
        for key in self.keys:
            committed = store.committed(key)
            manifest = committed.manifest if committed else {}
            for vertex, subtasks in manifest.get("sinks", {}).items():
                path = manifest.get("sink_paths", {}).get(vertex)  # the path rendered for the run
                entry = totals.setdefault(vertex, {"rows": 0, "checksum": 0, "path": path or resolve_sink_path(
                    self.plan.graph.vertices[vertex], data_dir)})
                for figures in subtasks.values():
                    entry["rows"] += figures["rows"]
                    entry["checksum"] = (entry["checksum"] + figures["checksum"]) % CHECKSUM_MODULUS
        return totals

    def releasable(self, unit: int, store: PartitionStore) -> list[str]:
        """Once `unit` has committed: the datasets of the producer units it read (one per producer unit and
        edge) whose every group on that edge the strategy's release rule lets go (`RegionScheduler.
        group_released`), a unit counting as finished once it has committed in the store, so separate
        processes (one Airflow task per unit) agree."""
        done: dict[int, bool] = {}

        def committed(consumer: int) -> bool:
            if consumer not in done:
                done[consumer] = store.committed(self.keys[consumer]) is not None
            return done[consumer]

        strategy = self.strategy
        return [store.partition_path(self.keys[producer], edge) for producer, edge in self._producers_read(unit)
                if all(strategy.group_released(g, committed) for g in self._groups_written(producer, edge))]

    def producer_datasets(self, unit: int, store: PartitionStore) -> list[str]:
        """The committed datasets the unit reads: one per producer unit and edge."""
        return [store.partition_path(self.keys[producer], edge) for producer, edge in self._producers_read(unit)]

    def producer_units(self, unit: int) -> list[int]:
        """The units whose partitions `unit` reads from outside: what it waits for (the strategy's readiness
        rule, `RegionScheduler.input_producers`)."""
        return self.strategy.input_producers(unit)

    def reads_part_of_upstream(self, logical: int) -> bool:
        """Whether a shard of logical region `logical` reads the partitions of only some of the shards of
        a logical region upstream (a pointwise blocking edge): such a shard can start before its upstream
        region task has finished every shard (per-partition-group readiness)."""
        for unit in self.units_of_logical(logical):
            read: dict[int, set[int]] = {}
            for producer in self.producer_units(unit):
                read.setdefault(self.shards[producer].logical, set()).add(producer)
            if any(len(units) < len(self._units_by_logical[upstream]) for upstream, units in read.items()):
                return True
        return False

    def task_instance_of(self, unit: int) -> tuple[str, int]:
        """(region task id, map index) of the task instance that runs `unit`; map index -1 when the
        region task is not mapped (its logical region has one shard)."""
        logical = self.shards[unit].logical
        units = self._units_by_logical[logical]
        return self.plan.region_task_id(logical), (units.index(unit) if len(units) > 1 else -1)

    def _producers_read(self, unit: int) -> list[tuple[int, int]]:
        """(producer unit, edge) pairs of the groups `unit` reads from other units, each once."""
        topology = self.plan.topology
        region_of = self.plan.region_set.region_of
        pairs: dict[tuple[int, int], None] = {}
        for group_index in self.consumed_groups[unit]:
            group = topology.groups[group_index]
            for producer in sorted({self.unit_of_region[region_of[p]] for p in group.producers}):
                pairs[(producer, group.edge)] = None
        return list(pairs)

    @cached_property
    def strategy(self) -> RegionScheduler:
        """The strategy over this layout's units, for its rules as queries (not for events: `scheduler()`
        gives a runner a fresh one)."""
        return self.scheduler()

    @cached_property
    def consumed_groups(self) -> list[list[int]]:
        """Per unit, the partition groups it reads from other units."""
        return [[group for group, _ in groups] for groups in self.strategy.consumed]

    def released_paths(self, group_index: int, store: PartitionStore) -> list[str]:
        """Called once per released partition group: the edge datasets of the producer units that
        wrote into it, for those units whose every group of that edge is now released."""
        group = self.plan.topology.groups[group_index]
        region_of = self.plan.region_set.region_of
        paths = []
        for unit in dict.fromkeys(self.unit_of_region[region_of[p]] for p in group.producers):
            pending = self._pending_groups.setdefault((unit, group.edge), self._groups_written(unit, group.edge))
            pending.discard(group_index)
            if not pending:
                paths.append(store.partition_path(self.keys[unit], group.edge))
        return paths

    def _groups_written(self, unit: int, edge: int) -> set[int]:
        topology = self.plan.topology
        exec_edge = topology.edges[edge]
        written: set[int] = set()
        for region in self.shards[unit].regions:
            for subtask in self.plan.regions[region].members:
                if topology.vertex_of(subtask) == exec_edge.src:
                    written.add(topology.produced_group(exec_edge, subtask - topology.offsets[exec_edge.src]).index)
        return written
