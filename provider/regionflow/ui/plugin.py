"""The Airflow plugin: registered through the ``airflow.plugins`` entry point of the package (so
``pip install`` is enough), or copied as ``plugins/regionflow_plugin.py`` into ``$AIRFLOW_HOME/plugins``.

Every Airflow process discovers plugins (the scheduler, the dag-processor, task processes), but only
the api-server serves the app: `LazyApp` builds it (importing FastAPI routes and Airflow's security
module) on its first request, so discovery elsewhere costs nothing.
"""
from __future__ import annotations

from typing import Any

from airflow.plugins_manager import AirflowPlugin

URL_PREFIX = "/regionflow"


class LazyApp:
    """An ASGI app that builds `regionflow.ui.app.build_app()` on its first call."""

    def __init__(self) -> None:
        self._app: Any = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if self._app is None:
            from .app import build_app

            self._app = build_app()
        await self._app(scope, receive, send)


class RegionflowPlugin(AirflowPlugin):
    """regionflow's pages in the Airflow UI: the slot pool (navigation, Browse), the plan of a DAG and of
    a DAG run (their views' tabs) and the attempts of a task instance (its view's tabs)."""

    name = "regionflow"
    fastapi_apps = [{"app": LazyApp(), "url_prefix": URL_PREFIX, "name": "regionflow"}]
    external_views = [
        {"name": "regionflow slot pool", "href": f"{URL_PREFIX}/cluster", "destination": "nav",
         "category": "browse", "url_route": "regionflow-slot-pool"},
        {"name": "regionflow attempts", "href": f"{URL_PREFIX}/attempts?dag_id={{DAG_ID}}&run_id={{RUN_ID}}"
                                                f"&task_id={{TASK_ID}}",
         "destination": "task_instance", "url_route": "regionflow-attempts"},
        {"name": "regionflow plan", "href": f"{URL_PREFIX}/plan?dag_id={{DAG_ID}}", "destination": "dag",
         "url_route": "regionflow-plan"},
        {"name": "regionflow plan of the run", "href": f"{URL_PREFIX}/plan?dag_id={{DAG_ID}}&run_id={{RUN_ID}}",
         "destination": "dag_run", "url_route": "regionflow-run-plan"},
    ]


__all__ = ["LazyApp", "RegionflowPlugin", "URL_PREFIX"]
