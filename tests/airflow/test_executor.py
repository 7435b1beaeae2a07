"""RegionExecutor in-process: the FIFO bulk pool in front of LocalExecutor's workers (no stack;
the workers are replaced by a queue we read)."""
import multiprocessing
import time
import uuid

import pytest
from airflow.executors.workloads import ExecuteTask
from airflow.executors.workloads.base import BundleInfo
from airflow.executors.workloads.task import TaskInstanceDTO
from airflow.utils.state import TaskInstanceState

from regionflow.executors import RegionExecutor
from regionflow.store import RegionflowStore


@pytest.fixture
def settings(tmp_path, monkeypatch):
    monkeypatch.setenv("AIRFLOW__REGIONFLOW__HOSTS", "a:slots=2;b:slots=2")
    monkeypatch.setenv("AIRFLOW__REGIONFLOW__STORE_URL", f"sqlite:///{tmp_path}/regionflow.db")
    monkeypatch.setenv("AIRFLOW__LOGGING__BASE_LOG_FOLDER", str(tmp_path / "logs"))
    return tmp_path


class Workers(list):
    """Stands in for LocalExecutor's activity queue: what was handed to the workers."""

    def put(self, workload):
        self.append(workload)


def executor(monkeypatch):
    ex = RegionExecutor(parallelism=8)
    ex.activity_queue = Workers()
    ex._unread_messages = multiprocessing.Value("I", 0)
    monkeypatch.setattr(ex, "_check_workers", lambda: None)
    return ex


def workload(slots=None, dag_id="d", run_id="r1", task_id="t", map_index=-1):
    config = {"regionflow": {"requests": [[{"unknown": True}] * slots], "labels": [task_id]}} if slots else None
    ti = TaskInstanceDTO(id=uuid.uuid4(), task_id=task_id, dag_id=dag_id, run_id=run_id, try_number=1,
                         dag_version_id=uuid.uuid4(), map_index=map_index, pool_slots=1, priority_weight=1,
                         executor_config=config)
    return ExecuteTask(ti=ti, dag_rel_path="d.py", token="old", log_path=f"dag_id={dag_id}/{task_id}.log",
                       bundle_info=BundleInfo(name="dags-folder"))


def queue(ex, *workloads):
    for w in workloads:
        ex.queued_tasks[w.key] = w
    ex._process_workloads(list(workloads))


def test_whole_bulks_only_oldest_first_and_tokens_reminted(settings, monkeypatch):
    ex = executor(monkeypatch)
    small = workload(slots=3, task_id="three")
    big = workload(slots=4, task_id="four")
    one = workload(task_id="plain")  # not a region task: one slot
    queue(ex, small, big, one)
    assert [w.ti.task_id for w in ex.activity_queue] == ["three"]  # big waits; plain may not jump it
    assert ex.activity_queue[0].token != "old"
    assert not ex.queued_tasks and set(ex.gate.held) == {big.ti.id.__str__() + ":1", one.ti.id.__str__() + ":1"}
    ex.change_state(small.key, TaskInstanceState.SUCCESS)
    assert [w.ti.task_id for w in ex.activity_queue] == ["three", "four"]
    ex.change_state(big.key, TaskInstanceState.FAILED)
    assert [w.ti.task_id for w in ex.activity_queue] == ["three", "four", "plain"]
    store = RegionflowStore.from_config(f"sqlite:///{settings}/regionflow.db")
    states = {g.task_id: g.state for g in store.grants(dag_id="d")}
    assert states == {"three": "released", "four": "released", "plain": "granted"}


def test_running_state_does_not_free_slots(settings, monkeypatch):
    ex = executor(monkeypatch)
    first, second = workload(slots=4, task_id="a"), workload(slots=4, task_id="b")
    queue(ex, first, second)
    ex.change_state(first.key, TaskInstanceState.RUNNING)
    assert [w.ti.task_id for w in ex.activity_queue] == ["a"]


