"""regionflow's store: every operation and transition rule, on SQLite files shared by threads and
spawned processes the way the executor, task processes and the API server share it.
"""
from __future__ import annotations

import dataclasses
import multiprocessing
import os
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any

import pytest
from clock_doubles import FakeClock

from regionflow.core.errors import RegionflowError
from regionflow.scheduling.blocklist import EVERY_JOB
from regionflow.store import (
    GRANT_TRANSITIONS,
    SCHEMA_VERSION,
    AttemptState,
    GrantState,
    RegionflowStore,
    SlotConflictError,
    StateTransitionError,
    StoreError,
    UnknownRecordError,
    bulk_id_for,
    default_url,
    job_id_for,
    mask_url,
    try_of,
)

PROCESS_TIMEOUT_S = 60


@pytest.fixture
def db_path(tmp_path) -> str:
    return str(tmp_path / "regionflow.db")


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def store(store_url, clock) -> RegionflowStore:
    return RegionflowStore(store_url, clock=clock)


@pytest.fixture
def sqlite_store(db_path, clock) -> RegionflowStore:
    return RegionflowStore(f"sqlite:///{db_path}", clock=clock)


def wait(store: RegionflowStore, bulk_id: str = "ti-1:1", **fields: Any):
    values = dict(dag_id="dag", run_id="run", task_id="region_a", try_number=1, label="a+b",
                  requests=[{"cpu": 1.0, "heap_mb": 512}, {"cpu": 1.0, "heap_mb": 512}])
    values.update(fields)
    return store.record_waiting(bulk_id, **values)


def start(store: RegionflowStore, attempt_id: str, unit_key: str = "unit-0", **fields: Any):
    values = dict(dag_id="dag", run_id="run", task_id="region_a", host="h1")
    values.update(fields)
    return store.start_attempt(attempt_id, unit_key=unit_key, **values)


# ------------------------------------------------------------------------------- opening


def test_from_config_defaults_next_to_the_airflow_db(tmp_path):
    store = RegionflowStore.from_config(None, airflow_home=str(tmp_path))
    store.create_all()
    assert store.url == f"sqlite:///{tmp_path}/regionflow.db"
    assert os.path.isfile(tmp_path / "regionflow.db")


def test_from_config_falls_back_to_airflow_home_env_and_an_explicit_url_wins(tmp_path, monkeypatch):
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path / "home"))
    assert default_url() == f"sqlite:///{tmp_path}/home/regionflow.db"
    explicit = f"sqlite:///{tmp_path}/other.db"
    assert RegionflowStore.from_config(explicit, airflow_home="/ignored").url == explicit


def test_schema_version_is_one_row_and_create_all_is_idempotent(store, db_path):
    store.create_all()
    store.create_all()
    RegionflowStore(f"sqlite:///{db_path}").create_all()
    with sqlite3.connect(db_path) as raw:
        assert raw.execute("SELECT version FROM schema_version").fetchall() == [(SCHEMA_VERSION,)]
    assert store.schema_version() == SCHEMA_VERSION


def test_a_store_from_another_schema_version_is_refused(sqlite_store, db_path):
    store = sqlite_store  # a SQLite file (the test reopens or inspects it)
    store.create_all()
    with sqlite3.connect(db_path) as raw:  # the store's Alembic revision of schema version 99
        raw.execute("UPDATE regionflow_alembic_version SET version_num = '0099'")
    with pytest.raises(StoreError, match=f"schema version 99.*uses version {SCHEMA_VERSION}"):
        RegionflowStore(f"sqlite:///{db_path}").grants()


def test_sqlite_connections_use_wal_and_a_busy_timeout(sqlite_store, db_path):
    store = sqlite_store  # a SQLite file (the test reopens or inspects it)
    store.create_all()
    with store._engine.connect() as connection:  # what every store session gets
        assert connection.exec_driver_sql("PRAGMA busy_timeout").scalar() == 30_000
        assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert connection.exec_driver_sql("PRAGMA synchronous").scalar() == 1  # NORMAL


