"""RegionExecutor in-process: every way Airflow hands it the same task instance try again, and every
fault of ours or of the world around it, end in the right ledger rows and never in an exception into the
scheduler. (No stack: LocalExecutor's workers are replaced by a list we read, as in test_executor.py;
faults come from doubles of the store, the clock and the rest, given through `Seams`.)"""
import inspect
import time

from airflow.utils.state import TaskInstanceState
from executor_doubles import RecordingStats, Workers, executor, queue, workload

from regionflow.store import GrantState, RegionflowStore, StoreError

SUCCESS, FAILED, RUNNING = TaskInstanceState.SUCCESS, TaskInstanceState.FAILED, TaskInstanceState.RUNNING


def store_url(settings):
    return f"sqlite:///{settings}/regionflow.db"


def store_of(settings):
    return RegionflowStore.from_config(store_url(settings))


def admissions(settings, w):
    rows = store_of(settings).admissions(w.ti.id, w.ti.try_number)
    return [(g.bulk_id.split(":", 1)[1], g.state.value) for g in rows]


def requeue(ex, w):
    """The scheduler queues the same try again: a new workload object with the same key."""
    again = w.model_copy(deep=True)
    queue(ex, again)
    return again


def test_deferral_releases_the_slots_and_the_resumed_try_is_a_second_admission(settings):
    ex = executor()
    sensor = workload(slots=4, task_id="wait")
    other = workload(slots=1, task_id="other")
    queue(ex, sensor, other)
    assert [w.ti.task_id for w in ex.task_workers] == ["wait"]
    ex.change_state(sensor.key, SUCCESS)  # the process exits after defer(): its slots go back at once
    assert [w.ti.task_id for w in ex.task_workers] == ["wait", "other"]
    assert ex.event_buffer[sensor.key][0] == SUCCESS
    ex.event_buffer.clear()
    requeue(ex, sensor)  # the trigger fired: same key, same try number
    ex.change_state(other.key, SUCCESS)
    assert [w.ti.task_id for w in ex.task_workers] == ["wait", "other", "wait"]
    ex.change_state(sensor.key, SUCCESS)
    assert admissions(settings, sensor) == [("1", "released"), ("1/2", "released")]
    assert ex.pool.free_slots() == 4 and not ex.gate.granted and not ex.gate.held and not ex.gate.runs


def test_three_reschedule_pokes_are_three_admissions_of_one_try(settings):
    ex = executor()
    sensor = workload(slots=1, task_id="poke")
    queue(ex, sensor)
    for _ in range(2):
        ex.change_state(sensor.key, SUCCESS)  # up_for_reschedule: the worker still says "success"
        requeue(ex, sensor)
    ex.change_state(sensor.key, SUCCESS)
    assert admissions(settings, sensor) == [("1", "released"), ("1/2", "released"), ("1/3", "released")]
    assert len(ex.task_workers) == 3


def test_requeue_before_the_previous_end_is_read_reuses_the_live_grant(settings):
    ex = executor()
    sensor = workload(slots=2, task_id="poke")
    queue(ex, sensor)
    requeue(ex, sensor)  # the poke's end is still in the result queue when the next poke is queued
    assert len(ex.task_workers) == 2 and ex.gate.runs[sensor.key].unread == 2
    ex.change_state(sensor.key, SUCCESS)  # the first poke's late end: not reported, slots kept
    assert sensor.key not in ex.event_buffer and ex.pool.free_slots() == 2
    ex.change_state(sensor.key, SUCCESS)
    assert ex.event_buffer[sensor.key][0] == SUCCESS and ex.pool.free_slots() == 4
    [grant] = store_of(settings).admissions(sensor.ti.id, 1)
    assert grant.state is GrantState.RELEASED and "live grant was reused" in grant.message


def test_queued_twice_while_waiting_keeps_its_place(settings):
    ex = executor()
    first, second, third = (workload(slots=4, task_id=t) for t in ("first", "second", "third"))
    queue(ex, first, second, third)
    again = requeue(ex, second)
    ex.change_state(first.key, SUCCESS)
    assert [w.ti.task_id for w in ex.task_workers] == ["first", "second"]
    assert ex.task_workers[-1] is again  # the newest workload (fresh token) runs
    assert admissions(settings, second) == [("1", "granted")]


def test_a_new_try_is_a_new_bulk(settings):
    ex = executor()
    task = workload(slots=1, task_id="retry")
    queue(ex, task)
    ex.change_state(task.key, FAILED)
    retry = task.model_copy(deep=True)
    retry.ti.try_number = 2
    queue(ex, retry)
    ex.change_state(retry.key, SUCCESS)
    assert admissions(settings, task) == [("1", "released")]
    assert admissions(settings, retry) == [("2", "released")]


