"""A recording backend double and an `Attempt` on it (test_attempt.py, and the child process of its
orphan test, which imports them)."""
from __future__ import annotations

from speculation_fakes import FakeSubmission

from regionflow.scheduling.hosts import Cluster
from regionflow.spark.data.task import UnitTask
from regionflow.spark.launch.attempt import Attempt, HostLost


class RecordingBackend:
    """A backend double: hands out `FakeSubmission`s playing `behaviour`, remembers every call."""

    name = "recording"

    def __init__(self, behaviour=None, *, down: str | None = None, master: str | None = None,
                 server_url: str | None = None):
        self.behaviour = behaviour
        self.down = down
        self.master = master
        self.server_url = server_url
        self.prepared: list[tuple[str, str, int]] = []
        self.made: list[FakeSubmission] = []

    def prepare(self, task, task_path, host, slots, on_line):
        self.prepared.append((task.attempt_id, host.name, slots))
        if self.down:
            raise HostLost(self.down)
        submission = FakeSubmission(self.behaviour, master=self.master, server_url=self.server_url)
        self.made.append(submission)
        return submission


def make(partitions, backend, attempt_id="try1-aa", recorder=None, **options) -> Attempt:
    task = UnitTask(job="j:JOB", mode="all-blocking", run_id="run1", data_dir=partitions.data_dir, unit_key="u0",
                    unit_name="v[0]", regions=[0], attempt_id=attempt_id, host="a")
    host = Cluster.parse("a:slots=2").host("a")
    return Attempt(task, "/nonexistent/task.json", host, 2, backend, partitions, recorder=recorder,
                   watch_interval=0.02, **options)
