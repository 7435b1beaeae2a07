"""Fakes shared by the speculation tests: a Spark submission that runs a Python behaviour instead."""
from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from regionflow.spark.data.store import PartitionStore


@dataclass
class FakeResult:
    returncode: int | None = 0
    killed: bool = False
    error: str | None = None
    log_tail: tuple = ()
    host_lost: bool = False

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.killed and self.error is None

    def describe(self) -> str:
        if self.ok:
            return "succeeded"
        return "killed after 0.1 s" if self.killed else f"failed with exit code {self.returncode}"


@dataclass
class FakeSubmission:
    """`behaviour(submission)` plays the application; it should watch `killed` to end early."""

    behaviour: Callable[[FakeSubmission], FakeResult]
    master: str | None = None  # a spark:// URL makes the attempt's HostWatcher watch it
    server_url: str | None = None  # so does an sc:// URL (a Spark Connect server)
    killed: threading.Event = field(default_factory=threading.Event)
    ran: threading.Event = field(default_factory=threading.Event)
    master_gone: threading.Event = field(default_factory=threading.Event)  # the host watch said its master went

    def run(self) -> FakeResult:
        self.ran.set()
        return self.behaviour(self)

    def kill(self, *, wait: bool = True, timeout: float = 60.0) -> None:
        self.killed.set()

    def master_lost(self) -> None:
        self.master_gone.set()


def commit(partitions: PartitionStore, unit_key: str, attempt_id: str, host: str) -> None:
    folder = partitions.attempt_dir(unit_key, attempt_id)
    with open(f"{folder}/part-0", "w") as handle:
        handle.write(attempt_id)
    partitions.commit(unit_key, attempt_id, {"host": host, "sinks": {}})


def commits_at_once(partitions: PartitionStore, unit_key: str, attempt_id: str, host: str):
    def behaviour(submission: FakeSubmission) -> FakeResult:
        commit(partitions, unit_key, attempt_id, host)
        return FakeResult()
    return behaviour


def runs_until_killed(timeout: float = 10.0, then: Callable[[], None] | None = None):
    def behaviour(submission: FakeSubmission) -> FakeResult:
        if submission.killed.wait(timeout):
            return FakeResult(returncode=None, killed=True)
        if then is not None:
            then()
        return FakeResult()
    return behaviour


def fails(after: float = 0.0):
    def behaviour(submission: FakeSubmission) -> FakeResult:
        time.sleep(after)
        return FakeResult(returncode=1, log_tail=("regionflow: error: boom in vertex x",))
    return behaviour


def wait_for(predicate: Callable[[], bool], timeout: float = 10.0, step: float = 0.02) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return predicate()
