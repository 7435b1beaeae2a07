"""The store as the one truth of the shared slot pool: pool versions, compare-and-set grant decisions,
scheduler membership and take-over, and the schema migration. Runs on SQLite and, in the PostgreSQL
session (``REGIONFLOW_TEST_POSTGRES=1``), on PostgreSQL too (see ``conftest.store_url``)."""
from __future__ import annotations

import sqlite3

import pytest

from regionflow.store import (
    SCHEMA_VERSION,
    GrantState,
    RegionflowStore,
    SlotConflictError,
    StalePoolError,
    StoreError,
    is_stopped,
    migrate,
)

FIELDS = dict(dag_id="dag", run_id="run", label="dag.t", requests=[{"cpu": 1.0}])


@pytest.fixture
def store(store_url) -> RegionflowStore:
    return RegionflowStore(store_url)


def admit(store, name, owner="s1"):
    return store.admit(f"ti-{name}", 1, task_id=name, owner=owner, **FIELDS)


def test_every_write_to_the_grants_table_raises_the_pool_version_by_one(store):
    start = store.pool_version()
    first = admit(store, "a")
    assert first.pool_version == start + 1 and store.pool_version() == start + 1
    [granted] = store.record_grants([(first.bulk_id, [("h", 0)])], expected_version=start + 1)
    assert granted.pool_version == start + 2 and granted.state is GrantState.GRANTED and granted.owner == "s1"
    assert store.record_released(first.bulk_id).pool_version == start + 3
    store.block("dag/run", "h", 10**12)  # the blocklist is not the grants table
    assert store.pool_version() == start + 3


def test_a_decision_made_on_an_old_version_writes_nothing(store):
    a, b = admit(store, "a"), admit(store, "b")
    with pytest.raises(StalePoolError, match=f"not {a.pool_version}: rebuild it from the store"):
        store.record_grants([(a.bulk_id, [("h", 0)])], expected_version=a.pool_version)
    assert store.grant_for(a.bulk_id).state is GrantState.WAITING
    snapshot = store.pool_snapshot()
    assert snapshot.version == b.pool_version and [g.bulk_id for g in snapshot.waiting] == [a.bulk_id, b.bulk_id]


def test_a_batch_of_decisions_is_checked_against_itself_and_is_all_or_nothing(store):
    a, b = admit(store, "a"), admit(store, "b")
    with pytest.raises(SlotConflictError, match=r"h\[0\] by 'ti-a:1'"):
        store.record_grants([(a.bulk_id, [("h", 0)]), (b.bulk_id, [("h", 0)])], expected_version=b.pool_version)
    assert [g.state for g in store.grants()] == [GrantState.WAITING, GrantState.WAITING]
    assert store.pool_version() == b.pool_version


def test_a_stopped_schedulers_waiting_rows_are_released_and_its_live_grants_adopted_once(store):
    store.register_scheduler("s1", hostname="m1", pid=1)
    live, waiting = admit(store, "live"), admit(store, "waiting")
    store.record_grants([(live.bulk_id, [("h", 0)])], expected_version=waiting.pool_version)
    mine = admit(store, "mine", owner="s2")
    assert store.owners() == {"s1", "s2"}
    taken = store.take_over("s1", "s2", "s1 stopped")
    assert [g.bulk_id for g in taken.released] == [waiting.bulk_id]
    assert [g.bulk_id for g in taken.adopted] == [live.bulk_id]
    assert store.grant_for(waiting.bulk_id).state is GrantState.RELEASED
    assert "s1 stopped" in store.grant_for(waiting.bulk_id).message
    assert store.grant_for(live.bulk_id).owner == "s2" and store.grant_for(mine.bulk_id).state is GrantState.WAITING
    again = store.take_over("s1", "s3", "s1 stopped")  # a second heir finds nothing left
    assert again.released == () and again.adopted == ()
    [s1] = [s for s in store.schedulers() if s.scheduler_id == "s1"]
    assert s1.ended_at is not None


def test_a_clean_end_releases_only_the_schedulers_waiting_rows(store):
    store.register_scheduler("s1", hostname="m1", pid=1)
    live, waiting = admit(store, "live"), admit(store, "waiting")
    other = admit(store, "other", owner="s2")
    store.record_grants([(live.bulk_id, [("h", 0)])], expected_version=other.pool_version)
    released = store.end_scheduler("s1", "stopping")
    assert [g.bulk_id for g in released] == [waiting.bulk_id]
    assert store.grant_for(live.bulk_id).state is GrantState.GRANTED
    assert store.grant_for(other.bulk_id).state is GrantState.WAITING


def test_when_a_scheduler_counts_as_stopped(store):
    record = store.register_scheduler("s1", hostname="m1", pid=4242)
    now = record.heartbeat_at
    assert not is_stopped(record, now=now + 29, timeout_s=30, hostname="m2")
    assert is_stopped(record, now=now + 31, timeout_s=30, hostname="m2")
    assert is_stopped(record, now=now, timeout_s=30, hostname="m1", alive=lambda pid: False)  # its process is gone
    assert not is_stopped(record, now=now, timeout_s=30, hostname="m2", alive=lambda pid: False)  # not our machine
    store.scheduler_heartbeat("s1")
    assert store.schedulers()[0].heartbeat_at >= now


def test_a_store_of_an_older_schema_says_to_run_migrate_store_and_migrates_keeping_its_rows(tmp_path, capsys):
    path = tmp_path / "old.db"
    url = f"sqlite:///{path}"
    admit(RegionflowStore(url), "kept")
    with sqlite3.connect(path) as db:  # what regionflow's schema version 2 looked like
        db.execute("ALTER TABLE grants DROP COLUMN owner")
        db.execute("DROP TABLE pool_state")
        db.execute("DROP TABLE schedulers")
        db.execute("DROP TABLE decisions")
        db.execute("UPDATE schema_version SET version = 2")
        db.execute("DROP TABLE regionflow_alembic_version")  # it came before the store's Alembic migrations
    with pytest.raises(StoreError, match=r"schema version 2, written by an older regionflow.*"
                                         r"run `regionflow migrate-store`"):
        RegionflowStore(url).grants()
    from regionflow.cli import main

    assert main(["migrate-store", "--store-url", url]) == 0
    assert f"from schema version 2 to {SCHEMA_VERSION}" in capsys.readouterr().out
    store = RegionflowStore(url)
    [kept] = store.grants()
    assert kept.task_id == "kept" and kept.owner is None and store.schema_version() == SCHEMA_VERSION
    assert admit(store, "new").pool_version == 1
    assert store.decisions("any", "run") == {}
    assert migrate(url) == (SCHEMA_VERSION, SCHEMA_VERSION)  # a current store is left as it is


def test_migrating_a_store_that_does_not_exist_says_so(tmp_path):
    with pytest.raises(StoreError, match="no regionflow store at .* to migrate"):
        migrate(f"sqlite:///{tmp_path}/none.db")
