"""The UI plugin on a real api-server (embedded stack, RegionExecutor, 2 slots, session backend):
registered by the package's entry point, behind Airflow's auth, and showing the queue, the reason a
region waits, and the attempts of a run. (Browser tests with Chromium are not written yet.)"""
from __future__ import annotations

import os
import shutil
import time
from urllib.parse import quote

import httpx
import pytest

from regionflow.embedded import EmbeddedAirflow

DAGS = os.path.join(os.path.dirname(__file__), "dags_ui")
pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    home = tmp_path_factory.mktemp("airflow-ui")
    dags = home / "dags"
    shutil.copytree(DAGS, dags)
    options = {"hosts": "localhost:slots=2", "max_shards": "1", "data_dir": str(home / "data"), "backend": "session"}
    with EmbeddedAirflow(str(home), str(dags), regionflow_options=options) as airflow:
        for dag_id in ("ui_hold", "ui_region"):
            airflow.wait_for_dag(dag_id)
            airflow.unpause(dag_id)
        yield airflow


@pytest.fixture(scope="module")
def client(stack):
    # 120 s: on SQLite a task start and a trigger can lock Airflow's database for up to its 30 s busy
    # timeout, and the api-server's one worker answers nothing meanwhile (seen here once)
    with httpx.Client(base_url=stack.api_url, timeout=120.0, trust_env=False) as http:
        yield http


def auth(stack):
    return {"Authorization": f"Bearer {stack.token()}"}


def wait_until(check, timeout, what):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.5)


def test_the_plugin_is_registered_with_its_pages(stack, client):
    plugins = client.get("/api/v2/plugins", headers=auth(stack)).json()["plugins"]
    (plugin,) = [p for p in plugins if p["name"] == "regionflow"]
    views = {view["url_route"]: view for view in plugin["external_views"]}
    assert views["regionflow-slot-pool"]["destination"] == "nav"
    assert views["regionflow-attempts"]["destination"] == "task_instance"
    assert "{DAG_ID}" in views["regionflow-attempts"]["href"]


@pytest.mark.parametrize("path", ["/regionflow/api/cluster", "/regionflow/cluster",
                                  "/regionflow/api/dags/ui_region/runs/r/attempts",
                                  "/regionflow/attempts?dag_id=ui_region&run_id=r"])
def test_every_endpoint_needs_a_login(client, path):
    assert client.get(path).status_code == 401
    assert client.get(path, headers={"Authorization": "Bearer not-a-token"}).status_code in (401, 403)


def test_the_cluster_view_shows_a_waiting_region_and_why_then_its_attempt(stack, client):
    holder = stack.trigger("ui_hold", conf={"seconds": 25})
    wait_until(lambda: client.get("/regionflow/api/cluster", headers=auth(stack)).json()["slots"]["used"] == 1,
               120, "the holder to take one slot")
    region = stack.trigger("ui_region")
    view = wait_until(lambda: _queued(client.get("/regionflow/api/cluster", headers=auth(stack)).json()), 120,
                      "the region to wait in the queue")
    (waiting,) = view["queue"]
    assert (waiting["dag_id"], waiting["run_id"], waiting["position"]) == ("ui_region", region, 1)
    assert waiting["slots_requested"] == 2 and "not enough free slots: needs 2, 1 free" in waiting["why"]
    assert view["hosts"] == [{"name": "localhost", "slots": 2, "used": 1, "free": 1, "master": "local[2]",
                              "slot_profile": view["hosts"][0]["slot_profile"]}]
    assert [g["dag_id"] for g in view["grants"]] == ["ui_hold"]

    assert stack.wait_for_run("ui_region", region, timeout=600) == "success"
    assert stack.wait_for_run("ui_hold", holder, timeout=600) == "success"
    # the executor records a release when it reads the task's end, a moment after the run's state
    after = wait_until(lambda: _idle(client.get("/regionflow/api/cluster", headers=auth(stack)).json()), 60,
                       "every slot to be released")
    assert after["queue"] == [] and after["grants"] == []

    attempts = client.get(f"/regionflow/api/dags/ui_region/runs/{region}/attempts", headers=auth(stack)).json()
    ((task_id, task),) = attempts["tasks"].items()
    (attempt,) = task["attempts"]
    assert task_id == "source__count" and attempt["host"] == "localhost" and attempt["state"] == "succeeded"
    assert (attempts["run_state"], attempts["active"]) == ("success", False)  # the page stops refreshing
    assert attempt["winner"] and attempt["ended_at"] > attempt["started_at"]
    page = client.get(f"/regionflow/attempts?dag_id=ui_region&run_id={region}&task_id={task_id}",
                      headers=auth(stack))
    assert page.status_code == 200 and "regionflow: attempts" in page.text
    assert f"api/dags/ui_region/runs/{quote(region, safe='')}/attempts" in page.text
    assert "clearInterval(timer)" in page.text


def _queued(view):
    return view if view["queue"] else None


def _idle(view):
    return view if view["slots"]["used"] == 0 else None


def test_an_unknown_run_is_a_404_naming_it(stack, client):
    response = client.get("/regionflow/api/dags/ui_region/runs/no_such_run/attempts", headers=auth(stack))
    assert response.status_code == 404
    assert "DAG 'ui_region' run 'no_such_run'" in response.json()["detail"]


def test_the_cluster_page_is_html_reading_the_api(stack, client):
    page = client.get("/regionflow/cluster", headers=auth(stack))
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "regionflow: slot pool" in page.text and '"api/cluster"' in page.text
