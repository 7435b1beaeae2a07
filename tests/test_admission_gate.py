"""The admission gate (`regionflow.executors.admission`) without Airflow: a real SlotPool and store, and
a recording double of the executor's worker operations (like Flink's TestingSchedulerOperations), so
each test reads the exact sequence of hand-overs, failures and task-log notes the gate asked for."""
from __future__ import annotations

import subprocess
import sys
import time

import pytest
from gate_doubles import Counts, NoCopies, NoRecovery, RecordingWorkers, a_try, admit, end  # noqa: F401

from regionflow.contract import NoSlots, RegionSlots
from regionflow.core.resources import UNKNOWN
from regionflow.executors.admission import AdmissionGate
from regionflow.scheduling.hosts import Cluster
from regionflow.scheduling.pool import SlotPool
from regionflow.store import RegionflowStore


@pytest.fixture
def gate(tmp_path):
    pool = SlotPool(Cluster.parse("a:slots=2;b:slots=2"))
    store = RegionflowStore(f"sqlite:///{tmp_path / 'store.db'}")
    return AdmissionGate(pool, store, RecordingWorkers(), copies=NoCopies(), recovery=NoRecovery(), metrics=Counts())


def test_whole_bulks_oldest_first_and_a_small_one_does_not_jump_a_waiting_big_one(gate):
    three, four, plain = admit(gate, "three", slots=3), admit(gate, "four", slots=4), admit(gate, "plain")
    assert gate.operations.handed() == ["workload:three"]
    end(gate, three)
    assert gate.operations.handed() == ["workload:three", "workload:four"]
    end(gate, four, "failed")
    assert gate.operations.handed() == ["workload:three", "workload:four", "workload:plain"]
    assert gate.metrics.grants == 3 and gate.granted == {plain.key: gate.granted[plain.key]}
    assert {g.task_id: g.state for g in gate.store.grants(dag_id="d")} == {
        "three": "released", "four": "released", "plain": "granted"}


def test_a_bulk_the_cluster_can_never_hold_fails_at_once_saying_why(gate):
    admit(gate, "huge", slots=5)
    ((kind, workload, message),) = gate.operations.calls
    assert (kind, workload) == ("fail", "workload:huge")
    assert message.startswith("regionflow: this task can never get its slots:") and "5 slots" in message
    assert gate.metrics.rejections == 1 and not gate.held and gate.pool.free_slots() == 4


def test_a_try_queued_again_while_granted_reuses_its_grant_and_the_late_end_is_not_reported(gate):
    poke = admit(gate, "sensor")
    gate.admit("workload:sensor again", poke)  # a reschedule poke queued before the first run's end was read
    assert gate.operations.handed() == ["workload:sensor", "workload:sensor again"]
    assert gate.end_of_run(poke.key, "success") is False  # the first run's end: not reported
    assert gate.end_of_run(poke.key, "success") is True
    gate.after_end(poke.key, "success")
    assert gate.pool.free_slots() == 4 and not gate.runs


def test_a_try_queued_twice_while_waiting_keeps_its_place_with_the_newest_workload(gate):
    admit(gate, "holder", slots=4)
    waiting = admit(gate, "next", slots=1)
    gate.admit("workload:next (new token)", waiting)
    assert len(gate.held) == 1 and next(iter(gate.held.values())).workload == "workload:next (new token)"


def test_a_waiting_try_changed_in_airflow_is_withdrawn_with_a_note_and_frees_its_place(gate):
    holder = admit(gate, "holder", slots=3)
    marked = admit(gate, "marked", slots=2)
    behind = admit(gate, "behind", slots=1)
    gate.withdraw_changed({marked.ti_id: ("success", 1), behind.ti_id: ("queued", 1)},
                          still_queued=frozenset({"queued", "scheduled"}))
    note = "regionflow: withdrawn from the slot queue: the task instance is success (try 1) now"
    assert ("note", "workload:marked", note) in gate.operations.calls
    assert gate.operations.handed() == ["workload:holder", "workload:behind"]  # the older big one left the queue
    end(gate, holder)
    assert gate.pool.free_slots() == 3


LIVE = frozenset({"queued", "running", "restarting"})
GRACE_S = 120.0


