"""The two allocators `simulate` compares, over the shared event loop (`simulate_loop`): ``fifo-bulk`` (each
schedulable region one bulk in the real `SlotPool`) and ``per-task`` (plain Airflow pools: a slot per
subtask, taken in Airflow's order)."""
from __future__ import annotations

import heapq
from typing import Any

from ..core.plan import Plan, SlotRequest
from ..core.regions import Region
from ..core.resources import ResourceProfile
from .errors import UnfulfillableBulk
from .hosts import Cluster
from .pool import Bulk, Grant, SlotPool
from .simulate_loop import Simulation, SimulationResult


class FifoBulkSimulation(Simulation):
    allocator = "fifo-bulk"

    def __init__(self, plans: list[Plan], cluster: Cluster, durations: dict[str, float]) -> None:
        super().__init__(plans, cluster, durations)
        self.pool = SlotPool(cluster, clock=self.clock)
        self.grant_sizes: dict[str, int] = {}
        self.bulk_regions: dict[str, tuple[int, int]] = {}  # bulk id -> (job, region)
        self.profiles: dict[int, tuple[tuple[SlotRequest, ...], tuple[ResourceProfile, ...]]] = {}
        self.ending: dict[float, list[tuple[int, int, str]]] = {}  # end time -> (job, region, bulk id)

    def run(self) -> SimulationResult:
        for job, scheduler in enumerate(self.schedulers):
            self.submit(job, scheduler.start())
            if self.failure:
                break
        self.loop()
        return self.result(self.stuck_reason)

    def submit(self, job: int, units: list[int]) -> None:
        plan, job_name, pool = self.plans[job], self.job_names[job], self.pool
        for region in map(plan.regions.__getitem__, units):
            run = self.record_ready(job, region)
            bulk_id = f"{job}:{region.index}"
            self.bulk_regions[bulk_id] = (job, region.index)
            bulk = Bulk(bulk_id, job_name, f"{run.job}/{run.region}", self.requests(plan, region))
            try:
                grants = pool.submit(bulk)
            except UnfulfillableBulk as error:
                self.failure = str(error)
                return
            if grants:
                self.start_all(grants)

    def requests(self, plan: Plan, region: Region) -> tuple[ResourceProfile, ...]:
        """The region's slot requests, one profile per slot; regions of one shape share their
        `SlotRequest` tuple, so its expansion is worked out once per shape."""
        requests = plan.slot_requests(region)
        known = self.profiles.get(id(requests))
        if known is None or known[0] is not requests:
            known = self.profiles[id(requests)] = (requests, tuple(p for r in requests for p in r.expand()))
        return known[1]

    def start_all(self, grants: list[Grant]) -> None:
        now, runs, bulk_regions = self.now, self.runs, self.bulk_regions
        for grant in grants:
            bulk_id = grant.bulk_id
            job, region = bulk_regions[bulk_id]
            run = runs[(job, region)]
            run.start, run.hosts = now, grant.hosts
            self.grant_sizes[bulk_id] = len(grant.slots)
            self.take_slots(len(grant.slots))
            self.schedulers[job].on_started(region)
            end = now + self.region_duration[job][region]
            ending = self.ending.get(end)
            if ending is None:  # the first region to end at this instant schedules the instant
                ending = self.ending[end] = []
                self.at(end, self.finish, end)
            ending.append((job, region, bulk_id))

    def finish(self, end: float) -> None:
        """Every region that ends at this instant ends together, as the executor sees the tries
        that ended since its last heartbeat: their slots return in one pool pass (freed slots go
        to older waiting bulks first), then the regions they made ready are submitted in order."""
        ending = self.ending.pop(end)
        runs, grant_sizes, bulk_regions = self.runs, self.grant_sizes, self.bulk_regions
        for job, region, bulk_id in ending:
            runs[(job, region)].end = end
            self.used -= grant_sizes.pop(bulk_id)
            del bulk_regions[bulk_id]
        grants = self.pool.release_all([bulk_id for _, _, bulk_id in ending])
        if grants:
            self.start_all(grants)
        for job, region, _ in ending:
            ready = self.schedulers[job].on_finished(region).ready
            if ready:
                self.submit(job, ready)
                if self.failure:
                    return

    def stuck_reason(self) -> str:
        waiting = [bulk.label for bulk in self.pool.waiting_bulks()[:5]]
        return f"nothing runs and bulks still wait: {', '.join(waiting) or 'none'}"


class PerTaskSimulation(Simulation):
    allocator = "per-task"

    def __init__(self, plans: list[Plan], cluster: Cluster, durations: dict[str, float]) -> None:
        super().__init__(plans, cluster, durations)
        self.free = cluster.total_slots
        self.queue: list[tuple[tuple[Any, ...], int, int]] = []  # (Airflow order key, job, region)
        self.holding: dict[tuple[int, int], int] = {}
        self.needed: dict[tuple[int, int], int] = {}

    def run(self) -> SimulationResult:
        for job, scheduler in enumerate(self.schedulers):
            self.enqueue(job, scheduler.start())
        self.grab()
        self.loop()
        return self.result(self.stuck_reason)

    def enqueue(self, job: int, units: list[int]) -> None:
        topology = self.plans[job].topology
        for region in (self.plans[job].regions[u] for u in units):
            self.record_ready(job, region)
            self.needed[(job, region.index)] = len(region.members)
            self.holding[(job, region.index)] = 0
            for subtask in region.members:
                vertex = topology.vertex_of(subtask)
                key = (self.now, vertex, subtask - topology.offsets[vertex], job, subtask)
                heapq.heappush(self.queue, (key, job, region.index))

    def grab(self) -> None:
        while self.queue and self.free > 0:
            _, job, region = heapq.heappop(self.queue)
            self.free -= 1
            self.take_slots(1)
            self.holding[(job, region)] += 1
            if self.holding[(job, region)] == self.needed[(job, region)]:
                run = self.runs[(job, region)]
                run.start = self.now
                self.schedulers[job].on_started(region)
                self.at(self.now + self.region_duration[job][region], self.finish, job, region)

    def finish(self, job: int, region: int) -> None:
        self.runs[(job, region)].end = self.now
        held = self.holding.pop((job, region))
        self.free += held
        self.used -= held
        self.enqueue(job, self.schedulers[job].on_finished(region).ready)
        self.grab()

    def stuck_reason(self) -> str:
        partial = [(key, held) for key, held in self.holding.items() if 0 < held < self.needed[key]]
        if not partial:
            return "nothing runs and subtasks still wait"
        names = ", ".join(
            f"{self.job_names[job]}/{self.plans[job].region_name(self.plans[job].regions[region])} "
            f"holds {held} of {self.needed[(job, region)]}"
            for (job, region), held in partial[:6]
        )
        return (f"deadlock: all {self.cluster.total_slots} slots are held by partially started regions "
                f"({names}); none can finish and free a slot")


__all__ = ["FifoBulkSimulation", "PerTaskSimulation"]
