"""A region task's inputs in the Airflow path (no Airflow stack, no Spark): a shard run again after its
inputs were released by Flink's rule fails at once saying why and what to do."""
from datetime import datetime

import pytest
from airflow.sdk import DAG

import regionflow
from regionflow.config import RegionflowConfig
from regionflow.core.errors import RegionflowError
from regionflow.examples import orders as job
from regionflow.operators import SparkVertexOperator, hash_by
from regionflow.units.dags import JobSource
from regionflow.units.opened import OpenedUnit


def test_a_shard_whose_inputs_were_released_fails_at_once_with_the_fix(tmp_path):
    config = RegionflowConfig.from_values(
        lambda name: {"hosts": "h1:slots=2", "max_shards": "1", "data_dir": str(tmp_path / "data")}.get(name, ""),
        airflow_home=str(tmp_path))
    with DAG("released_inputs", schedule=None, start_date=datetime(2026, 1, 1)) as dag:
        orders = SparkVertexOperator(task_id="orders", parallelism=2, fn=job.generate_orders)
        counts = SparkVertexOperator(task_id="counts", parallelism=2, fn=job.count_per_customer, sink="c")
        orders >> hash_by("customer_id") >> counts
    result = regionflow.transform(dag, mode="all-blocking", config=config)
    producer = OpenedUnit(JobSource.of(dag), "r1", "all-blocking", 0, 1, 0, config)
    consumer = OpenedUnit(JobSource.of(dag), "r1", "all-blocking", 1, 1, 0, config)
    assert result.plan.graph.vertices["counts"].parallelism == 2
    store = producer.partitions
    (dataset,) = consumer.layout.producer_datasets(consumer.unit, store)
    attempt = store.attempt_dir(producer.key, "a1")
    store.fs.mkdirs(f"{attempt}/{dataset.rsplit('/', 1)[1]}/_rf_unit={consumer.layout.shards[consumer.unit].index}")
    store.commit(producer.key, "a1", {})
    assert consumer.unit_task(slots=1).task.input_bytes == 0  # nothing released yet: the shard may run
    store.release([dataset])
    again = OpenedUnit(JobSource.of(dag), "r1", "all-blocking", 1, 1, 0, config)  # a cleared task: a new process
    with pytest.raises(RegionflowError, match="input partitions were released.*trigger a new DAG run"):
        again.unit_task(slots=1)
