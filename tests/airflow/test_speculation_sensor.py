"""SpeculationSensor.poke against a real SQLite store with recorded attempts (no Airflow stack, no Spark)."""
from __future__ import annotations

import time

import pytest
from speculation_dags import example

from regionflow.spark.data.task import UnitTask
from regionflow.store import CopyState, RegionflowStore

RUN = "manual__1"
REGION = "orders__clean__enrich"


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


class FakeTI:
    def __init__(self, states=None):
        self.states = states or {}
        self.asked = []

    def get_task_states(self, **kwargs):
        self.asked.append(kwargs)
        return self.states


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.setenv("AIRFLOW__REGIONFLOW__HOSTS", "h1:slots=4;h2:slots=2")
    monkeypatch.setenv("AIRFLOW__REGIONFLOW__MAX_SHARDS", "2")
    monkeypatch.setenv("AIRFLOW__REGIONFLOW__STORE_URL", f"sqlite:///{tmp_path}/regionflow.db")
    monkeypatch.setenv("AIRFLOW__REGIONFLOW__DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("AIRFLOW__REGIONFLOW__BLOCKLIST_EXPIRY", "30")
    gauges = []
    monkeypatch.setattr("regionflow.sensors.speculation.emit_gauges",
                        lambda values, tags: gauges.append((values, tags)))
    return {"url": f"sqlite:///{tmp_path}/regionflow.db", "gauges": gauges}


@pytest.fixture
def dag_and_sensor(env):
    from regionflow.config import RegionflowConfig

    dag, _ = example(RegionflowConfig.from_airflow(), speculation_config={"quantile": 0.5}, dag_id="spec_sensor")
    return dag, dag.get_task(f"{REGION}__speculation")


def record(store, clock, shard, attempt, host, started_ago, ended_ago=None, state="succeeded", speculative=False):
    now = time.time()
    clock.now = now - started_ago
    store.start_attempt(attempt_id=attempt, dag_id="spec_sensor", run_id=RUN, task_id=REGION, unit_key=f"u{shard}",
                        host=host, map_index=shard, speculative=speculative)
    if ended_ago is not None:
        clock.now = now - ended_ago
        store.end_attempt(attempt, state)
    clock.now = now


def test_a_slow_shard_gets_its_host_blocked_and_one_copy_requested(env, dag_and_sensor):
    dag, sensor = dag_and_sensor
    clock = Clock()
    store = RegionflowStore(env["url"], clock=clock)
    record(store, clock, 0, "try1-fast", "h2", started_ago=70, ended_ago=60)  # 10 s
    record(store, clock, 1, "try1-slow", "h1", started_ago=60)  # running 60 s > max(1.5 x 10, 10)
    ti = FakeTI({RUN: {f"{REGION}_0": "success", f"{REGION}_1": "running"}})
    context = {"dag": dag, "run_id": RUN, "ti": ti}
    assert sensor.poke(context) is False
    [block] = store.active_blocks(job_id=f"spec_sensor/{RUN}")
    assert block.host == "h1" and "try1-slow" in block.reason and 25 < block.remaining_s(time.time()) <= 30
    [copy] = store.copy_requests("spec_sensor", RUN, REGION)
    assert copy.map_index == 1 and copy.state is CopyState.PENDING and copy.excluded_hosts == ("h1",)
    assert copy.slow_attempt == "try1-slow" and copy.job_id == f"spec_sensor/{RUN}"
    assert list(copy.requests) == sensor.shard_requests[1]
    template = UnitTask.read(copy.template_path)
    assert template.attempt_id == "" and template.host == "" and template.unit_key == copy.unit_key
    assert template.unit_name.startswith("orders+clean+enrich") or template.regions
    assert template.inputs  # the broadcast input from products is described
    # metrics: the six of seed 001, in the store and as gauges
    latest = {name for (task, name) in store.latest_metrics("spec_sensor", RUN)}
    for name in ("min_finished_before_speculation", "finished_shards", "speculative_attempts_launched",
                 "threshold_s", "shard_running_s.0", "shard_running_s.1", "copies_won"):
        assert f"regionflow.speculation.{name}" in latest
    values, tags = env["gauges"][-1]
    assert values["regionflow.speculation.threshold_s"] == pytest.approx(15.0)
    assert tags == {"dag_id": "spec_sensor", "task_id": REGION}
    # a second poke asks for no second copy while the first is open
    assert sensor.poke(context) is False
    assert len(store.copy_requests("spec_sensor", RUN, REGION)) == 1


def test_done_when_every_shard_succeeded_and_counts_copies_that_won(env, dag_and_sensor):
    dag, sensor = dag_and_sensor
    clock = Clock()
    store = RegionflowStore(env["url"], clock=clock)
    record(store, clock, 0, "try1-a", "h2", started_ago=70, ended_ago=60)
    record(store, clock, 1, "try1-b", "h1", started_ago=60, ended_ago=0.5, state="lost_commit")
    record(store, clock, 1, "spec1-c", "h2", started_ago=20, ended_ago=5, speculative=True)
    assert sensor.poke({"dag": dag, "run_id": RUN, "ti": FakeTI()}) is True
    latest = {name: r.value for (task, name), r in store.latest_metrics("spec_sensor", RUN).items()}
    assert latest["regionflow.speculation.copies_won"] == 1
    assert latest["regionflow.speculation.speculative_attempts_launched"] == 1
    assert store.copy_requests("spec_sensor", RUN) == []


def test_done_when_the_region_task_instances_all_finished(env, dag_and_sensor):
    dag, sensor = dag_and_sensor
    clock = Clock()
    store = RegionflowStore(env["url"], clock=clock)
    record(store, clock, 0, "try1-a", "h2", started_ago=70, ended_ago=60, state="failed")
    ti = FakeTI({RUN: {f"{REGION}_0": "failed", f"{REGION}_1": "upstream_failed"}})
    assert sensor.poke({"dag": dag, "run_id": RUN, "ti": ti}) is True
    assert ti.asked == [{"dag_id": "spec_sensor", "task_ids": [REGION], "run_ids": [RUN]}]
    ti.states = {RUN: {f"{REGION}_0": "failed", f"{REGION}_1": "running"}}
    assert sensor.poke({"dag": dag, "run_id": RUN, "ti": ti}) is False


def test_a_poke_that_cannot_reach_the_store_fails_nothing_and_ends_with_the_region(env, dag_and_sensor, tmp_path,
                                                                                    monkeypatch):
    """The sensor is a leaf task: an exception out of its poke would fail the DAG run although every region
    task succeeded. It logs the failure and is done exactly when the region's task instances are."""
    dag, sensor = dag_and_sensor
    monkeypatch.setenv("AIRFLOW__REGIONFLOW__STORE_URL", f"sqlite:///{tmp_path}/no/such/dir/regionflow.db")
    ti = FakeTI({RUN: {f"{REGION}_0": "success", f"{REGION}_1": "running"}})
    assert sensor.poke({"dag": dag, "run_id": RUN, "ti": ti}) is False
    ti.states = {RUN: {f"{REGION}_0": "success", f"{REGION}_1": "success"}}
    assert sensor.poke({"dag": dag, "run_id": RUN, "ti": ti}) is True
    assert len(ti.asked) == 2  # both pokes fell back to the task instances' states
    with pytest.raises(Exception):  # noqa: B017 - the store really is unreachable: any error of the driver
        sensor.watch({"dag": dag, "run_id": RUN, "ti": ti})


def test_quantile_not_reached_means_no_copy(env, dag_and_sensor):
    dag, sensor = dag_and_sensor
    clock = Clock()
    store = RegionflowStore(env["url"], clock=clock)
    record(store, clock, 0, "try1-a", "h2", started_ago=600)
    record(store, clock, 1, "try1-b", "h1", started_ago=600)
    assert sensor.poke({"dag": dag, "run_id": RUN, "ti": FakeTI()}) is False
    assert store.copy_requests("spec_sensor", RUN) == [] and store.active_blocks() == []


def test_a_copy_template_carries_the_original_tries_run_values_not_new_ones(env, dag_and_sensor):
    """The region task binds its try's run context and rendered sinks; the copy's template is built from
    them (a sensor poke is another task, with its own try number): the copy sees exactly the original's."""
    from datetime import UTC, datetime

    from regionflow.config import RegionflowConfig
    from regionflow.core.run_context import RunContext
    from regionflow.units.dags import JobSource
    from regionflow.units.opened import OpenedUnit

    dag, sensor = dag_and_sensor
    original = RunContext(dag_id="spec_sensor", run_id=RUN, logical_date=datetime(2026, 1, 2, tzinfo=UTC),
                          params={"limit": 3}, try_number=2, map_index=1)
    OpenedUnit(JobSource.of(dag), RUN, sensor.region_mode, sensor.logical, sensor.max_shards, 1,
               RegionflowConfig.from_airflow()).bind(original, {"totals": {"sink": "t/ds=2026-01-02"}})
    clock = Clock()
    store = RegionflowStore(env["url"], clock=clock)
    record(store, clock, 0, "try1-fast", "h2", started_ago=70, ended_ago=60)
    record(store, clock, 1, "try2-slow", "h1", started_ago=60)
    ti = FakeTI({RUN: {f"{REGION}_0": "success", f"{REGION}_1": "running"}})
    assert sensor.poke({"dag": dag, "run_id": RUN, "ti": ti}) is False
    [copy] = store.copy_requests("spec_sensor", RUN, REGION)
    template = UnitTask.read(copy.template_path)
    assert RunContext.from_dict(template.context) == original
    assert template.rendered == {"totals": {"sink": "t/ds=2026-01-02"}}