def test_a_try_that_ended_in_airflow_without_a_workers_report_gives_its_slots_back_after_the_grace(gate):
    lost, running, retried, gone = (admit(gate, name) for name in ("lost", "running", "retried", "gone"))
    behind = admit(gate, "behind")  # waits: the four hold every slot
    states = {lost.ti_id: ("success", 1), running.ti_id: ("running", 1), retried.ti_id: ("scheduled", 2)}
    assert gate.unheard_ends(states, LIVE, now=1000.0, grace_s=GRACE_S) == []  # the report may still come
    assert gate.unheard_ends(states, LIVE, now=1000.0 + GRACE_S - 1, grace_s=GRACE_S) == []
    found = dict(gate.unheard_ends(states, LIVE, now=1000.0 + GRACE_S, grace_s=GRACE_S))
    assert found == {lost.key: "success (try 1)", retried.key: "scheduled (try 2)", gone.key: "deleted"}

    for key, now_is in found.items():
        gate.end_unheard(key, now_is)

    assert gate.operations.handed()[-1] == "workload:behind" and set(gate.granted) == {running.key, behind.key}
    assert lost.key not in gate.runs
    rows = {g.task_id: (g.state, g.message) for g in gate.store.grants(dag_id="d")}
    assert rows["lost"] == ("released", "released: the task instance is success (try 1) and no worker reported the end")
    assert rows["running"][0] == "granted"


def test_a_try_seen_live_again_starts_its_grace_over(gate):
    flaky = admit(gate, "flaky")
    assert gate.unheard_ends({flaky.ti_id: ("up_for_reschedule", 1)}, LIVE, now=0.0, grace_s=GRACE_S) == []
    assert gate.unheard_ends({flaky.ti_id: ("queued", 1)}, LIVE, now=60.0, grace_s=GRACE_S) == []  # re-queued
    assert gate.unheard_ends({flaky.ti_id: ("up_for_reschedule", 1)}, LIVE, now=130.0, grace_s=GRACE_S) == []
    assert gate.unheard_ends({flaky.ti_id: ("up_for_reschedule", 1)}, LIVE, now=250.0, grace_s=GRACE_S) == [
        (flaky.key, "up_for_reschedule (try 1)")]


DONE = frozenset({"success", "failed", "up_for_retry", "skipped", "upstream_failed", "removed"})


def test_a_try_done_in_airflows_database_gives_its_slots_back_before_its_worker_reports(gate):
    """As an Airflow pool frees its slots when the state is written, not when the task process exits: a
    try done for good frees its slots at once; a deferred or rescheduled one (the same try comes back) and a
    running one keep theirs; the worker's later report is read and changes nothing else."""
    done, retried, deferred, running = (admit(gate, name, slots=1)
                                        for name in ("done", "retried", "deferred", "running"))
    big = admit(gate, "big", slots=2)  # waits: the four hold every slot
    states = {done.ti_id: ("success", 1), retried.ti_id: ("up_for_retry", 1),
              deferred.ti_id: ("deferred", 1), running.ti_id: ("running", 1)}
    found = dict(gate.ended_in_database(states, DONE))
    assert found == {done.key: None, retried.key: None}  # the plain end of their runs: no note

    for key, note in found.items():
        gate.end_early(key, note)

    assert gate.operations.handed()[-1] == "workload:big"
    assert set(gate.granted) == {deferred.key, running.key, big.key}
    rows = {g.task_id: (g.state, g.message) for g in gate.store.grants(dag_id="d")}
    assert rows["done"] == ("released", None)
    end(gate, done)  # the worker's report, once the task process exited: read, and nothing more goes back
    end(gate, retried, "failed")
    assert set(gate.granted) == {deferred.key, running.key, big.key} and gate.pool.free_slots() == 0
    assert done.key not in gate.runs and retried.key not in gate.runs


def test_a_try_cleared_or_deleted_while_granted_is_done_and_the_new_try_waits_its_turn(gate):
    cleared, deleted = admit(gate, "cleared", slots=2), admit(gate, "deleted", slots=2)
    found = dict(gate.ended_in_database({cleared.ti_id: ("queued", 2)}, DONE))
    assert found == {cleared.key: "released: the task instance is queued (try 2) in Airflow's database",
                     deleted.key: "released: the task instance is deleted in Airflow's database"}
    gate.end_early(cleared.key, found[cleared.key])
    [first] = gate.store.admissions(cleared.ti_id, 1)
    assert (first.state, first.message) == ("released", found[cleared.key])
    again = admit(gate, "cleared", slots=2, try_number=2)  # the new try: a bulk of its own
    assert gate.operations.handed()[-1] == "workload:cleared" and again.key in gate.granted
    assert gate.granted[again.key] != first.bulk_id


def test_a_failure_frees_the_slots_and_reports_once(gate):
    held = admit(gate, "held", slots=4)
    gate.fail("workload:held", held.key, "regionflow: boom")
    assert gate.operations.calls[-1] == ("fail", "workload:held", "regionflow: boom")
    assert gate.pool.free_slots() == 4 and not gate.granted and not gate.runs


