"""regionflow: Apache Flink's batch scheduler (pipelined regions, FIFO bulk slot pool, speculation)
for Apache Airflow DAGs whose work runs on Spark.

Layers (see DESIGN.md): `core` and `scheduling` are pure Python; `spark`, `store`, `operators`,
`sensors`, `executors` adapt them to Spark and Airflow.
"""
from __future__ import annotations

__version__ = "0.1.0"

PACKAGE_NAME = "airflow-provider-regionflow"


def transform(dag, mode=None, max_shards=None, config=None, executor=None, speculation=None,
              speculation_config=None):
    """Compile the DAG's SparkVertexOperators into pipelined-region tasks (see regionflow.transformer)."""
    from .transformer import transform as _transform

    return _transform(dag, mode=mode, max_shards=max_shards, config=config, executor=executor,
                      speculation=speculation, speculation_config=speculation_config)


def get_provider_info() -> dict:
    """Provider metadata read by Airflow's ProvidersManager (entry point `apache_airflow_provider`)."""
    return {
        "package-name": PACKAGE_NAME,
        "name": "regionflow",
        "description": "Flink's pipelined-region batch scheduler for Airflow + Spark: regions as Spark "
                       "submissions, a FIFO bulk slot pool, speculative execution.",
        "versions": [__version__],
        "executors": ["regionflow.executors.RegionExecutor"],
        "config": _config_metadata(),
        "cli": ["regionflow.cli.airflow.get_cli_commands"],
    }


def _config_metadata() -> dict:
    from .config import provider_config_metadata

    return provider_config_metadata()