def test_unfulfillable_bulk_fails_at_once_with_the_message_in_the_task_log(settings, monkeypatch):
    ex = executor(monkeypatch)
    too_big = workload(slots=5, task_id="huge")
    queue(ex, too_big)
    assert not ex.activity_queue and not ex.gate.held
    state, info = ex.event_buffer[too_big.key]
    assert state == TaskInstanceState.FAILED and "needs 5 slots" in info and "4 slots" in info
    log = (settings / "logs" / "dag_id=d" / "huge.log").read_text()
    assert "can never get its slots" in log and "needs 5 slots" in log


def test_restart_rebuilds_the_ledger_so_no_slot_is_granted_twice(settings, monkeypatch):
    ex = executor(monkeypatch)
    ex.recovery.start()
    running = workload(slots=3, task_id="long")
    queue(ex, running)
    assert len(ex.activity_queue) == 1
    # the scheduler dies (no more heartbeats); a new one starts with a new executor on the same store
    restarted = executor(monkeypatch)
    finished = {"value": False}
    restarted.recovery.finished = lambda ti_id: finished["value"]  # Airflow's metadata, as the test sets it
    restarted.recovery.clock = lambda: time.time() + 31  # past scheduler_health_check_threshold (30 s)
    restarted.recovery.start()
    restarted.gate.refresh()
    assert restarted.pool.free_slots() == 1
    assert set(restarted.recovery.adopted) == {f"{running.ti.id}:1"}
    newcomer = workload(slots=2, task_id="next")
    queue(restarted, newcomer)
    assert not restarted.activity_queue  # the old grant still holds 3 of the 4 slots
    finished["value"] = True
    restarted.recovery.release_ended(restarted._release)
    assert [w.ti.task_id for w in restarted.activity_queue] == ["next"]


def test_a_task_from_another_contract_version_fails_with_the_fix_and_others_go_on(settings, monkeypatch):
    ex = executor(monkeypatch)
    future = workload(slots=1, task_id="future")
    future.ti.executor_config["regionflow"]["version"] = 99
    fine = workload(slots=1, task_id="fine")
    queue(ex, future, fine)  # no exception reaches the scheduler loop
    assert [w.ti.task_id for w in ex.activity_queue] == ["fine"]
    state, info = ex.event_buffer[future.key]
    assert state == TaskInstanceState.FAILED
    assert "task d.future was serialized by a regionflow whose task contract is version 99" in info
    assert "airflow dags reserialize" in info and "unexpected" not in info
    assert "contract is version 99" in (settings / "logs" / "dag_id=d" / "future.log").read_text()


def test_a_starving_run_is_told_once_per_change_of_what_it_waits_for(settings, monkeypatch):
    monkeypatch.setenv("AIRFLOW__REGIONFLOW__RESOURCE_WAIT_TIMEOUT", "5")
    ex = executor(monkeypatch)
    now = [1000.0]
    monkeypatch.setattr(ex.pool, "_clock", lambda: now[0])
    holder, waiter = workload(slots=4, task_id="holder", run_id="r0"), workload(slots=3, task_id="waiter")
    queue(ex, holder, waiter)
    warnings = []
    monkeypatch.setattr(ex.log, "warning", lambda fmt, *args: warnings.append(fmt % args))
    ex._notice_starving_jobs()
    assert warnings == []  # within the grace period
    now[0] += 6
    ex._notice_starving_jobs()
    ex._notice_starving_jobs()
    assert len(warnings) == 1 and "job 'd/r1' has waited 6 s for 3 slots of unknown" in warnings[0], warnings
    log = (settings / "logs" / "dag_id=d" / "waiter.log").read_text()
    assert "not enough resources" in log and '"level": "warning"' in log
    second = workload(slots=1, task_id="second")  # the run now waits for more: told again
    queue(ex, second)
    sent = []
    monkeypatch.setattr(ex.metrics, "stats", type("Stats", (), {
        "gauge": lambda self, name, value, **kw: sent.append((name, value)),
        "incr": lambda self, name, count=1, **kw: sent.append((name, count))})())
    ex._notice_starving_jobs()
    assert len(warnings) == 2 and "for 4 slots of unknown" in warnings[1], warnings
    assert sent == [("regionflow.pool.starving_runs", 1), ("regionflow.pool.resource_notices", 1)]
    ex._notice_starving_jobs()  # told already: counted in the gauge, not as a new notice
    assert sent[-1] == ("regionflow.pool.starving_runs", 1) and len(sent) == 3
