"""RegionExecutor in-process: a scheduler that stops and the one that takes over (Airflow's
``adopt_or_reset_orphaned_tasks`` and ``try_adopt_task_instances``), and Airflow revoking a try that
stayed queued. No stack: LocalExecutor's workers are a list we read, as in test_executor.py."""
import time
from types import SimpleNamespace

from airflow.utils.state import TaskInstanceState
from executor_doubles import RecordingStopper, executor, queue, started, workload

from regionflow.executors.region_executor import GRANTED_CHECK_INTERVAL_S, UNHEARD_END_GRACE_S
from regionflow.store import GrantState, RegionflowStore

RUNNING, QUEUED = TaskInstanceState.RUNNING, TaskInstanceState.QUEUED


def ti_of(w, state):
    """What Airflow hands try_adopt_task_instances: the task instance row of the stopped scheduler."""
    return SimpleNamespace(id=w.ti.id, try_number=w.ti.try_number, state=state, key=w.key)


def rows(settings):
    return {g.task_id: g for g in RegionflowStore.from_config(f"sqlite:///{settings}/regionflow.db").grants()}


def test_a_running_try_of_a_stopped_scheduler_is_adopted_and_a_queued_one_is_reset(settings):
    first = executor()
    first.recovery.start()
    running, waiting = workload(slots=3, task_id="running"), workload(slots=2, task_id="waiting")
    queue(first, running, waiting)
    assert [w.ti.task_id for w in first.task_workers] == ["running"]
    # The first scheduler is killed. Airflow's scheduler_health_check_threshold has not passed yet when
    # the second one starts, so the first one's rows are still its own...
    states = {str(running.ti.id): (RUNNING, 1)}  # Airflow's metadata, as the test sets it
    second = executor(task_states=lambda ids: {i: states[i] for i in ids if i in states})
    second.recovery.start()
    second.gate.refresh()
    assert second.pool.free_slots() == 1 and rows(settings)["running"].owner == first.recovery.scheduler_id
    # ...until Airflow hands the orphaned task instances over: the running one is adopted (nothing
    # restarts), the queued one is returned for Airflow to reset, its place in the queue released.
    to_reset = second.try_adopt_task_instances([ti_of(running, RUNNING), ti_of(waiting, QUEUED)])
    assert [ti.key for ti in to_reset] == [waiting.key]
    assert rows(settings)["running"].owner == second.recovery.scheduler_id
    assert rows(settings)["waiting"].state is GrantState.RELEASED
    assert second.recovery.adopted == {rows(settings)["running"].bulk_id: str(running.ti.id)}
    # The adopted try ends (Airflow's metadata says so): its slots go back.
    states[str(running.ti.id)] = (TaskInstanceState.SUCCESS, 1)
    second.recovery.release_ended(second.gate.release)
    assert second.pool.free_slots() == 4 and rows(settings)["running"].state is GrantState.RELEASED


def test_the_rows_of_a_scheduler_past_the_health_check_threshold_are_taken_over(settings):
    first = executor()
    first.recovery.start()
    running, waiting = workload(slots=3, task_id="running"), workload(slots=2, task_id="waiting")
    queue(first, running, waiting)
    second = executor(wall_clock=lambda: time.time() + 31)  # no heartbeat for longer than 30 s
    second.recovery.start()
    assert rows(settings)["waiting"].state is GrantState.RELEASED  # Airflow queues that task instance again
    assert rows(settings)["running"].owner == second.recovery.scheduler_id
    newcomer = workload(slots=1, task_id="newcomer")
    queue(second, newcomer)
    assert [w.ti.task_id for w in second.task_workers] == ["newcomer"]  # the 4th slot; 3 stay adopted


def test_a_clean_stop_releases_the_waiting_rows_at_once(settings):
    first = executor()
    first.recovery.start()
    queue(first, workload(slots=4, task_id="running"), workload(slots=2, task_id="waiting"))
    first.end = lambda: None  # LocalExecutor's own end needs real workers
    first.gate.leave_waiting()
    first.recovery.end()
    assert rows(settings)["waiting"].state is GrantState.RELEASED
    assert rows(settings)["running"].state is GrantState.GRANTED  # until a successor sees its task end


def test_a_try_just_handed_to_the_workers_is_not_revoked(settings, monkeypatch):
    # Airflow's stuck-in-queued check can come right after a long wait for slots ended: the worker is
    # starting the try then, and the workload cannot be taken back from LocalExecutor's queue
    monkeypatch.setenv("AIRFLOW__SCHEDULER__TASK_QUEUED_TIMEOUT", "600")
    now = [0.0]
    ex = executor(clock=lambda: now[0])
    starting, behind = workload(slots=4, task_id="starting"), workload(slots=4, task_id="behind")
    queue(ex, starting, behind)
    now[0] += 299.0  # handed to the workers less than half the timeout ago
    ex.revoke_task(ti=starting.ti)  # nothing raised: Airflow's pass goes on to the tries behind it
    assert starting.key in ex.running and rows(settings)["starting"].state is GrantState.GRANTED
    assert [w.ti.task_id for w in ex.task_workers] == ["starting"] and ex.pool.free_slots() == 0
    assert ex.cleanup_stuck_queued_tasks([starting.ti]) == []


