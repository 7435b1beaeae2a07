"""Copy requests: the speculation sensor asks, the executor takes, runs and settles them."""
from __future__ import annotations

import pytest
from clock_doubles import FakeClock

from regionflow.store import COPY_TRANSITIONS, CopyState, RegionflowStore, StateTransitionError, UnknownRecordError


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def store(store_url, clock) -> RegionflowStore:
    return RegionflowStore(store_url, clock=clock)


def ask(store: RegionflowStore, shard: int = 1, **overrides):
    fields = dict(dag_id="d", run_id="r", task_id="t", map_index=shard, unit_key=f"u-{shard}", label=f"t[{shard}]",
                  requests=[{"cpu": 1.0}], template_path=f"/tmp/u-{shard}.template.json", py_files=["/x.zip"],
                  spark_conf={"spark.a": "1"}, excluded_hosts=["b", "a", "a"], slow_attempt="try1-abc")
    fields.update(overrides)
    return store.request_copy(**fields)


def test_a_request_holds_everything_the_executor_needs(store, clock):
    record = ask(store)
    assert record.request_id >= 1 and record.bulk_id == f"copy:{record.request_id}"
    assert record.state is CopyState.PENDING and record.is_open
    assert record.job_id == "d/r" and record.requests == ({"cpu": 1.0},)
    assert record.excluded_hosts == ("a", "b") and record.py_files == ("/x.zip",)
    assert record.spark_conf == {"spark.a": "1"} and record.slow_attempt == "try1-abc"
    assert record.requested_at == 1_000.0 and record.attempt_id is None and record.host is None
    assert store.copy_request(record.request_id) == record
    assert store.copy_request(999) is None


def test_one_open_request_per_shard(store):
    first = ask(store, shard=1)
    assert ask(store, shard=1) is None  # a second poke does not ask twice
    other = ask(store, shard=2)
    assert other is not None
    assert [r.request_id for r in store.pending_copy_requests()] == [first.request_id, other.request_id]
    store.mark_copy(first.request_id, "granted")
    assert ask(store, shard=1) is None
    store.mark_copy(first.request_id, "running", attempt_id="spec1-aa", host="b")
    assert ask(store, shard=1) is None
    store.mark_copy(first.request_id, "failed", message="boom")
    again = ask(store, shard=1)  # a failed copy may be retried by the sensor
    assert again is not None and again.request_id != first.request_id


def test_marking_walks_the_states_and_stamps_times(store, clock):
    record = ask(store)
    clock.now = 1_001.0
    granted = store.mark_copy(record.request_id, "granted", host="b")
    assert granted.state is CopyState.GRANTED and granted.granted_at == 1_001.0 and granted.host == "b"
    assert store.pending_copy_requests() == []
    clock.now = 1_002.0
    running = store.mark_copy(record.request_id, "running", attempt_id="spec1-aa")
    assert running.started_at == 1_002.0 and running.attempt_id == "spec1-aa" and running.host == "b"
    clock.now = 1_010.0
    won = store.mark_copy(record.request_id, CopyState.WON)
    assert won.state is CopyState.WON and won.ended_at == 1_010.0 and not won.is_open
    with pytest.raises(StateTransitionError, match="cannot go from won to lost"):
        store.mark_copy(record.request_id, "lost")
    with pytest.raises(UnknownRecordError, match="no copy request 42"):
        store.mark_copy(42, "granted")
    with pytest.raises(ValueError):
        store.mark_copy(record.request_id, "bogus")


def test_final_states_are_final():
    for state, targets in COPY_TRANSITIONS.items():
        if state not in (CopyState.PENDING, CopyState.GRANTED, CopyState.RUNNING):
            assert targets == frozenset()


def test_cancel_copies_leaves_running_ones_to_the_commit_watcher(store):
    pending = ask(store, shard=1)
    running = ask(store, shard=2)
    store.mark_copy(running.request_id, "granted")
    store.mark_copy(running.request_id, "running", attempt_id="spec2-bb", host="a")
    cancelled = store.cancel_copies("d", "r", "t", 1)
    assert [r.request_id for r in cancelled] == [pending.request_id]
    assert store.copy_request(pending.request_id).state is CopyState.CANCELLED
    assert store.cancel_copies("d", "r", "t", 2) == []
    assert store.copy_request(running.request_id).state is CopyState.RUNNING


def test_copy_requests_filters_by_run_task_and_shard(store):
    ask(store, shard=0)
    ask(store, shard=1)
    ask(store, shard=0, run_id="other")
    assert [r.map_index for r in store.copy_requests("d", "r")] == [0, 1]
    assert [r.map_index for r in store.copy_requests("d", "r", "t", 1)] == [1]
    assert store.copy_requests("d", "r", "nope") == []
