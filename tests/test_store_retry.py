"""The executor's store calls wait out a short outage of regionflow's store (the store's one retry policy,
`regionflow.store.retry`, with an outage bound: `regionflow.executors.store_retry`), without Airflow and without
sleeping: the retry's sleep and clock are injected, the store calls are recording
doubles that fail as told. The end-to-end case (a PostgreSQL store restarted under a running Airflow) is
tests/airflow/test_store_restart.py."""
from __future__ import annotations

import logging
import sqlite3

import psycopg2
import psycopg2.errors
import pytest
from fake_time import FakeTime
from gate_doubles import Counts, NoCopies, NoRecovery, RecordingWorkers, admit, end
from sqlalchemy.exc import IntegrityError, OperationalError

from regionflow.executors.admission import AdmissionGate
from regionflow.executors.store_retry import RetryingStore, StoreRetry, is_connection_error
from regionflow.scheduling.hosts import Cluster
from regionflow.scheduling.pool import SlotPool
from regionflow.store import RegionflowStore, StateTransitionError, StoreError


def refused():
    """What a store call raises while the server is down (the store wraps SQLAlchemy's error)."""
    orig = psycopg2.OperationalError('connection to server at "127.0.0.1", port 5432 failed: Connection refused')
    try:
        raise OperationalError("SELECT 1", {}, orig) from orig
    except OperationalError as error:
        try:
            raise StoreError("regionflow's store at 'postgresql://...' failed: refused") from error
        except StoreError as store_error:
            return store_error


def dropped():
    """A pooled connection the server closed (SQLAlchemy recognised the disconnect)."""
    return OperationalError("SELECT 1", {}, psycopg2.OperationalError("server closed the connection unexpectedly"),
                            connection_invalidated=True)


def injected_fault():
    """test_conformance's store fault: a SQLite trigger's RAISE(ABORT) on insert."""
    orig = sqlite3.IntegrityError("injected fault: the store refuses rf_faulty")
    return IntegrityError("INSERT INTO grants ...", {}, orig)


@pytest.mark.parametrize("error, lost", [
    (refused(), True),
    (dropped(), True),
    (psycopg2.OperationalError("server closed the connection unexpectedly"), True),
    (psycopg2.errors.AdminShutdown("terminating connection due to administrator command"), True),
    (psycopg2.errors.CannotConnectNow("the database system is starting up"), True),
    (injected_fault(), False),
    (OperationalError("BEGIN IMMEDIATE", {}, sqlite3.OperationalError("database is locked")), False),
    (OperationalError("UPDATE ...", {}, psycopg2.errors.DeadlockDetected("deadlock detected")), False),
    (IntegrityError("INSERT ...", {}, psycopg2.errors.UniqueViolation("duplicate key")), False),
    (StateTransitionError("grant 'x' cannot go from released to released"), False),
    (RuntimeError("not the store's"), False),
])
def test_only_a_lost_or_refused_connection_is_a_connection_error(error, lost):
    assert is_connection_error(error) is lost


class Flaky:
    """A recording store call: raises each of `errors` in turn, then returns 'ok'."""

    def __init__(self, *errors, forever=None):
        self.errors, self.forever, self.calls = list(errors), forever, 0

    def __call__(self, *args):
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        if self.forever is not None:
            raise self.forever
        return "ok"


@pytest.fixture
def fake_time():
    return FakeTime()


def retry_of(fake_time, bound_s=20.0):
    return StoreRetry(bound_s, sleep=fake_time.sleep, clock=fake_time.clock, log=logging.getLogger("retry-test"))


def test_a_connection_error_is_tried_again_with_growing_waits_until_the_store_answers(fake_time, caplog):
    retry, call = retry_of(fake_time), Flaky(refused(), dropped(), refused())
    with caplog.at_level(logging.DEBUG, logger="retry-test"):
        assert retry.call(call, "arg") == "ok"
    assert call.calls == 4 and len(fake_time.slept) == 3
    assert 0.1 <= fake_time.slept[0] <= 0.2 and 0.2 <= fake_time.slept[1] <= 0.3 and 0.4 <= fake_time.slept[2] <= 0.5
    told = [(r.levelno, r.getMessage()) for r in caplog.records if r.levelno >= logging.INFO]
    assert [level for level, _ in told] == [logging.WARNING, logging.INFO]  # later waits are logged at debug level
    assert "store is unreachable (StoreError" in told[0][1]
    assert told[1][1].startswith("RegionExecutor: regionflow's store answers again after ")
    assert retry.outage_s == 0


@pytest.mark.parametrize("error", [injected_fault(), StateTransitionError("no"), psycopg2.errors.DeadlockDetected()])
def test_any_other_error_is_raised_at_once(fake_time, error):
    retry, call = retry_of(fake_time), Flaky(forever=error)
    with pytest.raises(type(error)):
        retry.call(call)
    assert call.calls == 1 and fake_time.slept == []


