"""Several schedulers, one slot pool: each RegionExecutor's admission gate keeps its own in-memory pool
as a cache of the store's grant rows, and every grant decision is a compare-and-set on the store's pool
version (`regionflow.executors.shared_pool`). On SQLite and on PostgreSQL: no slot is ever held by two
grants at once, and the FIFO order is the store's, global across schedulers."""
from __future__ import annotations

import multiprocessing

from gate_doubles import Counts, NoCopies, NoRecovery, RecordingWorkers, admit, end
from pool_checks import fifo_violations, overlapping_holders
from two_schedulers import CLUSTER, scheduler_process

from regionflow.executors.admission import AdmissionGate
from regionflow.scheduling.hosts import Cluster
from regionflow.scheduling.pool import SlotPool
from regionflow.store import GrantState, RegionflowStore


def scheduler(store_url, name):
    return AdmissionGate(SlotPool(Cluster.parse(CLUSTER)), RegionflowStore(store_url), RecordingWorkers(),
                         copies=NoCopies(), recovery=NoRecovery(), metrics=Counts(), owner=name)


def test_a_small_try_of_one_scheduler_does_not_jump_a_big_one_another_scheduler_queued_first(store_url):
    one, two = scheduler(store_url, "s1"), scheduler(store_url, "s2")
    holder = admit(one, "holder", slots=3)
    big = admit(two, "big", slots=4)  # s2's pool had never seen the holder: it rebuilt from the store and waits
    admit(one, "small", slots=1)  # one slot is free, but the older big try waits first (FIFO)
    assert one.operations.handed() == ["workload:holder"] and two.operations.handed() == []
    end(one, holder)  # s1's pool is stale (s2 wrote), so s1 decides on the store's rows: big first
    assert one.operations.handed() == ["workload:holder"]  # small still waits behind big
    two.refresh()  # s2 reads the store at its next sync: its big try was granted by s1's decision
    assert two.operations.handed() == ["workload:big"]
    end(two, big)
    one.refresh()
    assert one.operations.handed() == ["workload:holder", "workload:small"]
    grants = RegionflowStore(store_url).grants()
    rows = {g.task_id: g for g in grants}
    assert rows["big"].owner == "s2" and rows["big"].granted_at <= rows["small"].granted_at
    assert rows["small"].state is GrantState.GRANTED and overlapping_holders(grants) == []


def test_two_scheduler_processes_never_hold_one_slot_twice_and_every_try_runs(store_url):
    tries = 15
    context = multiprocessing.get_context("spawn")
    processes = [context.Process(target=scheduler_process, args=(store_url, f"s{i}", tries, i)) for i in (1, 2)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=180)
    assert [p.exitcode for p in processes] == [0, 0]
    grants = RegionflowStore(store_url).grants()
    assert len(grants) == 2 * tries and {g.owner for g in grants} == {"s1", "s2"}
    assert all(g.state is GrantState.RELEASED and g.granted_at is not None for g in grants)
    assert overlapping_holders(grants) == [] and fifo_violations(grants) == []