def test_a_task_without_slots_goes_straight_to_the_workers(gate):
    admit(gate, "holder", slots=4)
    admit(gate, "sensor", contract=NoSlots())
    assert gate.operations.handed() == ["workload:holder", "workload:sensor"]


def test_the_gate_imports_neither_airflow_nor_pyspark():
    code = ("import sys, regionflow.executors.admission; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'airflow', 'pyspark'}))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def run_needing(*sizes):
    """The contract of a first region task (1 slot) whose run declares regions of `sizes` slots."""
    from regionflow.contract import RegionNeed, RegionSlots
    from regionflow.core.resources import UNKNOWN

    needs = tuple(RegionNeed(f"region_{i}", f"r{i}", 0, (UNKNOWN,) * size) for i, size in enumerate(sizes))
    return RegionSlots(((UNKNOWN,),), ("first",), run_needs=needs)


def test_a_run_whose_later_region_can_never_get_its_slots_fails_at_its_first_task(gate):
    """FLIP-138 per run: the first task declares the run; a region of 5 slots on a 4-slot cluster fails
    the run at its start, before the first region (which fits) takes a slot or does any work."""
    first = admit(gate, "first", contract=run_needing(1, 5))
    ((kind, workload, message),) = gate.operations.calls
    assert (kind, workload) == ("fail", "workload:first")
    assert message.startswith("regionflow: this DAG run can never finish on this cluster: not enough resources "
                              "for run d/r: region 'd.region_1[0] (r1)' needs 5 slots")
    assert "the cluster has" in message and "region_0" not in message
    assert gate.pool.free_slots() == 4 and not gate.held and gate.metrics.rejections == 1
    [row] = gate.store.grants(dag_id="d")
    assert row.task_id == "first" and row.state == "rejected" and "region_1" in row.message
    assert first.key not in gate.waiting


def test_a_run_the_cluster_can_serve_starts_even_when_its_hosts_are_busy_or_blocklisted(gate):
    admit(gate, "holder", slots=4)  # busy now: the declaration is about what the cluster has, not what is free
    gate.pool.block("d/r", "a")  # entries expire: they do not make a run impossible
    admit(gate, "first", contract=run_needing(1, 4))
    assert gate.operations.handed() == ["workload:holder"] and len(gate.held) == 1
    assert not [call for call in gate.operations.calls if call[0] == "fail"]


def test_a_sync_step_paced_by_every_is_due_at_once_then_at_most_once_per_interval():
    from regionflow.executors.guard import Every

    pace = Every(10.0)
    assert [pace.due(t) for t in (100.0, 105.0, 109.9, 110.0, 115.0, 121.0)] == [True, False, False, True, False, True]


def test_an_elastic_try_that_waited_alone_starts_with_the_free_slots_and_not_before(gate):
    hog = admit(gate, "hog", slots=2)  # one of the two 2-slot hosts
    smaller = (((UNKNOWN,) * 2, (UNKNOWN,)),)
    elastic = a_try("elastic", contract=RegionSlots(((UNKNOWN,) * 4,), ("elastic",), smaller=smaller))
    gate.admit("workload:elastic", elastic)
    queued = time.monotonic()
    gate.start_elastic(10.0, queued + 9.0)
    assert gate.operations.handed() == ["workload:hog"]  # it has not waited 10 s yet
    gate.start_elastic(10.0, queued + 11.0)
    assert gate.operations.handed() == ["workload:hog", "workload:elastic"]
    store = gate.store
    first, second = sorted((g for g in store.grants(dag_id="d") if g.task_id == "elastic"), key=lambda g: g.bulk_id)
    assert first.state == "released" and "withdrawn after 11 s: admitted again with 2 of its 4" in first.message
    assert second.state == "granted" and len(second.requests) == len(second.slots) == 2
    assert gate.granted[elastic.key] == second.bulk_id and gate.waiting == {}
    # a fixed try then waits for its 4, and an elastic one behind it never starts smaller ahead of it
    fixed = admit(gate, "fixed", slots=4)
    later = a_try("later", contract=RegionSlots(((UNKNOWN,) * 4,), ("later",), smaller=smaller))
    gate.admit("workload:later", later)
    gate.start_elastic(10.0, time.monotonic() + 60.0)
    assert gate.operations.handed() == ["workload:hog", "workload:elastic"]
    end(gate, hog)
    end(gate, elastic)
    assert gate.operations.handed()[-1] == "workload:fixed" and fixed.key in gate.granted
