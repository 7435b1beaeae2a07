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
  state and timing, and an adaptive region's decision for the run (from the store). Needs read access to the
  DAG; 404 naming the DAG or run; 400 naming a bad mode.

- ``GET /regionflow/api/dags/{dag_id}/runs/{run_id}/timeline``: the run's Gantt chart (`timeline.run_timeline`):
  per host and slot, each shard's wait for slots and its attempts, speculative copies linked to the attempt
  they copy, the run's blocklist intervals. Needs read access to the DAG's task instances; 404 naming the run.
- ``GET /regionflow/api/cluster/history[?hours=3]``: slot occupancy per host and the FIFO queue's length over
  the last hours (`history.cluster_history`, from the store's grant rows). Any logged-in user (counts only).

Pages: a React bundle (``GET /regionflow/static/regionflow.js``, built from ``ui/`` in the repository)
that Airflow's UI loads for the plugin's ``react_apps`` and renders inside its own pages (the navigation's
Browse menu, the DAG, DAG run and task instance tabs: `plugin.RegionflowPlugin.react_apps`); it reads the
JSON above. The bundle is behind the same login as the API.

Authentication and authorization are Airflow's own: its ``get_user`` dependency (the UI's cookie or a
bearer token from ``POST /auth/token``) and ``requires_access_dag``; nothing here checks a password.
"""
from __future__ import annotations

import functools
import os
from typing import Any

from airflow.api_fastapi.app import get_auth_manager
from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity
from airflow.api_fastapi.common.db.common import SessionDep
from airflow.api_fastapi.core_api.security import GetUserDep, requires_access_dag
from fastapi import Depends, FastAPI, HTTPException, Query
from fastapi.responses import FileResponse

from ..core.errors import SpecError
from .airflow_db import ContractError, plan_reference, run_state, task_instances
from .history import cluster_history
from .plan_view import plan_view, slot_use
from .timeline import run_timeline
from .views import cluster_view, run_view

BUNDLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "static", "regionflow.js")


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
        _with_run_state(view, run_state(session, dag_id, run_id))
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
        decisions = store.decisions(dag_id, run_id) if (store is not None and run_id) else {}
        try:
            view = plan_view(reference, dag_id, mode, run_id,
                             task_instances(session, dag_id, run_id) if run_id else (),
                             slot_use(grants) if run_id else None, decisions)
        except SpecError as error:
            raise HTTPException(400, f"mode: {error}") from None
        return _with_run_state(view, state)

    @app.get("/api/dags/{dag_id}/runs/{run_id}/timeline",
             dependencies=[Depends(requires_access_dag("GET", DagAccessEntity.TASK_INSTANCE))])
    def timeline(dag_id: str, run_id: str, session: SessionDep) -> dict[str, Any]:
        state = run_state(session, dag_id, run_id)
        if state is None:
            raise HTTPException(404, f"DAG {dag_id!r} has no run {run_id!r}; check the ids")
        view = run_timeline(_store(), _config().cluster, dag_id, run_id)
        return _with_run_state(view, state)

    @app.get("/api/cluster/history")
    def history(user: GetUserDep, hours: float = Query(default=3.0)) -> dict[str, Any]:
        try:
            return cluster_history(_store(), _config().cluster, hours=hours)
        except ValueError as error:
            raise HTTPException(400, str(error)) from None

    @app.get("/static/regionflow.js", response_class=FileResponse)
    def bundle(user: GetUserDep) -> FileResponse:
        if not os.path.exists(BUNDLE):
            raise HTTPException(404, "regionflow's UI bundle is missing from the package: build it with "
                                     "`make ui` (npm ci && npm run build in ui/) and reinstall")
        # revalidated on every load (ETag), so an upgraded package's pages are what Airflow shows
        return FileResponse(BUNDLE, media_type="text/javascript", headers={"Cache-Control": "no-cache"})

    return app


ACTIVE_RUN_STATES = ("queued", "running")


def _with_run_state(view: dict[str, Any], state: str | None) -> dict[str, Any]:
    """The view with its DAG run's state and ``active``: whether the run is queued or running, which is
    while a page of it keeps refreshing."""
    view["run_state"] = state
    view["active"] = state in ACTIVE_RUN_STATES
    return view


__all__ = ["build_app"]
