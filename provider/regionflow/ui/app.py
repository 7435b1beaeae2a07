"""The plugin's FastAPI app, mounted by Airflow's api-server under ``/regionflow``.

JSON (read-only, from regionflow's store):
- ``GET /regionflow/api/cluster``: hosts with slots used/free, the blocklist, the FIFO queue with
  why each region waits, grants per DAG run. Any logged-in user; queue entries and grants of DAGs
  the user may not read are left out (counted in ``queue_hidden``).
- ``GET /regionflow/api/dags/{dag_id}/runs/{run_id}/attempts[?task_id=]``: every attempt and
  speculative copy of the run's region tasks (host, start, end, state, winner), the speculation
  figures, and the DAG run's state with ``active`` (queued or running: the page stops refreshing
  once the run has ended). Needs read access to the DAG's task instances; 404 naming the ids when regionflow has
  nothing for them.
- ``GET /regionflow/api/dags/{dag_id}/plan[?mode=&run_id=]``: the DAG's vertices, edges with their exchange,
  and logical regions under its own mode or a previewed one (`plan_view.plan_view`, from the plan the
  transform left in the serialized DAG; Airflow's database, not the store); with a run, each region's
  state and timing. Needs read access to the DAG; 404 naming the DAG or run; 400 naming a bad mode.

Pages (``/regionflow/cluster``, ``/regionflow/plan?dag_id=[&run_id=]``,
``/regionflow/attempts?dag_id=&run_id=&task_id=``) are one HTML file each with a small script that
reads the JSON above every 5 s; Airflow shows them in its navigation and on the DAG, DAG run and task
instance views (`plugin.RegionflowPlugin.external_views`).

Authentication and authorization are Airflow's own: its ``get_user`` dependency (the UI's cookie or a
bearer token from ``POST /auth/token``) and ``requires_access_dag``; nothing here checks a password.
"""
from __future__ import annotations

import functools
from typing import Any

from airflow.api_fastapi.app import get_auth_manager
from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity
from airflow.api_fastapi.common.db.common import SessionDep
from airflow.api_fastapi.core_api.security import GetUserDep, requires_access_dag
from fastapi import Depends, FastAPI, HTTPException, Query
from fastapi.responses import HTMLResponse

from ..core.errors import SpecError
from .airflow_db import ContractError, plan_reference, run_state, task_instances
from .pages import attempts_page, cluster_page, plan_page
from .plan_view import plan_view, slot_use
from .views import cluster_view, run_view


@functools.lru_cache(maxsize=1)
def _config() -> Any:
    from ..config import RegionflowConfig

    return RegionflowConfig.from_airflow()


_stores: dict[str, Any] = {}


def _store() -> Any:
    """regionflow's store, or None while a SQLite store does not exist yet (nothing ran): a page is
    no reason to create one. Once it exists it is opened once per process."""
    from ..store import RegionflowStore, store_exists

    url = _config().store_url
    if url not in _stores:
        if not store_exists(url):
            return None
        _stores[url] = RegionflowStore.from_config(url)
    return _stores[url]


def build_app() -> FastAPI:
    """The app Airflow mounts (through `plugin.LazyApp`, so plugin discovery stays cheap)."""
    app = FastAPI(title="regionflow", description="regionflow's slot pool, queue, blocklist and attempts",
                  docs_url=None, redoc_url=None, openapi_url=None)

    @app.get("/api/cluster")
    def cluster(user: GetUserDep) -> dict[str, Any]:
        readable = get_auth_manager().get_authorized_dag_ids(user=user, method="GET")
        return cluster_view(_store(), _config().cluster, may_see=readable.__contains__)

    @app.get("/api/dags/{dag_id}/runs/{run_id}/attempts",
             dependencies=[Depends(requires_access_dag("GET", DagAccessEntity.TASK_INSTANCE))])
    def attempts(dag_id: str, run_id: str, session: SessionDep,
                 task_id: str | None = Query(default=None)) -> dict[str, Any]:
        view = run_view(_store(), dag_id, run_id, task_id)
        view["run_state"] = run_state(session, dag_id, run_id)
        view["active"] = view["run_state"] in ACTIVE_RUN_STATES  # the page refreshes while this holds
        if not view["tasks"]:
            task = f" task {task_id!r}" if task_id else ""
            raise HTTPException(404, f"regionflow has no attempts of DAG {dag_id!r} run {run_id!r}{task}; "
                                     f"check the ids (only region tasks run by the RegionExecutor have attempts)")
        return view

    @app.get("/api/dags/{dag_id}/plan", dependencies=[Depends(requires_access_dag("GET"))])
    def plan(dag_id: str, session: SessionDep, mode: str | None = Query(default=None),
             run_id: str | None = Query(default=None)) -> dict[str, Any]:
        try:
            reference = plan_reference(session, dag_id)
        except ContractError as error:
            raise HTTPException(409, str(error)) from None
        if reference is None:
            raise HTTPException(404, f"DAG {dag_id!r} has no regionflow plan: it is unknown, or regionflow.transform "
                                     f"was not called on it (or its file was not parsed since regionflow was upgraded)")
        state = None
        if run_id:
            state = run_state(session, dag_id, run_id)
            if state is None:
                raise HTTPException(404, f"DAG {dag_id!r} has no run {run_id!r}; check the run id")
        store = _store()
        grants = store.grants(dag_id=dag_id, run_id=run_id) if (store is not None and run_id) else []
        try:
            view = plan_view(reference, dag_id, mode, run_id,
                             task_instances(session, dag_id, run_id) if run_id else (),
                             slot_use(grants) if run_id else None)
        except SpecError as error:
            raise HTTPException(400, f"mode: {error}") from None
        view["run_state"] = state
        view["active"] = state in ACTIVE_RUN_STATES
        return view

    @app.get("/plan", response_class=HTMLResponse, dependencies=[Depends(requires_access_dag("GET"))])
    def plan_html(dag_id: str = Query(), run_id: str | None = Query(default=None),
                  mode: str | None = Query(default=None)) -> str:
        return plan_page(dag_id, run_id, mode)

    @app.get("/cluster", response_class=HTMLResponse)
    def cluster_html(user: GetUserDep) -> str:
        return cluster_page()

    @app.get("/attempts", response_class=HTMLResponse,
             dependencies=[Depends(requires_access_dag("GET", DagAccessEntity.TASK_INSTANCE))])
    def attempts_html(dag_id: str = Query(), run_id: str = Query(), task_id: str | None = Query(default=None)) -> str:
        return attempts_page(dag_id, run_id, task_id)

    return app


ACTIVE_RUN_STATES = ("queued", "running")


__all__ = ["build_app"]
