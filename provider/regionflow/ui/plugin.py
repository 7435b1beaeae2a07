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


BUNDLE_URL = f"{URL_PREFIX}/static/regionflow.js"


def _app(name: str, destination: str, url_route: str, **extra: Any) -> dict[str, Any]:
    """A `react_apps` entry: Airflow's UI loads `BUNDLE_URL` and renders the component the bundle
    registers as ``globalThis[name]`` (ui/src/main.tsx), inside its own page and theme."""
    return {"name": name, "bundle_url": BUNDLE_URL, "destination": destination, "url_route": url_route, **extra}


class RegionflowPlugin(AirflowPlugin):
    """regionflow's pages inside Airflow's UI (React, Airflow's Chakra theme): the slot pool (Browse),
    the plan of a DAG and of a DAG run, a DAG run's timeline and a task instance's attempts (their
    views' tabs); the JSON API and the bundle are served by the plugin's FastAPI app."""

    name = "regionflow"
    fastapi_apps = [{"app": LazyApp(), "url_prefix": URL_PREFIX, "name": "regionflow"}]
    react_apps = [
        _app("regionflow slot pool", "nav", "regionflow-slot-pool", category="browse"),
        _app("regionflow plan", "dag", "regionflow-plan"),
        _app("regionflow run plan", "dag_run", "regionflow-run-plan"),
        _app("regionflow timeline", "dag_run", "regionflow-timeline"),
        _app("regionflow attempts", "task_instance", "regionflow-attempts"),
    ]


__all__ = ["BUNDLE_URL", "LazyApp", "RegionflowPlugin", "URL_PREFIX"]
