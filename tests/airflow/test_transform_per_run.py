"""An adaptive region cut into several shards, at parse time: its decision task after its producers, its
region task mapped over the decision's result (Airflow's dynamic task mapping), slot requests for its most
shards, and the regions after it waiting for the whole task. The run is in tests/airflow/test_e2e_session.py
(`adaptive_per_run`); the rule in tests/core/test_run_decision.py. No Airflow stack here."""
from datetime import datetime

import pytest
from airflow.sdk import DAG

import regionflow
from regionflow.config import RegionflowConfig
from regionflow.contract import NoSlots, from_executor_config
from regionflow.examples import orders as job
from regionflow.operators import SparkVertexOperator, hash_by, rebalance
from regionflow.operators.decision import RegionDecisionOperator


@pytest.fixture
def config():
    return RegionflowConfig.from_values(
        lambda name: {"hosts": "h1:slots=4;h2:slots=2", "max_shards": "4"}.get(name, ""), airflow_home="/tmp/unused")


def per_run_dag(config, speculation=False):
    with DAG("per_run", schedule=None, start_date=datetime(2026, 1, 1)) as dag:
        orders = SparkVertexOperator(task_id="orders", parallelism=2, fn=job.generate_orders)
        per = SparkVertexOperator(task_id="per", parallelism=(1, 8), fn=job.count_per_customer,
                                  target_bytes_per_subtask=1 << 20)
        out = SparkVertexOperator(task_id="out", parallelism=2, fn=job.count_per_customer, sink="o")
        orders >> hash_by("customer_id") >> per >> rebalance() >> out
    return dag, regionflow.transform(dag, mode="all-blocking", config=config, speculation=speculation)


def test_the_decision_task_comes_after_the_producers_and_the_shards_are_mapped_over_its_result(config):
    from airflow.sdk.definitions.xcom_arg import XComArg

    dag, result = per_run_dag(config)
    decide = dag.get_task("per__decide")
    assert isinstance(decide, RegionDecisionOperator) and result.decision_tasks == {1: decide}
    assert decide.upstream_task_ids == {"orders"} and decide.region_task_id == "per"
    per = dag.get_task("per")
    assert per.upstream_task_ids == {"per__decide"}
    (argument,) = XComArg.iter_xcom_references(per.expand_input.value)
    assert argument[0].task_id == "per__decide"
    assert dag.get_task("out").upstream_task_ids == {"per"}  # the consumer waits for the whole mapped task
    slots = from_executor_config(per.partial_kwargs["executor_config"], "per_run.per")
    assert slots.shards == 4 and slots.labels == ("per[0]", "per[1]", "per[2]", "per[3]")  # its most, at 8
    assert slots.inputs == ()
    assert isinstance(from_executor_config(decide.executor_config, "per_run.per__decide"), NoSlots)


def test_the_speculation_sensor_reads_the_runs_shard_count(config):
    dag, result = per_run_dag(config, speculation=True)
    sensor = dag.get_task("per__speculation")
    assert sensor.decided_per_run and sensor.total_shards == 4
    assert not dag.get_task("orders__speculation").decided_per_run


def test_the_serialized_dag_keeps_the_mapping_over_the_decision(config):
    from airflow.serialization.serialized_objects import DagSerialization

    dag, _ = per_run_dag(config)
    restored = DagSerialization.from_dict(DagSerialization.to_dict(dag))
    assert restored.get_task("per").upstream_task_ids == {"per__decide"}
    assert restored.get_task("per__decide").downstream_task_ids == {"per"}


@pytest.mark.parametrize(("wiring", "named"), [
    ("rescale", "edge orders -RESCALE-> per wires it pointwise to another region"),
    ("forward_out", "edge per -FORWARD-> out wires it pointwise to another region"),
])
def test_a_byte_target_that_could_never_take_effect_is_a_parse_error_naming_vertex_and_fix(config, wiring, named):
    from regionflow.core.errors import JobGraphError
    from regionflow.operators import forward, rescale

    with DAG("never_sized", schedule=None, start_date=datetime(2026, 1, 1)) as dag:
        orders = SparkVertexOperator(task_id="orders", parallelism=2, fn=job.generate_orders)
        per = SparkVertexOperator(task_id="per", parallelism=(1, 8), fn=job.count_per_customer,
                                  target_bytes_per_subtask=1 << 20)
        if wiring == "rescale":
            orders >> rescale() >> per
        else:
            out = SparkVertexOperator(task_id="out", parallelism=(1, 8), fn=job.count_per_customer, sink="o")
            orders >> hash_by("customer_id") >> per >> forward() >> out
    with pytest.raises(JobGraphError) as error:
        regionflow.transform(dag, mode="all-blocking", config=config)
    message = str(error.value)
    assert "vertex 'per' declares target_bytes_per_subtask" in message and named in message, message
    assert "hash_by(...) or rebalance()" in message and "\n" not in message
