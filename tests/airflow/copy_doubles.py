"""Doubles and helpers of the speculative-copy tests of the in-process RegionExecutor
(test_executor_copies.py, test_executor_copy_takeover.py): fake Spark submissions for the copies, an
executor that runs them, and copy requests as the speculation sensor makes them. Their fixtures
(`copy_settings`, `store`, `partitions`) are in tests/airflow/conftest.py."""
from __future__ import annotations

from executor_doubles import executor
from speculation_fakes import FakeSubmission, wait_for

from regionflow.spark.data.task import UnitTask
from regionflow.spark.launch.attempt import Attempt
from regionflow.spark.launch.watch import DEFAULT_HOST_LOST_TIMEOUT_S

RUN_KEY = "d--r1"


class Submissions:
    """Stands in for the copies' Spark submissions: `attempt` is the executor's copy attempt factory
    (`Seams.attempt_factory`), whose attempts run the next fake; what each was asked is remembered."""

    def __init__(self, *behaviours, host_lost_timeout=DEFAULT_HOST_LOST_TIMEOUT_S, on_made=None):
        self.behaviours = list(behaviours)
        self.host_lost_timeout = host_lost_timeout  # a copy whose master is silent this long is killed
        self.on_made = on_made or (lambda submission: None)
        self.calls = []
        self.made = []

    def attempt(self, launch):
        """The copy's `Attempt`, with the copy request's Spark conf and modules, on a fake backend."""
        backend = _FakeBackend(self, dict(launch.request.spark_conf), list(launch.request.py_files))
        return Attempt(launch.task, launch.task_path, launch.host, launch.slots, backend, launch.partitions,
                       recorder=launch.recorder, host_lost_timeout=self.host_lost_timeout)

    def submit(self, task, host, slots, job_conf, py_files):
        self.calls.append({"task": task, "host": host.name, "slots": slots, "conf": job_conf, "py_files": py_files})
        submission = FakeSubmission(self.behaviours.pop(0))
        self.on_made(submission)
        self.made.append(submission)
        return submission


class _FakeBackend:
    name = "fake"

    def __init__(self, submissions, job_conf, py_files):
        self.submissions, self.job_conf, self.py_files = submissions, job_conf, py_files

    def prepare(self, task, task_path, host, slots, on_line):
        return self.submissions.submit(task, host, slots, self.job_conf, self.py_files)


def copies_executor(fakes, **seams):
    """An executor whose speculative copies run `fakes`' submissions."""
    return executor(attempt_factory=fakes.attempt, **seams)


def template(settings, unit_key="u1") -> str:
    task = UnitTask(job="regionflow.examples.orders:JOB", mode="all-blocking", run_id=RUN_KEY,
                    data_dir=str(settings / "data"), unit_key=unit_key, unit_name="t[1]", regions=[1], attempt_id="")
    path = str(settings / f"{unit_key}.template.json")
    return task.write(path)


def request(store, settings, *, excluded=("a",), slots=1, shard=1, unit_key="u1"):
    return store.request_copy(dag_id="d", run_id="r1", task_id="t", map_index=shard, unit_key=unit_key,
                              label="d.t[1] copy", requests=[{"cpu": 1.0}] * slots,
                              template_path=template(settings, unit_key), py_files=["/deps.zip"],
                              spark_conf={"spark.x": "1"}, excluded_hosts=excluded, slow_attempt="try1-slow")


def settle_copies(ex, store, request_id, timeout=10.0):
    assert wait_for(lambda: not store.copy_request(request_id).is_open, timeout)
    assert wait_for(lambda: (ex.sync(), not ex.copies.running)[1], timeout)
