"""RegionExecutor's speculative copies in-process: copy requests from the store become FIFO bulks,
placed away from blocklisted hosts and the shard's live attempts, run in a thread (the Spark
submission is a fake), settled first-commit-wins, and their slots go back to the pool."""
from __future__ import annotations

import re

import pytest
from airflow.utils.state import TaskInstanceState
from copy_doubles import Submissions, copies_executor, request, settle_copies
from executor_doubles import executor, queue, workload
from speculation_fakes import commit, commits_at_once, fails, runs_until_killed, wait_for

from regionflow.store import CopyState

pytestmark = pytest.mark.usefixtures("copy_settings")  # tests/airflow/conftest.py


def test_a_copy_runs_on_a_non_excluded_host_wins_and_releases_its_slots(settings, store, partitions):
    fakes = Submissions(lambda s: commits_at_once(partitions, "u1", fakes.calls[0]["task"].attempt_id, "b")(s))
    ex = copies_executor(fakes)
    asked = request(store, settings, excluded=("a",))
    ex.sync()
    settle_copies(ex, store, asked.request_id)
    call = fakes.calls[0]
    assert call["host"] == "b" and call["slots"] == 1 and call["conf"] == {"spark.x": "1"}
    assert call["py_files"] == ["/deps.zip"]
    assert call["task"].host == "b" and call["task"].attempt_id.startswith("spec1-")
    done = store.copy_request(asked.request_id)
    assert done.state is CopyState.WON and done.host == "b" and done.attempt_id == call["task"].attempt_id
    [attempt] = store.attempts("d", "r1", "t")
    assert attempt.speculative and attempt.state == "succeeded" and attempt.host == "b" and attempt.map_index == 1
    assert attempt.bulk_id == f"copy:{asked.request_id}"
    assert store.commit_for("d", "r1", "u1").winner_attempt == attempt.attempt_id
    assert store.grant_for(f"copy:{asked.request_id}").state == "released"
    assert ex.pool.free_slots() == 4 and not ex.pool.blocklist.hosts_for(f"d/r1#copy:{asked.request_id}")
    assert not ex.event_buffer  # copies are no task instances


def test_a_copy_avoids_the_host_of_the_shards_live_attempt(settings, store, partitions):
    fakes = Submissions(runs_until_killed(timeout=10))
    ex = copies_executor(fakes)
    store.start_attempt(attempt_id="try1-orig", dag_id="d", run_id="r1", task_id="t", unit_key="u1", host="a",
                        map_index=1)
    asked = request(store, settings, excluded=())  # the exclusion comes from the live attempt alone
    ex.sync()
    assert wait_for(lambda: store.copy_request(asked.request_id).state is CopyState.RUNNING)
    assert wait_for(lambda: fakes.calls)  # the request is marked running just before the attempt starts its run
    assert fakes.calls[0]["host"] == "b"
    commit(partitions, "u1", "try1-orig", "a")  # the original commits first: the copy is killed
    settle_copies(ex, store, asked.request_id)
    assert fakes.made[0].killed.is_set()
    done = store.copy_request(asked.request_id)
    assert done.state is CopyState.LOST and "try1-orig on a committed first" in done.message
    spec = [a for a in store.attempts("d", "r1", "t") if a.speculative][0]
    assert spec.state == "lost_commit"
    assert ex.pool.free_slots() == 4


def test_copies_wait_their_turn_in_the_fifo_queue(settings, store, partitions):
    fakes = Submissions(lambda s: commits_at_once(partitions, "u1", fakes.calls[0]["task"].attempt_id, "a")(s))
    ex = copies_executor(fakes)
    hog, first = workload(slots=4, task_id="hog"), workload(slots=4, task_id="first")
    queue(ex, hog, first)
    asked = request(store, settings, excluded=())
    ex.sync()
    assert f"copy:{asked.request_id}" in ex.copies.waiting and not fakes.calls
    ex.change_state(hog.key, TaskInstanceState.SUCCESS)
    assert [w.ti.task_id for w in ex.task_workers] == ["hog", "first"] and not fakes.calls
    ex.change_state(first.key, TaskInstanceState.SUCCESS)
    settle_copies(ex, store, asked.request_id)
    assert len(fakes.calls) == 1 and store.copy_request(asked.request_id).state is CopyState.WON


def test_a_failed_copy_does_not_fail_anything_and_frees_its_slots(settings, store):
    fakes = Submissions(fails())
    ex = copies_executor(fakes)
    asked = request(store, settings, excluded=("b",))
    ex.sync()
    settle_copies(ex, store, asked.request_id)
    assert fakes.calls[0]["host"] == "a"
    assert store.copy_request(asked.request_id).state is CopyState.FAILED
    [attempt] = store.attempts("d", "r1", "t")
    assert attempt.state == "failed" and attempt.speculative
    assert ex.pool.free_slots() == 4 and not ex.event_buffer


