"""transform(speculation=...) at parse time: a SpeculationSensor beside each eligible mapped region task."""
from __future__ import annotations

import pytest
from speculation_dags import example

from regionflow.config import RegionflowConfig
from regionflow.contract import NoSlots, RegionSlots, from_executor_config
from regionflow.core.errors import JobGraphError, SpecError
from regionflow.sensors import SpeculationSensor
from regionflow.sensors.speculation import MIN_RESCHEDULE_INTERVAL_S


@pytest.fixture
def config():
    return RegionflowConfig.from_values(
        lambda name: {"hosts": "h1:slots=4;h2:slots=2", "max_shards": "2"}.get(name, ""), airflow_home="/tmp/unused")


def test_a_sensor_beside_each_mapped_region_with_the_same_upstream(config):
    dag, result = example(config)
    sensors = {t.task_id: t for t in dag.tasks if isinstance(t, SpeculationSensor)}
    # products has one shard (nothing to compare with); the sink region writes through the committer
    assert set(sensors) == {"orders__clean__enrich__speculation", "totals__speculation"}
    for sensor_id, sensor in sensors.items():
        region = dag.get_task(sensor.region_task_id)
        assert sensor.upstream_task_ids == region.upstream_task_ids
        assert sensor.downstream_task_ids == set()
        assert sensor.mode == "reschedule" and sensor.poke_interval >= MIN_RESCHEDULE_INTERVAL_S
        assert from_executor_config(sensor.executor_config, sensor_id) == NoSlots()
        settings = region.partial_kwargs["executor_config"]["regionflow"]
        assert sensor.shard_requests == settings["requests"] and sensor.total_shards == len(settings["requests"])
    assert sensors["totals__speculation"].upstream_task_ids == {"orders__clean__enrich"}
    assert not result.speculation[next(i for i, t in result.region_tasks.items() if t.task_id == "products")].enabled
    assert "single shard" in result.speculation[
        next(i for i, t in result.region_tasks.items() if t.task_id == "products")].reason


def test_speculation_off_by_default_and_per_vertex(config):
    dag, _ = example(config, speculation=False, dag_id="off")
    assert not [t for t in dag.tasks if isinstance(t, SpeculationSensor)]
    dag, result = example(config, speculation="on", clean_flag=False, dag_id="vertex_off")
    assert [t.task_id for t in dag.tasks if isinstance(t, SpeculationSensor)] == ["totals__speculation"]
    reasons = [p.reason for p in result.speculation.values() if not p.enabled]
    assert any("vertex 'clean' has speculation off" in r for r in reasons)
    dag, _ = example(config, speculation=False, clean_flag=True, dag_id="vertex_on")
    assert not [t for t in dag.tasks if isinstance(t, SpeculationSensor)]  # orders, enrich inherit off


def test_a_vertex_writing_outside_the_committer_is_never_speculated(config):
    dag, result = example(config, totals_external=True, dag_id="external")
    assert [t.task_id for t in dag.tasks if isinstance(t, SpeculationSensor)] == ["orders__clean__enrich__speculation"]
    totals = next(i for i, t in result.region_tasks.items() if t.task_id == "totals")
    assert result.speculation[totals].reason == "vertex 'totals' writes outside regionflow's committer"
    assert result.plan.graph.to_spec()["vertices"][-1]["external_writes"] is True
    with pytest.raises(JobGraphError, match=r"vertex 'totals'.external_writes must be a boolean"):
        example(config, totals_external="yes", dag_id="external_bad")


def test_detector_settings_reach_the_sensor(config):
    dag, _ = example(config, speculation_config={"quantile": "0.5", "interval": 12, "min_runtime": 3},
                     dag_id="tuned")
    sensor = dag.get_task("totals__speculation")
    assert sensor.config.quantile == 0.5 and sensor.config.min_runtime == 3 and sensor.poke_interval == 12


@pytest.mark.parametrize("settings, option", [
    ({"quantile": 1.5}, "quantile"), ({"multiplier": 0.5}, "multiplier"), ({"min_runtime": -1}, "min_runtime"),
    ({"interval": 0}, "interval"), ({"max_attempts": 1}, "max_attempts"), ({"bogus": 1}, "bogus"),
])
def test_invalid_settings_fail_at_parse_time_naming_the_option(config, settings, option):
    with pytest.raises(SpecError, match=option):
        example(config, speculation_config=settings, dag_id=f"bad_{option}")


def test_invalid_switches_fail_at_parse_time(config):
    with pytest.raises(SpecError, match="speculation.*'maybe'"):
        example(config, speculation="maybe", dag_id="bad_switch")
    with pytest.raises(SpecError, match="vertex 'clean'"):
        example(config, clean_flag="sometimes", dag_id="bad_vertex")


def test_the_e2e_dag_file_parses_and_serializes_like_the_dag_processor_does(monkeypatch):
    """The dag-processor resolves template files (which calls BaseOperator.prepare_template()) and
    serializes every task: the sensor must survive both."""
    import importlib.util
    import os

    from airflow.serialization.serialized_objects import DagSerialization

    monkeypatch.setenv("AIRFLOW__REGIONFLOW__HOSTS", "a:slots=1,affinity=0;b:slots=1,affinity=1")
    path = os.path.join(os.path.dirname(__file__), "dags_speculation", "rf_speculation.py")
    spec = importlib.util.spec_from_file_location("rf_speculation_parse_test", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    dag = module.orders_speculation
    for task in dag.tasks:
        task.resolve_template_files()
    sensors = sorted(t.task_id for t in dag.tasks if isinstance(t, SpeculationSensor))
    assert sensors == ["enrich__speculation", "orders__clean__speculation", "totals__speculation"]
    restored = DagSerialization.from_dict(DagSerialization.to_dict(dag))
    task = restored.get_task("totals__speculation")
    assert from_executor_config(task.executor_config, task.task_id) == NoSlots()
    # the contract of every region task survives serialization; one carries the plan for the UI
    contracts = {t.task_id: from_executor_config(t.executor_config, t.task_id) for t in restored.tasks
                 if not isinstance(t, SpeculationSensor) and t.task_id.endswith(("clean", "products", "enrich",
                                                                                 "totals"))}
    assert contracts and all(isinstance(c, RegionSlots) for c in contracts.values())
    assert [task_id for task_id, c in contracts.items() if c.plan] == ["orders__clean"]
