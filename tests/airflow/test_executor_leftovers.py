"""A task process killed mid-attempt (kill -9) records nothing: when Airflow reports its try ended, the
RegionExecutor settles the attempt still recorded as running - its Spark work stopped through the
backend's stopper, the attempt recorded as killed - before the try's slots go back. In-process (no stack,
as test_executor.py); the stopper is a recording double here, the real ones are tested against a real
Spark Connect server (tests/spark/test_connect.py) and real processes (tests/test_orphans.py)."""
from __future__ import annotations

import pytest
from airflow.utils.state import TaskInstanceState
from executor_doubles import RecordingStopper, executor, queue, started, workload

from regionflow.store import RegionflowStore

pytestmark = pytest.mark.timeout(60)


def test_an_attempt_left_running_by_an_ended_try_is_stopped_and_recorded_killed_before_its_slots_go_back(
        settings):
    stopper = RecordingStopper()
    ex = executor(stopper=stopper)
    shard, waiting = workload(slots=4, task_id="t"), workload(slots=4, task_id="next")
    queue(ex, shard, waiting)
    store = RegionflowStore.from_config(f"sqlite:///{settings}/regionflow.db")
    bulk_id = ex.gate.granted[shard.key]
    started(store, bulk_id, "try1-done", state="failed")  # an earlier attempt that ended normally
    started(store, bulk_id, "try1-left")  # the task process was killed while this one ran
    started(store, "copy:7", "copy-7", task_id="t")  # a speculative copy of the shard: its own bulk, not touched
    at_stop = []  # the try's grant and the workers when the stop comes
    stopper.on_stop = lambda: at_stop.append((store.grant_for(bulk_id).state.value,
                                              [w.ti.task_id for w in ex.task_workers]))

    ex.change_state(shard.key, TaskInstanceState.FAILED)

    assert stopper.calls == [("try1-left", "a")]
    assert at_stop == [("granted", ["t"])]  # stopped before the slots went back
    left = store.attempt("try1-left")
    assert left.state.value == "killed" and left.ended_at is not None
    assert left.message == "its task process ended without recording how the attempt ended (killed?); stopped"
    assert store.attempt("try1-done").state.value == "failed" and store.attempt("try1-done").message is None
    assert store.attempt("copy-7").state.value == "running"
    assert store.grant_for(bulk_id).state.value == "released"
    assert [w.ti.task_id for w in ex.task_workers] == ["t", "next"]  # the slots went to the next try


def test_a_try_that_settled_its_attempts_costs_no_stop_and_a_failing_stop_still_settles_the_record(
        settings):
    stopper = RecordingStopper(fails=True)
    ex = executor(stopper=stopper)
    clean, killed = workload(slots=2, task_id="clean"), workload(slots=2, task_id="killed")
    queue(ex, clean, killed)
    store = RegionflowStore.from_config(f"sqlite:///{settings}/regionflow.db")
    started(store, ex.gate.granted[clean.key], "try1-clean", task_id="clean", state="succeeded")
    started(store, ex.gate.granted[killed.key], "try1-killed", task_id="killed")

    ex.change_state(clean.key, TaskInstanceState.SUCCESS)
    assert stopper.calls == []
    ex.change_state(killed.key, TaskInstanceState.FAILED)
    assert stopper.calls == [("try1-killed", "a")]
    record = store.attempt("try1-killed")
    assert record.state.value == "killed"
    assert record.message.endswith("its Spark work could not be stopped: RuntimeError: server unreachable")
    assert {g.task_id: g.state for g in store.grants(dag_id="d")} == {"clean": "released", "killed": "released"}