def locked():
    return OperationalError("BEGIN IMMEDIATE", {}, sqlite3.OperationalError("database is locked"))


def test_one_policy_a_locked_database_is_tried_a_few_times_a_lost_connection_only_with_a_bound(fake_time):
    """The store's own policy (no bound: task processes, the CLI) and the executor's (a bound) are one."""
    plain = StoreRetry(0.0, sleep=fake_time.sleep, clock=fake_time.clock)
    assert plain.call(Flaky(locked(), locked())) == "ok" and len(fake_time.slept) == 2
    with pytest.raises(StoreError):
        plain.call(Flaky(refused()))  # a lost connection fails at once, as before any retry
    assert len(fake_time.slept) == 2 and plain.outage_s == 0

    executors = retry_of(fake_time)
    stuck = Flaky(forever=locked())
    with pytest.raises(OperationalError, match="locked"):
        executors.call(stuck)  # a few tries with a short back-off, however long the outage bound is
    assert stuck.calls == executors.locked_tries and sum(fake_time.slept) < 3.5
    assert executors.call(Flaky(refused(), locked(), refused())) == "ok"


def test_a_store_call_made_inside_another_runs_once_the_outer_call_is_tried_again(fake_time):
    """As `record_commit` reads the winner with `commit_for`: tries do not multiply."""
    retry = retry_of(fake_time)
    stuck = Flaky(forever=locked())
    with pytest.raises(OperationalError, match="locked"):
        retry.call(lambda: retry.call(stuck))
    assert stuck.calls == retry.locked_tries
    inner = Flaky(refused())
    assert retry.call(lambda: retry.call(inner)) == "ok" and inner.calls == 2


def test_an_outage_past_the_bound_fails_calls_then_each_tries_once_until_one_succeeds(fake_time, caplog):
    retry = retry_of(fake_time, bound_s=5.0)
    down = Flaky(forever=refused())
    with caplog.at_level(logging.WARNING, logger="retry-test"), pytest.raises(StoreError):
        retry.call(down)
    assert sum(fake_time.slept) == pytest.approx(5.0) and max(fake_time.slept) <= 2.1
    assert down.calls == len(fake_time.slept) + 1
    assert sum("unreachable for 5 s; store calls fail" in r.getMessage() for r in caplog.records) == 1

    again = Flaky(forever=refused())  # the outage goes on: no more waiting, one try per call
    with pytest.raises(StoreError):
        retry.call(again)
    assert again.calls == 1 and sum(fake_time.slept) == pytest.approx(5.0)

    assert retry.call(Flaky()) == "ok"  # the store answers: the outage ends, the next one is waited out again
    assert retry.call(Flaky(refused())) == "ok" and sum(fake_time.slept) > 5.0


class RecordingRetry(StoreRetry):
    def __init__(self, **options):
        super().__init__(**options)
        self.calls = []

    def call(self, action, *args, **kwargs):
        self.calls.append(action.__name__)
        return super().call(action, *args, **kwargs)


def test_the_executors_store_runs_every_public_call_through_its_retry(tmp_path):
    retry = RecordingRetry()
    store = RetryingStore.from_config(f"sqlite:///{tmp_path}/store.db", retry=retry)
    assert isinstance(store, RegionflowStore)
    record = store.admit("ti", 1, dag_id="d", run_id="r", task_id="t", label="t", requests=[{"unknown": True}])
    store.record_released(record.bulk_id)
    assert [g.state.value for g in store.grants()] == ["released"]
    assert retry.calls == ["admit", "record_released", "grants"]


class FailingOnce:
    """A store whose next `record_grants` fails (the store was away past the retry's bound)."""

    def __init__(self, store):
        self.store, self.fail_next = store, False

    def __getattr__(self, name):
        return getattr(self.store, name)

    def record_grants(self, *args, **kwargs):
        if self.fail_next:
            self.fail_next = False
            raise refused()
        return self.store.record_grants(*args, **kwargs)


def test_a_grant_the_store_could_not_record_is_decided_again_at_the_next_refresh(tmp_path, caplog):
    store = FailingOnce(RegionflowStore(f"sqlite:///{tmp_path / 'store.db'}"))
    gate = AdmissionGate(SlotPool(Cluster.parse("a:slots=2;b:slots=2")), store, RecordingWorkers(),
                         copies=NoCopies(), recovery=NoRecovery(), metrics=Counts())
    first, second = admit(gate, "first", slots=4), admit(gate, "second", slots=4)
    store.fail_next = True
    end(gate, first)  # the pool grants `second` the freed slots; recording that grant fails (logged)
    assert gate.operations.handed() == ["workload:first"] and "refused" in caplog.text
    gate.refresh()
    assert gate.operations.handed() == ["workload:first", "workload:second"]
    assert {g.task_id: g.state.value for g in store.grants()} == {"first": "released", "second": "granted"}
    assert second.key in gate.granted
