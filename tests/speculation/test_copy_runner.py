"""`CopyRunner` on its own (no Airflow, no Spark): a copy request becomes a bulk in a real SlotPool, the
granted copy is built by the injected attempt factory on a host it may use, and its end, posted from
its thread as a typed event, releases the slots on the caller's thread."""
from __future__ import annotations

import logging
import time
from types import SimpleNamespace

from regionflow.config import RegionflowConfig
from regionflow.core.attempts import AttemptState
from regionflow.executors.copies import CopyRunner
from regionflow.scheduling.pool import SlotPool
from regionflow.spark.data.task import UnitTask
from regionflow.store import CopyState, RegionflowStore


class Recorder:
    """Records what the runner asks of its owner (grants to start, bulks to release) and of the factory."""

    def __init__(self, pool, attempt):
        self.pool, self.attempt = pool, attempt
        self.runner = None
        self.launches, self.released = [], []

    def start(self, grants):
        for grant in grants:
            if self.runner.owns(grant.bulk_id):
                self.runner.launch(grant)

    def release(self, bulk_id):
        self.released.append(bulk_id)
        self.pool.release(bulk_id)

    def factory(self, launch):
        self.launches.append(launch)
        if isinstance(self.attempt, Exception):
            raise self.attempt
        return SimpleNamespace(run=lambda: SimpleNamespace(state=self.attempt, winner=None, failure="lost",
                                                           winner_attempt=None, winner_host=None))


def runner_for(tmp_path, attempt):
    config = RegionflowConfig.from_values(
        lambda name: {"hosts": "a:slots=1;b:slots=1", "data_dir": str(tmp_path / "data")}.get(name, ""),
        airflow_home=str(tmp_path))
    pool = SlotPool(config.cluster)
    store = RegionflowStore(f"sqlite:///{tmp_path / 'store.db'}")
    owner = Recorder(pool, attempt)
    owner.runner = CopyRunner(pool, store, config, logging.getLogger("test"), start=owner.start,
                              release=owner.release, attempt_factory=owner.factory)
    template = UnitTask(job="regionflow.examples.orders:JOB", mode="all-blocking", run_id="d--r1",
                        data_dir=str(tmp_path / "data"), unit_key="u1", unit_name="t[1]", regions=[1], attempt_id="")
    request = store.request_copy(dag_id="d", run_id="r1", task_id="t", map_index=1, unit_key="u1", label="d.t[1] copy",
                                 requests=[{"cpu": 1.0}], template_path=template.write(str(tmp_path / "u1.json")),
                                 py_files=[], spark_conf={}, excluded_hosts=("a",), slow_attempt="try1-slow")
    return owner, store, pool, request


def settle(owner, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not owner.released:
        owner.runner.finish_ended()
        assert time.monotonic() < deadline, "the copy's end never came back"
        time.sleep(0.05)


def test_the_factory_builds_the_copy_on_an_allowed_host_and_its_end_frees_the_slots(tmp_path):
    owner, store, pool, request = runner_for(tmp_path, AttemptState.SUCCEEDED)
    owner.runner.take_requests()
    settle(owner)
    (launch,) = owner.launches
    assert launch.host.name == "b" and launch.slots == 1  # a is excluded: the slow original's host
    assert launch.task.attempt_id.startswith("spec1-") and launch.task.host == "b"
    assert launch.recorder is not None and launch.request.request_id == request.request_id
    assert store.copy_request(request.request_id).state is CopyState.WON
    assert owner.released == [request.bulk_id] and pool.free_slots() == 2
    assert not pool.blocklist.hosts_for(f"{request.job_id}#{request.bulk_id}")  # its exclusions are lifted
    assert not owner.runner.running and not owner.runner.waiting


def test_a_factory_that_raises_fails_the_copy_only_and_the_slots_come_back(tmp_path):
    owner, store, pool, request = runner_for(tmp_path, RuntimeError("no backend"))
    owner.runner.take_requests()
    settle(owner)
    done = store.copy_request(request.request_id)
    assert done.state is CopyState.FAILED and "RuntimeError: no backend" in done.message
    assert pool.free_slots() == 2


def test_a_copy_whose_attempt_lost_its_host_is_failed_with_the_reason(tmp_path):
    owner, store, pool, request = runner_for(tmp_path, AttemptState.FAILED)
    owner.runner.take_requests()
    settle(owner)
    done = store.copy_request(request.request_id)
    assert done.state is CopyState.FAILED and done.message == "lost"