def test_a_task_marked_success_while_waiting_is_withdrawn_and_the_next_one_starts(settings):
    states = {}  # Airflow's metadata, as the test sets it
    ex = executor(task_states=lambda ids: states)
    blocker, marked, after = workload(slots=4, task_id="blocker"), workload(slots=4, task_id="marked"), \
        workload(slots=4, task_id="after")
    queue(ex, blocker, marked, after)
    states.update({str(w.ti.id): (TaskInstanceState.QUEUED, 1) for w in (marked, after)})
    states[str(blocker.ti.id)] = (TaskInstanceState.RUNNING, 1)
    states[str(marked.ti.id)] = (SUCCESS, 1)  # marked success in the UI
    ex.sync()
    assert [w.ti.task_id for w in ex.task_workers] == ["blocker"]
    ex.change_state(blocker.key, SUCCESS)
    assert [w.ti.task_id for w in ex.task_workers] == ["blocker", "after"]
    [grant] = store_of(settings).admissions(marked.ti.id, 1)
    assert grant.state is GrantState.RELEASED and "withdrawn" in grant.message and "success" in grant.message
    assert marked.key not in ex.event_buffer  # Airflow already knows; nothing to report
    assert "withdrawn" in (settings / "logs" / "dag_id=d" / "marked.log").read_text()


def test_a_cleared_waiting_try_is_withdrawn(settings):
    states = {}  # Airflow's metadata, as the test sets it
    ex = executor(task_states=lambda ids: states)
    blocker, cleared = workload(slots=4, task_id="blocker"), workload(slots=4, task_id="cleared")
    queue(ex, blocker, cleared)
    states[str(cleared.ti.id)] = (None, 2)
    ex.sync()
    assert not ex.gate.held and admissions(settings, cleared) == [("1", "released")]


def test_failed_by_the_scheduler_while_waiting_is_withdrawn(settings):
    ex = executor()
    blocker, stuck = workload(slots=4, task_id="blocker"), workload(slots=4, task_id="stuck")
    queue(ex, blocker, stuck)
    ex.fail(stuck.key)
    assert not ex.gate.held and ex.event_buffer[stuck.key][0] == FAILED
    assert admissions(settings, stuck) == [("1", "released")]


def test_a_waiting_try_keeps_its_queued_time_fresh_so_airflow_never_takes_it_for_stuck(settings, monkeypatch):
    monkeypatch.setenv("AIRFLOW__SCHEDULER__TASK_QUEUED_TIMEOUT", "9")
    written, now = [], [0.0]
    ex = executor(clock=lambda: now[0], renew_queued_time=written.extend)
    blocker, waiting = workload(slots=4, task_id="blocker"), workload(slots=4, task_id="w")
    queue(ex, blocker, waiting)
    ex._renew_queued_times()
    now[0] = 2.9
    ex._renew_queued_times()
    assert written == []  # seen waiting at 0, due at a third of the timeout
    now[0] = 3.0
    ex._renew_queued_times()
    assert written == [str(waiting.ti.id)]
    now[0] = 5.0
    ex.change_state(blocker.key, TaskInstanceState.SUCCESS)  # its slots go to the waiting try
    assert written == [str(waiting.ti.id)] * 2  # stamped when handed over: the timeout runs from there
    assert not ex.queued_stamps.stamped


def test_a_try_still_waiting_that_airflow_revokes_leaves_the_queue_and_nothing_is_raised(settings):
    # only when its queued time could not be renewed in time; Airflow queues it again
    ex = executor()
    waiting = workload(slots=4, task_id="w")
    queue(ex, workload(slots=4, task_id="blocker"), waiting)
    ex.revoke_task(ti=waiting.ti)
    assert waiting.key not in ex.gate.waiting and not ex.gate.held.get(f"{waiting.ti.id}:1")
    assert ex.pool.free_slots() == 0  # the blocker keeps its grant


class FaultyAdmissions(RegionflowStore):
    """regionflow's store, whose admissions of DAG "faulty" fail."""

    def admit(self, ti_id, try_number, **fields):
        if fields["dag_id"] == "faulty":
            raise StoreError("injected fault")
        return super().admit(ti_id, try_number, **fields)


class ReleaseOnceDown(RegionflowStore):
    """regionflow's store, down for the first release recorded after `down` is set."""

    down = False

    def record_released(self, bulk_id, message=None):
        if self.down:
            self.down = False
            raise StoreError("down")
        return super().record_released(bulk_id, message)


