"""RegionExecutor in-process: the FIFO bulk pool in front of LocalExecutor's workers (no stack). Every
executor here is built by its composition root with doubles of what it meets outside its memory
(`regionflow.executors.composition.Seams`): the workers are a list we read, and a test gives the clock,
Airflow's database, the store, Spark or the metrics it needs instead of patching the executor."""
import time

from airflow.utils.state import TaskInstanceState
from executor_doubles import RecordingStats, executor, queue, workload

from regionflow.store import RegionflowStore


def test_whole_bulks_only_oldest_first_and_tokens_reminted(settings):
    ex = executor()
    small = workload(slots=3, task_id="three")
    big = workload(slots=4, task_id="four")
    one = workload(task_id="plain")  # not a region task: one slot
    queue(ex, small, big, one)
    assert [w.ti.task_id for w in ex.task_workers] == ["three"]  # big waits; plain may not jump it
    assert ex.task_workers[0].token != "old"
    assert not ex.queued_tasks and set(ex.gate.held) == {big.ti.id.__str__() + ":1", one.ti.id.__str__() + ":1"}
    ex.change_state(small.key, TaskInstanceState.SUCCESS)
    assert [w.ti.task_id for w in ex.task_workers] == ["three", "four"]
    ex.change_state(big.key, TaskInstanceState.FAILED)
    assert [w.ti.task_id for w in ex.task_workers] == ["three", "four", "plain"]
    store = RegionflowStore.from_config(f"sqlite:///{settings}/regionflow.db")
    states = {g.task_id: g.state for g in store.grants(dag_id="d")}
    assert states == {"three": "released", "four": "released", "plain": "granted"}


def test_running_state_does_not_free_slots(settings):
    ex = executor()
    first, second = workload(slots=4, task_id="a"), workload(slots=4, task_id="b")
    queue(ex, first, second)
    ex.change_state(first.key, TaskInstanceState.RUNNING)
    assert [w.ti.task_id for w in ex.task_workers] == ["a"]


def test_unfulfillable_bulk_fails_at_once_with_the_message_in_the_task_log(settings):
    ex = executor()
    too_big = workload(slots=5, task_id="huge")
    queue(ex, too_big)
    assert not ex.task_workers and not ex.gate.held
    state, info = ex.event_buffer[too_big.key]
    assert state == TaskInstanceState.FAILED and "needs 5 slots" in info and "4 slots" in info
    log = (settings / "logs" / "dag_id=d" / "huge.log").read_text()
    assert "can never get its slots" in log and "needs 5 slots" in log


def test_restart_rebuilds_the_ledger_so_no_slot_is_granted_twice(settings):
    ex = executor()
    ex.recovery.start()
    running = workload(slots=3, task_id="long")
    queue(ex, running)
    assert len(ex.task_workers) == 1
    # the scheduler dies (no more heartbeats); a new one starts with a new executor on the same store
    states = {str(running.ti.id): (TaskInstanceState.RUNNING, 1)}  # Airflow's metadata, as the test sets it
    restarted = executor(task_states=lambda ids: {i: states[i] for i in ids if i in states},
                         wall_clock=lambda: time.time() + 31)  # past scheduler_health_check_threshold (30 s)
    restarted.recovery.start()
    restarted.gate.refresh()
    assert restarted.pool.free_slots() == 1
    assert set(restarted.recovery.adopted) == {f"{running.ti.id}:1"}
    newcomer = workload(slots=2, task_id="next")
    queue(restarted, newcomer)
    assert not restarted.task_workers  # the old grant still holds 3 of the 4 slots
    states[str(running.ti.id)] = (TaskInstanceState.SUCCESS, 1)
    restarted.recovery.release_ended(restarted.gate.release)
    assert [w.ti.task_id for w in restarted.task_workers] == ["next"]


def test_a_task_from_another_contract_version_fails_with_the_fix_and_others_go_on(settings):
    ex = executor()
    future = workload(slots=1, task_id="future")
    future.ti.executor_config["regionflow"]["version"] = 99
    fine = workload(slots=1, task_id="fine")
    queue(ex, future, fine)  # no exception reaches the scheduler loop
    assert [w.ti.task_id for w in ex.task_workers] == ["fine"]
    state, info = ex.event_buffer[future.key]
    assert state == TaskInstanceState.FAILED
    assert "task d.future was serialized by a regionflow whose task contract is version 99" in info
    assert "airflow dags reserialize" in info and "unexpected" not in info
    assert "contract is version 99" in (settings / "logs" / "dag_id=d" / "future.log").read_text()


def test_a_starving_run_is_told_once_per_change_of_what_it_waits_for(settings, monkeypatch, logs):
    monkeypatch.setenv("AIRFLOW__REGIONFLOW__RESOURCE_WAIT_TIMEOUT", "5")
    now, stats = [1000.0], RecordingStats()
    ex = executor(clock=lambda: now[0], stats=stats)
    holder, waiter = workload(slots=4, task_id="holder", run_id="r0"), workload(slots=3, task_id="waiter")
    queue(ex, holder, waiter)

    def warnings():
        return [entry["event"] for entry in logs if "not enough resources" in entry["event"]]

    ex.notices.tell()
    assert warnings() == []  # within the grace period
    now[0] += 6
    ex.notices.tell()
    ex.notices.tell()
    assert len(warnings()) == 1 and "job 'd/r1' has waited 6 s for 3 slots of unknown" in warnings()[0], warnings()
    log = (settings / "logs" / "dag_id=d" / "waiter.log").read_text()
    assert "not enough resources" in log and '"level": "warning"' in log
    second = workload(slots=1, task_id="second")  # the run now waits for more: told again
    queue(ex, second)
    stats.sent.clear()
    ex.notices.tell()
    assert len(warnings()) == 2 and "for 4 slots of unknown" in warnings()[1], warnings()
    assert stats.sent == [("regionflow.pool.starving_runs", 1), ("regionflow.pool.resource_notices", 1)]
    ex.notices.tell()  # told already: counted in the gauge, not as a new notice
    assert stats.sent[-1] == ("regionflow.pool.starving_runs", 1) and len(stats.sent) == 3
