"""Speculative copies of a scheduler that stopped (kill -9) are taken over by another one: in-process,
two RegionExecutors on one store, the Spark submission a fake (as in test_executor_copies.py). The
stopped scheduler's copy records are settled and, while the shard still runs and has not committed,
the copy is asked for again and runs on the scheduler that took over."""
from __future__ import annotations

import time

import pytest
from copy_doubles import Submissions, copies_executor, request, settle_copies
from executor_doubles import queue, workload
from speculation_fakes import commit, commits_at_once, runs_until_killed, wait_for

from regionflow.store import CopyState

pytestmark = [pytest.mark.timeout(120), pytest.mark.usefixtures("copy_settings")]  # tests/airflow/conftest.py


def successor(fakes):
    """A second scheduler, started after the first one's heartbeat is older than Airflow's threshold."""
    ex = copies_executor(fakes, wall_clock=lambda: time.time() + 31)
    ex.recovery.start()
    return ex


def original_attempt(store):
    store.start_attempt(attempt_id="try1-orig", dag_id="d", run_id="r1", task_id="t", unit_key="u1", host="a",
                        map_index=1)


def test_a_running_copy_of_a_stopped_scheduler_is_asked_again_and_wins_on_its_successor(
        settings, store, partitions):
    fakes = Submissions(runs_until_killed(timeout=60),
                        lambda s: commits_at_once(partitions, "u1", fakes.calls[1]["task"].attempt_id, "b")(s))
    first = copies_executor(fakes)
    first.recovery.start()
    original_attempt(store)
    asked = request(store, settings, excluded=())
    first.sync()
    assert wait_for(lambda: store.copy_request(asked.request_id).state is CopyState.RUNNING)
    assert wait_for(lambda: fakes.made)  # marked running just before the attempt starts its run
    dead_attempt = store.copy_request(asked.request_id).attempt_id
    try:
        # the first scheduler is killed here: its copy thread would die with it
        second = successor(fakes)
        old = store.copy_request(asked.request_id)
        assert old.state is CopyState.FAILED and "stopped while this copy ran" in old.message
        assert first.recovery.scheduler_id in old.message
        assert store.attempt(dead_attempt).state == "killed"
        [again] = [r for r in store.copy_requests("d", "r1", "t", 1) if r.request_id != asked.request_id]
        assert again.state is CopyState.PENDING and again.template_path == old.template_path
        assert again.slow_attempt == "try1-slow" and again.spark_conf == {"spark.x": "1"}
        second.sync()
        settle_copies(second, store, again.request_id)
        won = store.copy_request(again.request_id)
        assert won.state is CopyState.WON and won.host == "b"  # a is the original attempt's host
        assert store.commit_for("d", "r1", "u1").winner_attempt == won.attempt_id
        assert store.grant_for(f"copy:{again.request_id}").state == "released"
        assert store.grant_for(f"copy:{asked.request_id}").state == "released"
        assert second.pool.free_slots() == 4
    finally:
        fakes.made[0].kill()  # the stand-in of the dead scheduler's thread


def test_a_waiting_copy_of_a_stopped_scheduler_waits_again_at_its_successor(settings, store):
    fakes = Submissions()
    first = copies_executor(fakes)
    first.recovery.start()
    hog = workload(slots=4, task_id="hog")
    queue(first, hog)  # the copy cannot get slots
    original_attempt(store)
    asked = request(store, settings, excluded=())
    first.sync()
    assert f"copy:{asked.request_id}" in first.copies.waiting
    second = successor(fakes)
    old = store.copy_request(asked.request_id)
    assert old.state is CopyState.CANCELLED and "before this copy got slots" in old.message
    assert store.grant_for(f"copy:{asked.request_id}").state == "released"
    [again] = [r for r in store.copy_requests("d", "r1", "t", 1) if r.request_id != asked.request_id]
    second.sync()
    assert f"copy:{again.request_id}" in second.copies.waiting and not fakes.calls  # behind the adopted hog


@pytest.mark.parametrize("situation", ["committed", "no live attempt"])
def test_a_copy_of_a_stopped_scheduler_is_not_asked_again_when_its_shard_needs_none(
        settings, store, partitions, situation):
    fakes = Submissions()
    first = copies_executor(fakes)
    first.recovery.start()
    queue(first, workload(slots=4, task_id="hog"))
    original_attempt(store)
    asked = request(store, settings, excluded=())
    first.sync()
    if situation == "committed":
        commit(partitions, "u1", "try1-orig", "a")
    else:
        store.end_attempt("try1-orig", "failed", "its task process died")
    second = successor(fakes)
    assert store.copy_request(asked.request_id).state is CopyState.CANCELLED
    assert [r.request_id for r in store.copy_requests("d", "r1", "t", 1)] == [asked.request_id]
    second.sync()
    assert not second.copies.waiting and not fakes.calls
