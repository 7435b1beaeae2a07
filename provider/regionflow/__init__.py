"""regionflow: Apache Flink's batch scheduler (pipelined regions, FIFO bulk slot pool, speculation)
for Apache Airflow DAGs whose work runs on Spark.

Layers (see docs/architecture.md): `core` and `scheduling` are pure Python; `spark`, `store`, `operators`,
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


INTEGRATION = "regionflow"
# The Airflow connection types regionflow uses, all of them the Spark provider's: `spark` (the submit backend's
# SparkSubmitHook, `[regionflow] spark_conn_id`) and `spark_connect` (a host's `conn_id` on the session backend).
# They are not listed under "connection-types": that would register the Spark provider's hooks a second time.
CONNECTION_TYPES_USED = ("spark", "spark_connect")


def get_provider_info() -> dict:
    """Provider metadata read by Airflow's ProvidersManager (entry point `apache_airflow_provider`): what the
    provider brings, in Airflow's provider.yaml schema. The UI plugin is not listed: Airflow 3.3 loads a
    provider's "plugins" only with ``[core] lazy_discover_providers = False`` (not the default), so it is
    registered through the package's ``airflow.plugins`` entry point, and listing it here as well would
    register it twice under that setting (Airflow then reports a plugin import error)."""
    modules = {"operators": ["regionflow.operators.vertex", "regionflow.operators.region"],
               "sensors": ["regionflow.sensors.speculation"], "triggers": ["regionflow.triggers.inputs"]}
    return {
        "package-name": PACKAGE_NAME,
        "name": "regionflow",
        "description": "Flink's pipelined-region batch scheduler for Airflow + Spark: regions as Spark "
                       "submissions, a FIFO bulk slot pool, speculative execution. Uses the Spark provider's "
                       f"connection types: {', '.join(CONNECTION_TYPES_USED)}.",
        "versions": [__version__],
        "integrations": [{"integration-name": INTEGRATION, "external-doc-url": "docs/",
                          "tags": ["apache", "spark", "scheduler"]}],
        **{kind: [{"integration-name": INTEGRATION, "python-modules": names}] for kind, names in modules.items()},
        "executors": ["regionflow.executors.RegionExecutor"],
        "config": _config_metadata(),
        "cli": ["regionflow.cli.airflow.get_cli_commands"],
    }


def _config_metadata() -> dict:
    from .config import provider_config_metadata

    return provider_config_metadata()