class LockedThenWal:
    """A cursor whose first switches to WAL hit the lock, as when processes open a fresh file together."""

    def __init__(self, locked_times: int, final_mode: str = "wal") -> None:
        self.locked_times, self.final_mode = locked_times, final_mode

    def execute(self, sql: str) -> LockedThenWal:
        if self.locked_times:
            self.locked_times -= 1
            raise sqlite3.OperationalError("database is locked")
        return self

    def fetchone(self) -> tuple[str]:
        return (self.final_mode,)


def test_switching_a_fresh_file_to_wal_waits_out_the_lock():
    from regionflow.store.engine import _ensure_wal

    _ensure_wal(LockedThenWal(locked_times=3), deadline=float("inf"))
    with pytest.raises(sqlite3.OperationalError, match="WAL journal mode.*stays locked"):
        _ensure_wal(LockedThenWal(locked_times=10**6), deadline=0.0)
    with pytest.raises(sqlite3.OperationalError, match="stays delete"):
        _ensure_wal(LockedThenWal(locked_times=0, final_mode="delete"), deadline=0.0)


def test_a_missing_directory_is_a_clear_error(tmp_path):
    url = f"sqlite:///{tmp_path}/no/such/dir/regionflow.db"
    with pytest.raises(StoreError) as raised:
        RegionflowStore(url)
    message = str(raised.value)
    assert isinstance(raised.value, RegionflowError)
    assert url in message and "does not exist" in message and "create it" in message


def test_an_unopenable_file_is_a_clear_error_on_first_use(tmp_path):
    folder = tmp_path / "a-directory.db"
    folder.mkdir()  # the path exists, but SQLite cannot open a directory as a database
    store = RegionflowStore(f"sqlite:///{folder}")
    with pytest.raises(StoreError, match="cannot open regionflow's store at .*a-directory.db"):
        store.grants()


def test_passwords_are_masked_in_errors():
    with pytest.raises(StoreError) as raised:
        RegionflowStore("nosuchdb://scott:tiger@db.example/regionflow")
    assert "tiger" not in str(raised.value) and "scott:***@db.example" in str(raised.value)
    assert mask_url("postgresql://scott:tiger@db/rf") == "postgresql://scott:***@db/rf"


@pytest.mark.parametrize("url", ["sqlite://", "sqlite:///:memory:", "not a url"])
def test_in_memory_and_malformed_urls_are_refused(url):
    with pytest.raises(StoreError, match="in-memory|not a SQLAlchemy URL"):
        RegionflowStore(url)


