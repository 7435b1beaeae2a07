"""The unit-run service's settling with a recording backend double (no Spark, no Airflow): the commit
watcher, a copy that wins, the original failing while a copy runs, and pending copies cancelled once the
shard committed. The RegionOperator is a thin Airflow wrapper around this service."""
from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest
from speculation_fakes import FakeSubmission, commits_at_once, fails, runs_until_killed

from regionflow.config import RegionflowConfig
from regionflow.operators.region import RegionTaskFailed
from regionflow.spark.data.store import PartitionStore
from regionflow.spark.data.task import UnitTask
from regionflow.store import CopyState, RegionflowStore
from regionflow.units.service import Placement, TryRef, UnitRunService
from regionflow.units.tasks import BuiltTask

RUN_KEY = "d--r1"


class FakeLog:
    def __init__(self):
        self.lines = []

    def _add(self, message, *args):
        self.lines.append(message % args if args else message)

    info = warning = error = debug = exception = _add


class FakeOpened:
    """An opened unit without a plan: the service only asks it for its task, paths, sinks and inputs."""

    def __init__(self, data_dir: str):
        self.partitions = PartitionStore(data_dir, RUN_KEY)
        self.key, self.name = "u1", "t[1]"
        self.data_dir = data_dir

    def claim_sinks(self):
        pass

    def unit_task(self, *, slots, host="", attempt_id="", excluded_nodes=None):
        task = UnitTask(job="x:y", mode="all-blocking", run_id=RUN_KEY, data_dir=self.data_dir, unit_key=self.key,
                        unit_name=self.name, regions=[1], attempt_id=attempt_id, host=host)
        return BuiltTask(task, SimpleNamespace(values={}, reason=""))

    def task_path(self, attempt_id):
        return f"{self.data_dir}/{attempt_id}.json"

    def py_files(self, task):
        return []

    def release_inputs(self):
        return 0, 0


class RecordingBackend:
    """The attempt backend double: records each (task, host) and plays `behaviour(task)`."""

    name = "recording"

    def __init__(self, behaviour):
        self.behaviour, self.made = behaviour, []

    def prepare(self, task, task_path, host, slots, on_line):
        self.made.append((task, host.name))
        return FakeSubmission(self.behaviour(task))


@pytest.fixture
def env(tmp_path):
    config = RegionflowConfig.from_values(lambda name: {
        "hosts": "a:slots=2;b:slots=2", "store_url": f"sqlite:///{tmp_path}/regionflow.db",
        "data_dir": str(tmp_path / "data"), "backend": "submit"}.get(name, ""), airflow_home=str(tmp_path))
    return SimpleNamespace(config=config, opened=FakeOpened(str(tmp_path / "data")), log=FakeLog(),
                           store=RegionflowStore(f"sqlite:///{tmp_path}/regionflow.db"))


def run(env, behaviour):
    backend = RecordingBackend(behaviour)
    service = UnitRunService(env.config, env.store, env.log, backend=backend)
    ref = TryRef("d", "r1", "t", 1, "ti-1", 1)
    result = service.run(env.opened, ref, "try1-aa", placement=Placement(None, env.config.cluster.host("a"), 1),
                         watch_interval=0.02)
    return result.to_dict(), backend.made


def copy_commits_after(env, seconds, attempt="spec1-cc", host="b", request=None):
    def go():
        if request is not None:
            env.store.mark_copy(request, "granted", host=host)
            env.store.mark_copy(request, "running", attempt_id=attempt)
        commits_at_once(env.opened.partitions, "u1", attempt, host)(None)
        if request is not None:
            env.store.mark_copy(request, "won")
    threading.Timer(seconds, go).start()


def ask_copy(env):
    return env.store.request_copy(dag_id="d", run_id="r1", task_id="t", map_index=1, unit_key="u1", label="t[1]",
                                  requests=[{"cpu": 1.0}], template_path="/nowhere").request_id


def test_the_original_is_killed_and_succeeds_when_its_copy_commits_first(env):
    copy_commits_after(env, 0.1)
    result, made = run(env, lambda task: runs_until_killed(timeout=10))
    assert result["winner"] == "spec1-cc" and result["winner_host"] == "b" and result["attempt"] != "spec1-cc"
    [original] = env.store.attempts("d", "r1", "t")
    assert original.state == "lost_commit" and original.host == "a"
    assert env.store.commit_for("d", "r1", "u1").winner_attempt == "spec1-cc"
    assert any("attempt spec1-cc on host b committed first and wins" in line and "cancelled" in line
               for line in env.log.lines)


def test_the_original_failing_waits_for_the_running_copy(env):
    request = ask_copy(env)
    copy_commits_after(env, 0.3, request=request)
    result, _ = run(env, lambda task: fails())
    assert result["winner"] == "spec1-cc"
    [original] = env.store.attempts("d", "r1", "t")
    assert original.state == "failed"
    assert any("waiting for speculative copy" in line for line in env.log.lines)


def test_the_original_failing_without_a_copy_fails_the_task(env):
    with pytest.raises(RegionTaskFailed, match="boom in vertex x"):
        run(env, lambda task: fails())
    [original] = env.store.attempts("d", "r1", "t")
    assert original.state == "failed"
    assert env.store.commit_for("d", "r1", "u1") is None


def test_the_original_committing_first_cancels_pending_copies(env):
    request = ask_copy(env)
    result, made = run(env, lambda task: commits_at_once(env.opened.partitions, "u1", task.attempt_id, "a"))
    assert result["winner"] == result["attempt"] and made[0][1] == "a"
    assert env.store.copy_request(request).state is CopyState.CANCELLED
    [original] = env.store.attempts("d", "r1", "t")
    assert original.state == "succeeded" and not original.speculative
