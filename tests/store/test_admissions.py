"""Admissions: one grant row per time Airflow queues a task instance try, and store calls that
outlast a briefly locked SQLite file (the store's retry policy, regionflow.store.retry)."""
from __future__ import annotations

import sqlite3
import threading
import time

import pytest

from regionflow.store import GrantState, RegionflowStore, StateTransitionError, StoreError, admission_of, bulk_id_for
from regionflow.store import retry as store_retry
from regionflow.store.retry import StoreRetry, is_locked_error

FIELDS = dict(dag_id="dag", run_id="run", task_id="sensor", label="dag.sensor", requests=[{"cpu": 1.0}])


@pytest.fixture
def store(store_url) -> RegionflowStore:
    return RegionflowStore(store_url)


def test_bulk_ids_of_admissions():
    assert bulk_id_for("u", 3) == "u:3" and bulk_id_for("u", 3, 1) == "u:3"
    assert bulk_id_for("u", 3, 2) == "u:3/2"
    assert [admission_of(b) for b in ("u:3", "u:3/2", "u:3/17")] == [1, 2, 17]


def test_an_open_admission_is_returned_and_a_closed_one_gets_a_successor(store):
    first = store.admit("ti", 1, **FIELDS)
    assert first.bulk_id == "ti:1" and first.state is GrantState.WAITING
    assert store.admit("ti", 1, **FIELDS) == first  # queued again while waiting: same row
    store.record_granted("ti:1", [["h", 0]])
    assert store.admit("ti", 1, **FIELDS).state is GrantState.GRANTED  # live: the caller may reuse it
    store.record_released("ti:1")
    second = store.admit("ti", 1, **FIELDS)
    assert second.bulk_id == "ti:1/2" and second.state is GrantState.WAITING
    store.record_rejected("ti:1/2", "too big")
    assert store.admit("ti", 1, **FIELDS).bulk_id == "ti:1/3"
    assert [g.bulk_id for g in store.admissions("ti", 1)] == ["ti:1", "ti:1/2", "ti:1/3"]
    assert store.current_grant("ti", 1).bulk_id == "ti:1/3"
    assert store.admit("ti", 2, **FIELDS).bulk_id == "ti:2"  # a new try starts again at 1
    assert store.current_grant("other", 1) is None


def test_admissions_of_one_ti_do_not_mix_with_a_longer_try_number(store):
    store.admit("ti", 1, **FIELDS)
    store.admit("ti", 11, **FIELDS)
    assert [g.bulk_id for g in store.admissions("ti", 1)] == ["ti:1"]


def test_release_reasons_and_reuse_notes_are_kept(store):
    store.admit("ti", 1, **FIELDS)
    store.record_granted("ti:1", [["h", 0]])
    store.record_reused("ti:1", "re-queued: reused")
    released = store.record_released("ti:1", "withdrawn: marked success")
    assert released.message == "re-queued: reused; withdrawn: marked success"
    with pytest.raises(StateTransitionError, match="only a live grant"):
        store.record_reused("ti:1", "again")


@pytest.fixture
def locked(tmp_path):
    """A store with a 50 ms busy timeout, and another connection holding its file's exclusive lock."""
    path = tmp_path / "regionflow.db"
    store = RegionflowStore(f"sqlite:///{path}", busy_timeout_s=0.05)
    store.create_all()
    locker = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    locker.execute("BEGIN EXCLUSIVE")
    yield store, locker
    if locker.in_transaction:
        locker.rollback()


def test_a_briefly_locked_database_is_waited_out(locked):
    store, locker = locked
    threading.Timer(0.4, locker.rollback).start()
    started = time.monotonic()
    assert store.admit("ti", 1, **FIELDS).bulk_id == "ti:1"  # the 50 ms busy timeout alone would fail
    assert 0.3 < time.monotonic() - started < 5


def test_a_database_locked_for_good_fails_in_bounded_time_with_the_cause(locked, monkeypatch):
    store, _ = locked
    slept: list[float] = []
    real_sleep, this_thread = time.sleep, threading.get_ident()

    def sleep(seconds: float) -> None:  # `time.sleep` itself is patched: count this thread's sleeps only
        if threading.get_ident() == this_thread:  # (a CI run counted a 1 s sleep of another thread)
            slept.append(seconds)
        real_sleep(seconds)

    monkeypatch.setattr(store_retry.time, "sleep", sleep)
    started = time.monotonic()
    with pytest.raises(StoreError, match="locked") as raised:
        store.admit("ti", 1, **FIELDS)
    # bounded by counting, not by the wall clock of a possibly slow machine: a few tries, ~3 s of back-off
    assert len(slept) == store_retry.LOCKED_TRIES - 1 and sum(slept) < 3.5
    assert time.monotonic() - started < 120  # and it does not hang
    assert is_locked_error(raised.value)


def test_other_errors_are_not_retried(store):
    calls = []

    def boom():
        calls.append(1)
        raise StoreError("disk full")

    with pytest.raises(StoreError, match="disk full"):
        StoreRetry(bound_s=0.0).call(boom)
    assert len(calls) == 1