def test_the_package_imports_neither_airflow_nor_pyspark():
    code = ("import sys, regionflow.store; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('airflow', 'pyspark')))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


# ------------------------------------------------------------------------------- grants


def test_a_grant_goes_waiting_granted_released(store, clock):
    waiting = wait(store, bulk_id_for("ti-1", 1), map_index=3)
    assert waiting.state is GrantState.WAITING and waiting.slots == () and waiting.host is None
    assert waiting.job_id == job_id_for("dag", "run") == "dag/run"
    assert waiting.bulk_id == "ti-1:1" and waiting.map_index == 3 and waiting.submitted_at == 1_000.0
    clock.advance(5)
    granted = store.record_granted("ti-1:1", [("h2", 0), ("h1", 3)])
    assert granted.state is GrantState.GRANTED and granted.granted_at == 1_005.0
    assert granted.host == "h2" and granted.slots == (("h2", 0), ("h1", 3)) and granted.hosts == ("h2", "h1")
    assert store.grant_for("ti-1:1") == granted
    clock.advance(5)
    released = store.record_released("ti-1:1")
    assert released.state is GrantState.RELEASED and released.released_at == 1_010.0
    assert released.slots == granted.slots  # history keeps where it ran
    assert store.grant_for("missing:1") is None


def test_records_are_frozen_copies(store):
    record = wait(store)
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.state = GrantState.GRANTED  # type: ignore[misc]
    record.requests[0]["cpu"] = 99.0
    assert store.grant_for(record.bulk_id).requests[0]["cpu"] == 1.0


def test_requests_may_be_profiles_with_to_dict(store):
    class Profile:
        def to_dict(self) -> dict:
            return {"cpu": 2.0, "gpu": 1}

    assert wait(store, requests=[Profile()]).requests == ({"cpu": 2.0, "gpu": 1},)


def test_recording_a_waiting_bulk_again_is_a_no_op(store, clock):
    first = wait(store)
    clock.advance(1)
    assert wait(store) == first
    assert len(store.grants()) == 1


def test_a_granted_bulk_cannot_wait_again(store):
    wait(store)
    store.record_granted("ti-1:1", [("h1", 0)])
    with pytest.raises(StateTransitionError, match="'ti-1:1'.*from granted to waiting.*new bulk id"):
        wait(store)


def drive_to(store: RegionflowStore, state: GrantState, bulk_id: str) -> None:
    """Bring a fresh bulk to `state`, each on its own host so grants never share slots."""
    wait(store, bulk_id)
    if state is GrantState.WAITING:
        return
    if state is GrantState.REJECTED:
        store.record_rejected(bulk_id, "needs 9 GPUs, cluster has 0")
        return
    store.record_granted(bulk_id, [(f"host-{bulk_id}", 0)])
    if state is GrantState.RELEASED:
        store.record_released(bulk_id)
    elif state is GrantState.LOST:
        store.mark_lost(f"host-{bulk_id}")


def apply(store: RegionflowStore, target: GrantState, bulk_id: str) -> None:
    actions: dict[GrantState, Callable[[], Any]] = {
        GrantState.GRANTED: lambda: store.record_granted(bulk_id, [(f"other-{bulk_id}", 0)]),
        GrantState.RELEASED: lambda: store.record_released(bulk_id),
        GrantState.REJECTED: lambda: store.record_rejected(bulk_id, "never fits"),
    }
    actions[target]()


@pytest.mark.parametrize("source", list(GrantState))
@pytest.mark.parametrize("target", [GrantState.GRANTED, GrantState.RELEASED, GrantState.REJECTED])
def test_grant_transition_rules(store, source, target):
    bulk_id = f"{source.value}-{target.value}:1"
    drive_to(store, source, bulk_id)
    assert store.grant_for(bulk_id).state is source
    if target in GRANT_TRANSITIONS[source]:
        apply(store, target, bulk_id)
        expected = GrantState.LOST if source is GrantState.LOST else target
        assert store.grant_for(bulk_id).state is expected
    else:
        with pytest.raises(StateTransitionError) as raised:
            apply(store, target, bulk_id)
        assert f"'{bulk_id}'" in str(raised.value)
        assert f"from {source.value} to {target.value}" in str(raised.value)
        assert store.grant_for(bulk_id).state is source


def test_a_released_grant_cannot_be_granted_again(store):
    wait(store)
    store.record_granted("ti-1:1", [("h1", 0)])
    store.record_released("ti-1:1")
    with pytest.raises(StateTransitionError,
                       match=r"grant 'ti-1:1' \(region 'a\+b'\) cannot go from released to granted"):
        store.record_granted("ti-1:1", [("h1", 0)])


def test_rejection_keeps_the_reason(store):
    wait(store)
    rejected = store.record_rejected("ti-1:1", "region a+b needs 4 slots of 8 GB; the cluster has 2")
    assert rejected.state is GrantState.REJECTED and "needs 4 slots" in rejected.message


def test_unknown_bulks_and_bad_slot_lists_are_refused(store):
    with pytest.raises(UnknownRecordError, match="no grant 'nope:1'.*record_waiting must come first"):
        store.record_granted("nope:1", [("h1", 0)])
    wait(store)
    with pytest.raises(StoreError, match="no slots"):
        store.record_granted("ti-1:1", [])
    with pytest.raises(StoreError, match="names a slot twice"):
        store.record_granted("ti-1:1", [("h1", 0), ("h1", 0)])
    assert store.grant_for("ti-1:1").state is GrantState.WAITING


def test_a_slot_held_by_a_live_grant_cannot_be_granted_twice(store):
    wait(store, "first:1")
    wait(store, "second:1")
    store.record_granted("first:1", [("h1", 0), ("h1", 1)])
    with pytest.raises(SlotConflictError, match=r"'second:1'.*h1\[1\] by 'first:1'"):
        store.record_granted("second:1", [("h1", 1), ("h2", 0)])
    assert store.grant_for("second:1").state is GrantState.WAITING
    store.record_released("first:1")
    assert store.record_granted("second:1", [("h1", 1), ("h2", 0)]).state is GrantState.GRANTED


def test_mark_lost_takes_every_live_grant_with_a_slot_on_the_host(store, clock):
    for bulk in ("on-h1:1", "spans-h1:1", "elsewhere:1", "waiting:1"):
        wait(store, bulk)
    store.record_granted("on-h1:1", [("h1", 0)])
    store.record_granted("spans-h1:1", [("h2", 0), ("h1", 1)])
    store.record_granted("elsewhere:1", [("h2", 1)])
    lost = store.mark_lost("h1")
    assert [grant.bulk_id for grant in lost] == ["on-h1:1", "spans-h1:1"]
    assert all(grant.state is GrantState.LOST and "host 'h1' was lost" in grant.message for grant in lost)
    assert [grant.bulk_id for grant in store.live_grants()] == ["elsewhere:1"]
    assert store.grant_for("waiting:1").state is GrantState.WAITING
    clock.advance(3)
    released = store.record_released("on-h1:1")
    assert released.state is GrantState.LOST and released.released_at == clock.now
    assert store.mark_lost("h1") == []


def test_a_restarted_executor_sees_live_and_waiting_grants(sqlite_store, db_path, clock):
    store = sqlite_store  # a SQLite file (the test reopens or inspects it)
    for index in range(5):
        wait(store, f"ti-{index}:1", task_id=f"region_{index}")
        clock.advance(1)
    store.record_granted("ti-3:1", [("h1", 0)])
    clock.advance(1)
    store.record_granted("ti-1:1", [("h1", 1), ("h2", 0)])
    store.record_granted("ti-0:1", [("h2", 1)])
    store.record_released("ti-0:1")
    store.record_rejected("ti-4:1", "never fits")

    restarted = RegionflowStore(f"sqlite:///{db_path}")
    live = restarted.live_grants()
    assert [(grant.bulk_id, grant.slots) for grant in live] == [
        ("ti-3:1", (("h1", 0),)), ("ti-1:1", (("h1", 1), ("h2", 0)))]
    assert [grant.bulk_id for grant in restarted.waiting_grants()] == ["ti-2:1"]
    with pytest.raises(SlotConflictError):  # the new instance still refuses a double grant
        restarted.record_granted("ti-2:1", [("h2", 0)])


def test_grants_filter_by_dag_and_run(store):
    wait(store, "a:1", dag_id="d1", run_id="r1")
    wait(store, "b:1", dag_id="d1", run_id="r2")
    wait(store, "c:1", dag_id="d2", run_id="r1")
    assert [grant.bulk_id for grant in store.grants()] == ["a:1", "b:1", "c:1"]
    assert [grant.bulk_id for grant in store.grants(dag_id="d1")] == ["a:1", "b:1"]
    assert [grant.bulk_id for grant in store.grants(dag_id="d1", run_id="r2")] == ["b:1"]
    assert [grant.bulk_id for grant in store.grants(run_id="r1")] == ["a:1", "c:1"]


# ------------------------------------------------------------------------------- attempts


def test_an_attempt_starts_and_ends(store, clock):
    started = start(store, "att-1", bulk_id="ti-1:1", map_index=2, speculative=True, input_bytes=5 * 2**32)
    assert started.state is AttemptState.RUNNING and started.started_at == 1_000.0 and started.ended_at is None
    assert started.speculative and started.input_bytes == 5 * 2**32 and started.map_index == 2
    clock.advance(7.5)
    ended = store.end_attempt("att-1", "succeeded", "wrote 3 partitions", input_bytes=123)
    assert ended.state is AttemptState.SUCCEEDED and ended.duration_s == 7.5
    assert ended.message == "wrote 3 partitions" and ended.input_bytes == 123
    assert store.attempt("att-1") == ended and store.attempt("nope") is None


@pytest.mark.parametrize("state", ["succeeded", "failed", "killed", "lost_commit"])
def test_an_ended_attempt_cannot_end_again(store, state):
    start(store, "att-1")
    store.end_attempt("att-1", state)
    with pytest.raises(StateTransitionError, match=f"'att-1' of unit 'unit-0' cannot go from {state} to killed"):
        store.end_attempt("att-1", AttemptState.KILLED)


def test_bad_attempt_operations_are_refused(store):
    with pytest.raises(UnknownRecordError, match="no attempt 'ghost'"):
        store.end_attempt("ghost", "failed")
    start(store, "att-1")
    with pytest.raises(StoreError, match="cannot end as 'running'"):
        store.end_attempt("att-1", "running")
    with pytest.raises(StoreError, match="cannot end as 'done'.*succeeded"):
        store.end_attempt("att-1", "done")
    with pytest.raises(StoreError, match="'att-1'.*already started on host 'h1'.*fresh attempt id"):
        start(store, "att-1")


def test_attempts_and_live_attempts_filter(store):
    start(store, "a1", unit_key="u0", task_id="t1")
    start(store, "a2", unit_key="u0", task_id="t1", host="h2", speculative=True)
    start(store, "a3", unit_key="u1", task_id="t2")
    start(store, "other-run", unit_key="u0", task_id="t1", run_id="run-2")
    store.end_attempt("a1", "lost_commit")
    assert [a.attempt_id for a in store.attempts("dag", "run")] == ["a1", "a2", "a3"]
    assert [a.attempt_id for a in store.attempts("dag", "run", task_id="t2")] == ["a3"]
    assert [a.attempt_id for a in store.live_attempts("u0")] == ["a2", "other-run"]
    assert [a.attempt_id for a in store.live_attempts("u0", dag_id="dag", run_id="run")] == ["a2"]


# ------------------------------------------------------------------------------- commits


def test_the_first_commit_wins(store, clock):
    assert store.record_commit("dag", "run", "u0", "att-1") == "att-1"
    clock.advance(1)
    assert store.record_commit("dag", "run", "u0", "att-2") == "att-1"
    assert store.record_commit("dag", "run-2", "u0", "att-3") == "att-3"  # another run, another unit
    winner = store.commit_for("dag", "run", "u0")
    assert winner.winner_attempt == "att-1" and winner.committed_at == 1_000.0
    assert store.commit_for("dag", "run", "u9") is None
    assert [c.unit_key for c in store.commits("dag", "run")] == ["u0"]


def test_the_first_commit_wins_across_threads(store):
    threads_per_unit, units = 8, 10
    barrier = threading.Barrier(threads_per_unit)
    results: dict[int, list[str]] = {}

    def contend(index: int) -> None:
        barrier.wait()
        results[index] = [store.record_commit("dag", "run", f"u{unit}", f"att-{index}") for unit in range(units)]

    threads = [threading.Thread(target=contend, args=(index,)) for index in range(threads_per_unit)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(PROCESS_TIMEOUT_S)
    assert len(results) == threads_per_unit
    for unit in range(units):
        answers = {results[index][unit] for index in results}
        assert answers == {store.commit_for("dag", "run", f"u{unit}").winner_attempt}


def commit_units(url: str, name: str, units: int, barrier: Any) -> list[str]:
    store = RegionflowStore(url)
    barrier.wait(PROCESS_TIMEOUT_S)
    return [store.record_commit("dag", "run", f"u{unit}", name) for unit in range(units)]


def test_the_first_commit_wins_across_two_processes_on_a_fresh_file(db_path):
    url, units = f"sqlite:///{db_path}", 100  # neither process finds the tables: both create them
    first, second = run_processes(commit_units, [(url, "proc-a", units), (url, "proc-b", units)])
    assert first == second
    assert set(first) <= {"proc-a", "proc-b"}
    stored = RegionflowStore(url).commits("dag", "run")
    assert {c.unit_key: c.winner_attempt for c in stored} == {f"u{unit}": first[unit] for unit in range(units)}


# ------------------------------------------------------------------------------- blocklist


def test_block_extends_and_never_shortens(store, clock):
    added = store.block("dag/run", "h1", 1_060.0, "slow attempt att-1")
    assert (added.expires_at, added.reason, added.added_at) == (1_060.0, "slow attempt att-1", 1_000.0)
    clock.advance(10)
    extended = store.block("dag/run", "h1", 1_120.0, "failed attempt att-2")
    assert (extended.expires_at, extended.reason, extended.added_at) == (1_120.0, "failed attempt att-2", 1_000.0)
    kept = store.block("dag/run", "h1", 1_030.0, "earlier")
    assert (kept.expires_at, kept.reason) == (1_120.0, "failed attempt att-2")
    assert kept.remaining_s(1_100.0) == 20.0


def test_active_blocks_and_purge_expired(store):
    store.block("job-1", "h1", 100.0, "a")
    store.block("job-1", "h2", 300.0, "b")
    store.block("job-2", "h1", 200.0, "c")
    assert [(b.job_id, b.host) for b in store.active_blocks(150.0)] == [("job-2", "h1"), ("job-1", "h2")]
    assert [b.host for b in store.active_blocks(150.0, job_id="job-1")] == ["h2"]
    assert store.active_blocks(300.0) == []
    assert store.purge_expired(200.0) == 2  # expires_at <= now is expired
    assert [(b.job_id, b.host) for b in store.active_blocks(0.0)] == [("job-1", "h2")]
    assert store.purge_expired(200.0) == 0
    assert store.unblock("job-1", "h2") and not store.unblock("job-1", "h2")


def test_a_jobs_active_blocks_include_the_entries_for_every_job(store):
    store.block("job-1", "h1", 100.0, "slow attempt")
    store.block(EVERY_JOB, "h2", 200.0, "host lost: server down")
    store.block("job-2", "h3", 300.0, "slow attempt")
    assert [(b.job_id, b.host) for b in store.active_blocks(0.0, job_id="job-1")] == [("job-1", "h1"), ("*", "h2")]
    assert [(b.job_id, b.host) for b in store.active_blocks(0.0, job_id="job-3")] == [("*", "h2")]
    assert [b.host for b in store.active_blocks(250.0, job_id="job-1")] == []


def test_a_bulk_id_gives_back_its_task_instance_and_try():
    assert try_of(bulk_id_for("0198-ab", 3)) == ("0198-ab", 3) == try_of(bulk_id_for("0198-ab", 3, admission=2))
    for bad in ("ti:first", "no-colon", ":3"):
        with pytest.raises(ValueError, match="not a task instance bulk id"):
            try_of(bad)


def test_an_unblock_for_one_expiry_leaves_an_entry_extended_meanwhile(store):
    store.block(EVERY_JOB, "h1", 100.0, "host lost: server down")
    store.block(EVERY_JOB, "h1", 160.0, "host lost: server down again")  # a second loss extends it
    assert not store.unblock(EVERY_JOB, "h1", expires_at=100.0)
    assert [(b.host, b.expires_at) for b in store.active_blocks(0.0)] == [("h1", 160.0)]
    assert store.unblock(EVERY_JOB, "h1", expires_at=160.0)
    assert store.active_blocks(0.0) == []


def test_active_blocks_default_to_the_store_clock(store, clock):
    store.block("job", "h1", clock.now + 60, "slow")
    assert len(store.active_blocks()) == 1
    clock.advance(60)
    assert store.active_blocks() == [] and store.purge_expired() == 1


# ------------------------------------------------------------------------------- metrics


def test_metrics_series_and_filters(store, clock):
    store.record_metric("dag", "run", "t1", "rows", 10, labels={"map_index": 0})
    clock.advance(1)
    store.record_metric("dag", "run", "t1", "rows", 25)
    store.record_metric("dag", "run", "t2", "rows", 7)
    store.record_metric("dag", "other", "t1", "rows", 1)
    assert store.record_metrics("dag", "run", "t1", {"bytes": 4096, "skew": 1.5}) == 2
    series = store.metrics("dag", "run", "t1", "rows")
    assert [(m.value, m.recorded_at, m.labels) for m in series] == [(10.0, 1_000.0, {"map_index": 0}),
                                                                   (25.0, 1_001.0, None)]
    assert {m.name for m in store.metrics("dag", "run", task_id="t1")} == {"rows", "bytes", "skew"}
    assert len(store.metrics("dag", "run")) == 5


def test_latest_metrics_follow_recorded_time_not_insertion_order(store):
    store.record_metric("dag", "run", "t1", "rows", 30, recorded_at=30.0)
    store.record_metric("dag", "run", "t1", "rows", 10, recorded_at=10.0)  # late report of an old value
    store.record_metric("dag", "run", "t1", "bytes", 1, recorded_at=5.0)
    store.record_metric("dag", "run", "t2", "rows", 2, recorded_at=5.0)
    store.record_metric("dag", "run", "t2", "rows", 3, recorded_at=5.0)  # same moment: the later row wins
    store.record_metric("dag", "other", "t1", "rows", 99, recorded_at=99.0)
    latest = store.latest_metrics("dag", "run")
    assert {key: m.value for key, m in latest.items()} == {("t1", "rows"): 30.0, ("t1", "bytes"): 1.0,
                                                          ("t2", "rows"): 3.0}


# ------------------------------------------------------------------------------- processes


def write_rows(url: str, worker: int, rows: int, barrier: Any) -> int:
    """What a busy task process does: one short write transaction per metric and per attempt."""
    store = RegionflowStore(url)
    store.create_all()
    barrier.wait(PROCESS_TIMEOUT_S)
    for index in range(rows):
        store.record_metric("dag", "run", f"t{worker}", "rows", index)
        start(store, f"w{worker}-a{index}", unit_key=f"u{index}", task_id=f"t{worker}")
    return rows


def test_four_processes_write_at_once_without_locking_errors(db_path):
    url, workers, rows = f"sqlite:///{db_path}", 4, 200
    RegionflowStore(url).create_all()  # the executor opens the store first
    assert run_processes(write_rows, [(url, worker, rows) for worker in range(workers)]) == [rows] * workers
    store = RegionflowStore(url)
    assert len(store.metrics("dag", "run")) == workers * rows
    assert len(store.attempts("dag", "run")) == workers * rows
    spans = []
    for worker in range(workers):
        series = store.metrics("dag", "run", f"t{worker}")
        assert [m.value for m in series] == [float(index) for index in range(rows)]
        spans.append((series[0].recorded_at, series[-1].recorded_at))
    assert max(first for first, _ in spans) < min(last for _, last in spans)  # they really overlapped


def write_after_fork(store: RegionflowStore, results: Any) -> None:
    inherited = store._engine.pool.checkedin()  # the parent's idle connection, if it leaked
    store.record_metric("dag", "run", "child", "rows", 1)
    results.put(inherited)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX only")
def test_a_forked_child_opens_its_own_connections(store):
    store.record_metric("dag", "run", "parent", "rows", 0)
    assert store._engine.pool.checkedin() == 1
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    child = context.Process(target=write_after_fork, args=(store, results))
    child.start()
    assert results.get(timeout=PROCESS_TIMEOUT_S) == 0
    child.join(PROCESS_TIMEOUT_S)
    assert child.exitcode == 0
    store.record_metric("dag", "run", "parent", "rows", 2)
    assert [m.task_id for m in store.metrics("dag", "run")] == ["parent", "child", "parent"]


def run_processes(target: Callable[..., Any], argument_lists: list[tuple]) -> list[Any]:
    """Run `target(*arguments, barrier)` in spawned processes that start together; their results in order."""
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(len(argument_lists))
    results = context.Queue()
    processes = [context.Process(target=_report, args=(results, index, target, arguments, barrier))
                 for index, arguments in enumerate(argument_lists)]
    for process in processes:
        process.start()
    outcomes = dict(results.get(timeout=PROCESS_TIMEOUT_S) for _ in processes)
    for process in processes:
        process.join(PROCESS_TIMEOUT_S)
    failures = [outcome for outcome in outcomes.values() if isinstance(outcome, str) and outcome.startswith("ERROR")]
    assert not failures, failures
    return [outcomes[index] for index in range(len(processes))]


def _report(results: Any, index: int, target: Callable[..., Any], arguments: tuple, barrier: Any) -> None:
    try:
        results.put((index, target(*arguments, barrier)))
    except BaseException as error:  # the parent shows it; a bare exit code would hide it
        results.put((index, f"ERROR {type(error).__name__}: {error}"))


def test_the_recorder_stores_each_attempts_input_bytes_for_the_speculation_sensor(store):
    from types import SimpleNamespace

    from regionflow.store.recorder import StoreRecorder

    recorder = StoreRecorder(store, "d", "r", "t", 0, bulk_id="b")
    for attempt_id, read in (("a1", 4096), ("a2", None)):
        attempt = SimpleNamespace(attempt_id=attempt_id, task=SimpleNamespace(unit_key="u", input_bytes=read),
                                  host=SimpleNamespace(name="h1"))
        recorder.started(attempt)
    assert {a.attempt_id: a.input_bytes for a in store.attempts("d", "r")} == {"a1": 4096, "a2": None}
