"""The UI plugin on a real api-server (embedded stack, RegionExecutor, 2 slots, session backend):
registered by the package's entry point, behind Airflow's auth, and showing the queue, the reason a
region waits, the plan and the attempts of a run; in JSON, and in headless Chromium (`tests/browser.py`),
which also saves the screenshots shown in docs/ui.md. Per-DAG 403s are in test_ui_access.py."""
from __future__ import annotations

import os
import shutil
import time
from urllib.parse import quote

import pytest

from regionflow.testing import EmbeddedAirflow

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
    with stack.http_client(anonymous=True) as http:  # each test says who it is (headers=auth(stack))
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
    assert views["regionflow-plan"]["destination"] == "dag" and "{DAG_ID}" in views["regionflow-plan"]["href"]
    assert views["regionflow-run-plan"]["destination"] == "dag_run"
    assert "run_id={RUN_ID}" in views["regionflow-run-plan"]["href"]


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


def test_the_plan_api_shows_regions_under_any_mode_and_names_bad_input(stack, client):
    own = client.get("/regionflow/api/dags/ui_region/plan", headers=auth(stack))
    assert own.status_code == 200, own.text
    view = own.json()
    assert (view["mode"], view["preview"]) == ("all-pipelined", False)
    assert [r["vertices"] for r in view["regions"]] == [["source", "count"]]
    assert view["regions"][0]["task_id"] == "source__count"  # the task the transform made
    assert [(e["src"], e["dst"], e["distribution"], e["exchange"], e["declared"]) for e in view["edges"]] == [
        ("source", "count", "HASH", "pipelined", False)]  # pipelined by the DAG's mode
    blocking = client.get("/regionflow/api/dags/ui_region/plan?mode=all-blocking", headers=auth(stack)).json()
    assert blocking["preview"] and blocking["dag_mode"] == "all-pipelined"
    assert blocking["plan"]["mode"] == "all-blocking" and blocking["edges"][0]["exchange"] == "blocking"
    assert [r["vertices"] for r in blocking["regions"]] == [["source"], ["count"]]
    bad = client.get("/regionflow/api/dags/ui_region/plan?mode=fast", headers=auth(stack))
    assert bad.status_code == 400 and "unknown exchange mode 'fast'" in bad.json()["detail"]
    assert bad.json()["detail"].startswith("mode: ")
    unknown = client.get("/regionflow/api/dags/no_such_dag/plan", headers=auth(stack))
    assert unknown.status_code == 404 and "DAG 'no_such_dag' has no regionflow plan" in unknown.json()["detail"]
    plain = client.get("/regionflow/api/dags/ui_hold/plan", headers=auth(stack))
    assert plain.status_code == 404 and "DAG 'ui_hold' has no regionflow plan" in plain.json()["detail"]
    no_run = client.get("/regionflow/api/dags/ui_region/plan?run_id=nope", headers=auth(stack))
    assert no_run.status_code == 404 and "DAG 'ui_region' has no run 'nope'" in no_run.json()["detail"]


def test_in_a_browser_the_pages_show_the_queue_a_blocklisted_host_and_the_plan(stack):
    """Logs in through Airflow's login page and opens the pages while two runs of ``ui_region`` wait
    for the slot ``ui_hold`` holds. The blocklist entry is written through the store's ``block()``, the
    call the speculation sensor makes for a slow host (a real slow host and the copies it causes are in
    test_e2e_speculation, which opens the attempts page the same way)."""
    from browser import log_in, screenshot, script_errors, start_browser, table_rows, wait_for
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    from regionflow.store import RegionflowStore, job_id_for

    browser = start_browser()
    try:
        log_in(browser, stack.api_url, "admin", stack.admin_password())
        holder = stack.trigger("ui_hold", conf={"seconds": 50})
        browser.get(f"{stack.api_url}/regionflow/cluster")
        wait_for(lambda: any(row[2] == "1" for row in table_rows(browser, "hosts")), 120,
                 "the holder to take one slot")
        first = stack.trigger("ui_region")
        wait_for(lambda: len(table_rows(browser, "queue")) == 1, 120, "the first run to wait")
        second = stack.trigger("ui_region")
        queue = wait_for(lambda: _two(table_rows(browser, "queue")), 120, "both runs to wait, in order")
        assert [(row[0], row[2]) for row in queue] == [("1", first), ("2", second)]
        assert queue[0][7].startswith("not enough free slots: needs 2, 1 free")
        assert queue[1][7].startswith("behind 1 older request(s)")

        store = RegionflowStore.from_config(f"sqlite:///{stack.home}/regionflow.db")
        store.block(job_id_for("ui_region", second), "localhost", time.time() + 30,
                    reason="slow attempt x of ui_region.source__count[0]")
        blocked = wait_for(lambda: table_rows(browser, "blocklist"), 30, "the blocklist entry on the page")
        assert blocked[0][:3] == ["localhost", f"ui_region/{second}", "slow attempt x of ui_region.source__count[0]"]
        wait_for(lambda: _two(table_rows(browser, "queue"))[1][7].startswith("blocklisted: hosts localhost"), 30,
                 "the second run's reason to name the blocklist")
        screenshot(browser, "cluster")
        assert script_errors(browser) == []

        browser.get(f"{stack.api_url}/regionflow/plan?dag_id=ui_region&run_id={quote(first)}")
        region = wait_for(lambda: browser.find_element(By.CSS_SELECTOR, ".region[data-task='source__count']"), 60,
                          "the region box")
        assert [v.get_attribute("data-vertex") for v in region.find_elements(By.CSS_SELECTOR, ".vertex")] == \
            ["source", "count"]  # all-pipelined: one box around both vertices
        assert len(browser.find_elements(By.CSS_SELECTOR, "#drawing svg line")) == 1
        wait_for(lambda: stack.wait_for_run("ui_region", first, timeout=600) == "success", 600, "the first run")
        wait_for(lambda: "success" in browser.find_element(By.CSS_SELECTOR, ".region .region-head").text, 30,
                 "the region's state to show success")
        screenshot(browser, "plan")
        assert script_errors(browser) == []
        Select(browser.find_element(By.ID, "mode")).select_by_value("all-blocking")
        boxes = wait_for(lambda: _boxes(browser, 2), 30, "two region boxes under all-blocking")
        assert boxes == [["source"], ["count"]]
        assert "preview" in browser.find_element(By.ID, "summary").text
        assert browser.find_element(By.CSS_SELECTOR, "#drawing svg line").get_attribute("stroke-dasharray")
        screenshot(browser, "plan-preview")

        assert stack.wait_for_run("ui_region", second, timeout=600) == "success"
        assert stack.wait_for_run("ui_hold", holder, timeout=600) == "success"
        browser.get(f"{stack.api_url}/regionflow/attempts?dag_id=ui_region&run_id={quote(second)}")
        attempts = wait_for(lambda: table_rows(browser, "attempts"), 60, "the attempts table")
        assert [(row[0], row[3], row[7], row[9]) for row in attempts] == [
            ("source__count", "localhost", "succeeded", "winner")]
        wait_for(lambda: "not refreshing" in browser.find_element(By.ID, "status").text, 30,
                 "the page to stop refreshing once the run has ended")
        assert script_errors(browser) == []
    finally:
        browser.quit()


def _two(rows):
    return rows if len(rows) == 2 else None


def _boxes(browser, count):
    from selenium.webdriver.common.by import By

    boxes = [[v.get_attribute("data-vertex") for v in box.find_elements(By.CSS_SELECTOR, ".vertex")]
             for box in browser.find_elements(By.CSS_SELECTOR, ".region")]
    return boxes if len(boxes) == count else None