def test_store_blocklist_entries_are_mirrored_into_the_pool(settings, store):
    import time

    ex = executor()
    store.block("d/r1", "a", time.time() + 30, reason="slow attempt")
    ex.sync()
    assert set(ex.pool.blocklist.hosts_for("d/r1")) == {"a"}
    plain = workload(slots=2, task_id="plain")  # d/r1's next region lands on b only
    queue(ex, plain)
    grant = ex.pool.grant_of(ex.gate.granted[plain.key])
    assert {slot.host for slot in grant.slots} == {"b"}


def test_a_cancelled_request_is_withdrawn_from_the_queue(settings, store):
    fakes = Submissions()
    ex = copies_executor(fakes)
    hog = workload(slots=4, task_id="hog")
    queue(ex, hog)
    asked = request(store, settings, excluded=())
    ex.sync()
    assert f"copy:{asked.request_id}" in ex.copies.waiting
    store.cancel_copies("d", "r1", "t", 1)
    ex.sync()
    assert not ex.copies.waiting and store.grant_for(f"copy:{asked.request_id}").state == "released"
    ex.change_state(hog.key, TaskInstanceState.SUCCESS)
    assert not fakes.calls and ex.pool.free_slots() == 4


def test_sensor_tasks_take_no_slot(settings):
    ex = executor()
    hog = workload(slots=4, task_id="hog")
    sensor = workload(task_id="t__speculation")
    sensor.ti.executor_config = {"regionflow": {"no_slots": True}}
    queue(ex, hog, sensor)
    assert [w.ti.task_id for w in ex.task_workers] == ["hog", "t__speculation"]


def test_a_copy_with_no_host_left_fails_at_once(settings, store):
    fakes = Submissions()
    ex = copies_executor(fakes)
    asked = request(store, settings, excluded=("a", "b"))
    ex.sync()
    done = store.copy_request(asked.request_id)
    assert done.state is CopyState.FAILED and "a copy needs another host" in done.message
    assert not ex.copies.waiting and not fakes.calls and ex.pool.free_slots() == 4


def test_a_late_result_of_an_earlier_sensor_poke_is_not_reported(settings):
    """Reschedule mode: poke 2 is queued (same key) before poke 1's result reached sync(); reporting
    poke 1's success then would make Airflow fail the QUEUED task instance."""
    ex = executor()
    sensor = workload(task_id="t__speculation")
    sensor.ti.executor_config = {"regionflow": {"no_slots": True}}
    queue(ex, sensor)
    ex.change_state(sensor.key, TaskInstanceState.SUCCESS)  # poke 1 ends before poke 2: reported
    assert ex.event_buffer.pop(sensor.key)[0] == TaskInstanceState.SUCCESS
    queue(ex, sensor)  # poke 2
    queue(ex, sensor)  # poke 3 queued before poke 2's result came back
    assert ex.has_task(sensor.ti)
    ex.change_state(sensor.key, TaskInstanceState.SUCCESS)  # poke 2's late result
    assert sensor.key not in ex.event_buffer and ex.has_task(sensor.ti)
    ex.change_state(sensor.key, TaskInstanceState.SUCCESS)  # poke 3's result
    assert ex.event_buffer[sensor.key][0] == TaskInstanceState.SUCCESS and not ex.has_task(sensor.ti)


def test_a_copy_whose_host_is_lost_fails_frees_its_slots_and_leaves_the_original(settings, store):
    import socket

    with socket.socket() as closed:  # a port nobody listens on: the copy's master is gone
        closed.bind(("127.0.0.1", 0))
        gone = f"spark://127.0.0.1:{closed.getsockname()[1]}"
    fakes = Submissions(runs_until_killed(timeout=30), host_lost_timeout=1.0,
                        on_made=lambda submission: setattr(submission, "master", gone))
    ex = copies_executor(fakes)
    asked = request(store, settings, excluded=("b",))
    ex.sync()
    settle_copies(ex, store, asked.request_id, timeout=20)
    done = store.copy_request(asked.request_id)
    assert done.state is CopyState.FAILED and re.match(rf"host \w+ lost: master {gone}", done.message), done.message
    [attempt] = store.attempts("d", "r1", "t")
    assert attempt.speculative and attempt.state == "killed" and f"lost: master {gone}" in attempt.message
    assert fakes.made[0].killed.is_set() and ex.pool.free_slots() == 4 and not ex.event_buffer
