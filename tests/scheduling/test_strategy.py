"""Region scheduling strategy: readiness per partition group, failover restart sets, partition release."""
import pytest

from regionflow.core.graph import JobGraph, load_job
from regionflow.core.plan import Plan
from regionflow.scheduling.errors import SchedulingError
from regionflow.scheduling.strategy import RegionScheduler, UnitState


def names(plan, units, scheduler=None):
    units_of = scheduler.units if scheduler else [(u,) for u in range(len(plan.regions))]
    return [plan.subtask_names(plan.regions[units_of[u][0]]) for u in units]


def chain(mode="all-blocking", a=2, b=2, distribution="forward"):
    graph = JobGraph("chain")
    graph.add_vertex("A", a)
    graph.add_vertex("B", b)
    graph.connect("A", "B", distribution, keys=["k"] if distribution == "hash" else [])
    return Plan(graph, mode)


def finish(scheduler, *units):
    """Start and finish `units` in order; the last event's Progress."""
    progress = None
    for unit in units:
        scheduler.on_started(unit)
        progress = scheduler.on_finished(unit)
    return progress


def run_to_completion(scheduler):
    return run_to_completion_from(scheduler, scheduler.start())


def test_pointwise_blocking_consumer_starts_when_its_own_producer_is_done():
    plan = chain()
    scheduler = RegionScheduler(plan)
    assert names(plan, scheduler.start()) == [["A#0"], ["A#1"]]
    scheduler.on_started(0)
    progress = scheduler.on_finished(0)
    assert names(plan, progress.ready) == [["B#0"]]  # while A#1 still runs
    assert scheduler.state[1] is UnitState.READY


def test_all_to_all_consumer_waits_for_every_producer():
    plan = chain(distribution="hash")
    scheduler = RegionScheduler(plan)
    scheduler.start()
    scheduler.on_started(0)
    assert scheduler.on_finished(0).ready == []
    scheduler.on_started(1)
    assert names(plan, scheduler.on_finished(1).ready) == [["B#0"], ["B#1"]]


def test_schedule_order_respects_blocking_dependencies_on_flip119():
    plan = Plan(load_job("examples/jobs/flip119.json"), "all-blocking")
    position = {u: i for i, u in enumerate(run_to_completion(RegionScheduler(plan)))}
    assert len(position) == 12
    region_of = plan.region_set.region_of
    for exec_edge in plan.topology.edges:
        for group in plan.topology.groups[exec_edge.group_lo:exec_edge.group_hi]:
            for producer in group.producers:
                for consumer in group.consumers:
                    assert position[region_of[producer]] < position[region_of[consumer]]


def test_partition_group_released_when_all_consumers_finished():
    plan = chain(distribution="hash")
    scheduler = RegionScheduler(plan)
    scheduler.start()
    finish(scheduler, 0, 1)
    scheduler.on_started(2)
    assert scheduler.on_finished(2).released_groups == []  # B#1 still has to read it
    scheduler.on_started(3)
    assert scheduler.on_finished(3).released_groups == [0]


def test_failure_restarts_region_and_waits_for_inputs_again():
    plan = chain(distribution="hash")
    scheduler = RegionScheduler(plan)
    scheduler.start()
    finish(scheduler, 0, 1)
    scheduler.on_started(2)
    restart = scheduler.on_failed(2)
    assert restart.restarted == [2] and restart.cancel == [] and restart.ready == [2]


def test_failure_with_lost_input_restarts_producers_and_their_other_consumers():
    plan = chain(distribution="hash")
    scheduler = RegionScheduler(plan)
    scheduler.start()
    finish(scheduler, 0, 1)
    scheduler.on_started(2)
    scheduler.on_started(3)
    restart = scheduler.on_failed(2, lost_groups=[0])
    # both producers re-run; B#1 had already read their output, so it restarts (and is cancelled)
    assert restart.restarted == [0, 1, 2, 3]
    assert restart.cancel == [3]
    assert restart.ready == [0, 1]
    assert scheduler.state[2] is UnitState.WAITING and scheduler.state[3] is UnitState.WAITING
    assert run_to_completion_from(scheduler, restart.ready) == [0, 1, 2, 3]
    assert scheduler.done


def run_to_completion_from(scheduler, ready):
    order = []
    while ready:
        unit = ready.pop(0)
        scheduler.on_started(unit)
        order.append(unit)
        ready += scheduler.on_finished(unit).ready
    return order


def test_released_input_counts_as_lost_on_restart():
    plan = chain(distribution="hash", b=1)
    scheduler = RegionScheduler(plan)
    scheduler.start()
    assert finish(scheduler, 0, 1, 2).released_groups == [0]
    # B#0 finished, its input was deleted; restarting it must re-run its producers first
    scheduler.state[2] = UnitState.RUNNING
    restart = scheduler.on_failed(2)
    assert restart.restarted == [0, 1, 2] and restart.ready == [0, 1]


def test_shards_as_units_release_and_order():
    plan = Plan(load_job("examples/jobs/flip119.json"), "all-blocking")
    shards = plan.shards(1)
    scheduler = RegionScheduler(plan, [s.regions for s in shards])
    assert run_to_completion(scheduler) == [0, 1, 2, 3]
    assert scheduler.done


def test_units_must_cover_every_region_once():
    plan = chain()
    with pytest.raises(SchedulingError, match="in no unit"):
        RegionScheduler(plan, [(0,), (1,), (2,)])
    with pytest.raises(SchedulingError, match="must not overlap"):
        RegionScheduler(plan, [(0, 1), (1, 2, 3)])


def test_finishing_a_region_that_was_never_handed_out_is_refused():
    plan = chain()
    scheduler = RegionScheduler(plan)
    scheduler.start()
    with pytest.raises(SchedulingError, match="waiting"):
        scheduler.on_finished(2)


def test_region_that_also_writes_into_a_group_it_reads_waits_only_for_the_others():
    # A(2) -RESCALE blocking-> B(1) and A -FORWARD? no: B reads A#0 and A#1; A#0 is pipelined into B#0
    graph = JobGraph("self")
    graph.add_vertex("A", 2)
    graph.add_vertex("B", 1)
    graph.add_vertex("C", 2)
    graph.connect("A", "B", "rescale", "blocking")
    graph.connect("C", "B", "rescale", "pipelined")
    plan = Plan(graph)
    scheduler = RegionScheduler(plan)
    order = run_to_completion(scheduler)
    assert scheduler.done and len(order) == len(plan.regions)