def test_a_try_airflow_revokes_after_it_got_its_slots_gives_them_back(settings, monkeypatch):
    monkeypatch.setenv("AIRFLOW__SCHEDULER__TASK_QUEUED_TIMEOUT", "600")
    now = [0.0]
    ex = executor(clock=lambda: now[0])
    stuck, behind = workload(slots=4, task_id="stuck"), workload(slots=4, task_id="behind")
    queue(ex, stuck, behind)
    now[0] += 601.0  # handed to the workers longer ago than [scheduler] task_queued_timeout
    ex.revoke_task(ti=stuck.ti)  # its worker never started it; Airflow queues it again or fails it
    assert [w.ti.task_id for w in ex.task_workers] == ["stuck", "behind"]
    assert rows(settings)["stuck"].state is GrantState.RELEASED and stuck.key not in ex.running
    now[0] += 601.0
    assert ex.cleanup_stuck_queued_tasks([behind.ti]) == [repr(behind.ti)]
    assert ex.pool.free_slots() == 4


def holder_and_behind(settings, name):
    """An executor on a fake clock and task-state reader, whose try `name` holds all 4 slots (its attempt
    recorded running) and a 4-slot try `behind` waits; returns (ex, now, states, stopper, store, holder, behind)."""
    now, states, stopper = [0.0], {}, RecordingStopper()
    ex = executor(clock=lambda: now[0], task_states=lambda ids: {i: states[i] for i in ids if i in states},
                  stopper=stopper)
    holder, behind = workload(slots=4, task_id=name), workload(slots=4, task_id="behind")
    queue(ex, holder, behind)
    store = RegionflowStore.from_config(f"sqlite:///{settings}/regionflow.db")
    started(store, ex.gate.granted[holder.key], f"{name}-try1", task_id=name)
    states[str(holder.ti.id)] = (RUNNING, 1)
    return ex, now, states, stopper, store, holder, behind


def test_a_try_whose_end_no_worker_reported_gives_its_slots_back_once_airflow_shows_it_ended(settings):
    ex, now, states, stopper, store, lost, behind = holder_and_behind(settings, "lost")  # running when it died

    ex._check_granted()  # running: its slots stay
    assert [w.ti.task_id for w in ex.task_workers] == ["lost"] and lost.key in ex.running

    # its task process ended up for reschedule and its worker died before reporting it (a try done for good,
    # success or failed, goes back at once: the next test)
    states[str(lost.ti.id)] = (TaskInstanceState.UP_FOR_RESCHEDULE, 1)
    now[0] += GRANTED_CHECK_INTERVAL_S
    ex._check_granted()  # the report may still come (the grace itself: test_admission_gate.py)
    assert [w.ti.task_id for w in ex.task_workers] == ["lost"] and stopper.calls == []
    now[0] += UNHEARD_END_GRACE_S
    ex._check_granted()
    assert [w.ti.task_id for w in ex.task_workers] == ["lost", "behind"]
    assert rows(settings)["lost"].state is GrantState.RELEASED and lost.key not in ex.running
    assert stopper.calls == [("lost-try1", "a")]  # its Spark work was stopped
    assert store.attempt("lost-try1").state.value == "killed"


def test_a_try_done_in_airflows_database_frees_its_slots_before_its_worker_reports(settings):
    """As an Airflow pool does: the slots go back when the task instance is success in the database (the
    sync after it), not when the task process has exited and its worker reported (seconds later)."""
    from regionflow.core.attempts import AttemptState

    ex, now, states, stopper, store, done, behind = holder_and_behind(settings, "done")
    ex._check_granted()
    assert [w.ti.task_id for w in ex.task_workers] == ["done"]

    store.end_attempt("done-try1", AttemptState.SUCCEEDED)  # the operator records its attempt, then the try succeeds
    states[str(done.ti.id)] = (TaskInstanceState.SUCCESS, 1)
    now[0] += GRANTED_CHECK_INTERVAL_S
    ex._check_granted()
    assert [w.ti.task_id for w in ex.task_workers] == ["done", "behind"]
    assert rows(settings)["done"].state is GrantState.RELEASED and stopper.calls == []  # nothing left to stop
    ex.change_state(done.key, TaskInstanceState.SUCCESS)  # its worker's report, once the process exited
    assert rows(settings)["behind"].state is GrantState.GRANTED and ex.pool.free_slots() == 0
    assert done.key not in ex.running
