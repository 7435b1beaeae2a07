"""Public test helpers: run your regionflow DAGs through a real Airflow in your own tests.

- `EmbeddedAirflow` (`regionflow.testing.stack`): a real Airflow 3.3 stack (api-server, scheduler(s),
  dag-processor, triggerer) on 127.0.0.1 in a home directory of its own, with the RegionExecutor (or
  any executor) and a small REST API v2 client (`rest_client`): trigger a run, wait for it, read its
  task instances and logs, mark and clear tasks. Everything it starts is stopped by ``stop()`` or at
  interpreter exit. Its errors (`errors`) name the component and the end of its log.
- `conformance`: Airflow's own example DAGs run under two executors with the same end states.
- `slow_host`: CPU hogs pinned to a host's cores, to make one host really slow (speculation tests).

A pytest fixture in your project can be as small as::

    from regionflow.testing import EmbeddedAirflow

    @pytest.fixture(scope="session")
    def airflow(tmp_path_factory):
        with EmbeddedAirflow(str(tmp_path_factory.mktemp("airflow")), "dags",
                             regionflow_options={"hosts": "localhost:2"}) as stack:
            yield stack

    def test_my_dag(airflow):
        airflow.wait_for_dag("my_dag")
        airflow.unpause("my_dag")
        assert airflow.wait_for_run("my_dag", airflow.trigger("my_dag")) == "success"

regionflow's own tests use exactly these helpers (tests/airflow).
"""
from __future__ import annotations

from .errors import ApiError, ComponentFailed, EmbeddedAirflowError, StartTimeout, WaitTimeout
from .stack import DEFAULT_EXECUTOR, EmbeddedAirflow

__all__ = ["DEFAULT_EXECUTOR", "ApiError", "ComponentFailed", "EmbeddedAirflow", "EmbeddedAirflowError",
           "StartTimeout", "WaitTimeout"]