class BrokenStore(RegionflowStore):
    """regionflow's store, every call of which fails once `broken` is set (its database is gone)."""

    broken = False


def _fails_when_broken(method):
    def call(self, *args, **kwargs):
        if self.broken:
            raise RuntimeError("boom: the store is gone")
        return method(self, *args, **kwargs)
    return call


for _name, _method in inspect.getmembers(RegionflowStore, inspect.isfunction):
    if not _name.startswith("_"):
        setattr(BrokenStore, _name, _fails_when_broken(_method))


class Broken:
    """A switch for the doubles below: off while the executor is built and fed, on for the test."""

    on = False

    def check(self, what):
        if self.on:
            raise RuntimeError(f"boom: {what}")


def test_a_store_fault_fails_that_task_only_and_the_executor_goes_on(settings):
    ex = executor(store=FaultyAdmissions(store_url(settings)))
    bad, good = workload(slots=1, dag_id="faulty", task_id="bad"), workload(slots=1, task_id="good")
    queue(ex, bad, good)  # must not raise
    assert [w.ti.task_id for w in ex.task_workers] == ["good"]
    state, info = ex.event_buffer[bad.key]
    assert state == FAILED and "injected fault" in info
    assert "injected fault" in (settings / "logs" / "dag_id=faulty" / "bad.log").read_text()


def test_a_fault_when_recording_the_release_frees_the_slots_at_the_next_sync(settings):
    store = ReleaseOnceDown(store_url(settings))
    ex = executor(store=store)
    first, second = workload(slots=4, task_id="first"), workload(slots=4, task_id="second")
    queue(ex, first, second)
    store.down = True
    ex.change_state(first.key, SUCCESS)  # must not raise
    assert ex.event_buffer[first.key][0] == SUCCESS
    # The store is the truth: until it records the release, the slots stay taken there.
    assert [w.ti.task_id for w in ex.task_workers] == ["first"]
    assert admissions(settings, first) == [("1", "granted")]
    ex.gate.refresh()  # the next sync records the release again, and the pool grants from the store
    assert [w.ti.task_id for w in ex.task_workers] == ["first", "second"]
    assert admissions(settings, first) == [("1", "released")]
    assert admissions(settings, second) == [("1", "granted")]


def test_no_entry_point_raises_into_the_scheduler(settings, logs):
    # everything the executor meets outside its memory fails: clock, store, Airflow's database, workers, metrics
    broken, store = Broken(), BrokenStore(store_url(settings))

    def clock():
        broken.check("clock")
        return time.monotonic()

    def task_states(ids):
        broken.check("Airflow's database")
        return {}

    class BrokenWorkers(Workers):
        def read_results(self):
            broken.check("workers")

    class BrokenStats(RecordingStats):
        def gauge(self, name, value, **tags):
            broken.check("metrics")

    ex = executor(clock=clock, store=store, task_states=task_states, workers=BrokenWorkers(), stats=BrokenStats())
    queue(ex, workload(slots=4, task_id="hog"), workload(slots=4, task_id="waiting"))
    broken.on = store.broken = True
    ex.sync()
    ex.heartbeat()
    failed = {entry["event"].split(" while ", 1)[1].split(";")[0] for entry in logs
              if "unexpected error while" in entry["event"]}
    assert {"reading the workers' results", "mirroring the blocklist", "taking copy requests",
            "polling the slot pool", "noticing starving jobs", "heartbeat and taking over stopped schedulers",
            "reading the shared slot pool", "starting an elastic region with fewer slots",
            "checking waiting task instances",
            "renewing the queued time of waiting task instances", "checking granted task instances",
            "reporting the pool's metrics"} <= failed, failed
    plain = workload(task_id="plain")
    queue(ex, plain)
    assert ex.event_buffer[plain.key][0] == FAILED and "boom" in ex.event_buffer[plain.key][1]


def test_a_restored_grant_serves_the_try_when_the_new_scheduler_queues_it_again(settings):
    ex = executor()
    task = workload(slots=3, task_id="long")
    queue(ex, task)
    restarted = executor()
    restarted.recovery.start()  # the first executor never registered: its rows are taken over at once
    restarted.gate.refresh()
    queue(restarted, task.model_copy(deep=True))
    assert len(restarted.task_workers) == 1 and restarted.pool.free_slots() == 1
    restarted.change_state(task.key, SUCCESS)
    assert restarted.pool.free_slots() == 4
    [grant] = store_of(settings).admissions(task.ti.id, 1)
    assert grant.state is GrantState.RELEASED and "restored grant was reused" in grant.message
