"""The UI plugin on a real api-server (embedded stack, RegionExecutor, 2 slots, session backend):
registered by the package's entry point as React apps inside Airflow's UI, behind Airflow's auth, and
showing the queue, the reason a region waits, occupancy over time, the plan (TPC-H Q9's at real size)
and a run's timeline; in JSON, and in headless Chromium (`tests/browser.py`) on Airflow's own pages,
which also saves the screenshots shown in docs/ui.md. Per-DAG 403s are in test_ui_access.py; the
timeline of a speculative copy is in test_e2e_speculation.py."""
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
        for dag_id in ("ui_tpch_q9", "ui_wide"):
            airflow.wait_for_dag(dag_id)  # drawn, never run
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


def test_the_plugin_registers_its_react_apps_and_serves_their_bundle(stack, client):
    plugins = client.get("/api/v2/plugins", headers=auth(stack)).json()["plugins"]
    (plugin,) = [p for p in plugins if p["name"] == "regionflow"]
    apps = {app["url_route"]: app for app in plugin["react_apps"]}
    assert {route: app["destination"] for route, app in apps.items()} == {
        "regionflow-slot-pool": "nav", "regionflow-plan": "dag", "regionflow-run-plan": "dag_run",
        "regionflow-timeline": "dag_run", "regionflow-attempts": "task_instance"}
    assert apps["regionflow-slot-pool"]["category"] == "browse"
    assert {app["bundle_url"] for app in apps.values()} == {"/regionflow/static/regionflow.js"}
    bundle = client.get("/regionflow/static/regionflow.js", headers=auth(stack))
    assert bundle.status_code == 200 and bundle.headers["content-type"].startswith("text/javascript")
    for app in apps.values():  # the bundle registers a component under each app's name (ui/src/main.tsx)
        assert f'"{app["name"]}"' in bundle.text, app["name"]


@pytest.mark.parametrize("path", ["/regionflow/api/cluster", "/regionflow/api/cluster/history",
                                  "/regionflow/api/dags/ui_region/runs/r/attempts",
                                  "/regionflow/api/dags/ui_region/runs/r/timeline",
                                  "/regionflow/static/regionflow.js"])
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

    timeline = client.get(f"/regionflow/api/dags/ui_region/runs/{quote(region, safe='')}/timeline",
                          headers=auth(stack)).json()
    assert timeline["rows"] == [{"host": "localhost", "slot": 0}, {"host": "localhost", "slot": 1}]
    assert (timeline["run_state"], timeline["active"]) == ("success", False)
    (wait,) = [bar for bar in timeline["bars"] if bar["kind"] == "wait"]
    ran = [bar for bar in timeline["bars"] if bar["kind"] == "attempt"]
    assert sorted((bar["host"], bar["slot"]) for bar in ran) == [("localhost", 0), ("localhost", 1)]
    assert {bar["attempt"] for bar in ran} == {attempt["attempt"]} and all(bar["winner"] for bar in ran)
    # it waited behind the holder: its wait ends when it got the slots, before its attempt started
    assert wait["end"] - wait["start"] > 1 and wait["end"] <= ran[0]["start"]

    history = client.get("/regionflow/api/cluster/history?hours=1", headers=auth(stack)).json()
    steps = _steps(history["occupancy"]["localhost"], history["until"])
    assert any(value == 2 and start <= ran[0]["start"] and ran[0]["end"] <= end for start, end, value in steps)
    assert any(value >= 1 for _, _, value in _steps(history["queue"], history["until"]))
    bad = client.get("/regionflow/api/cluster/history?hours=0", headers=auth(stack))
    assert bad.status_code == 400 and "hours" in bad.json()["detail"]


def _steps(series, until):
    """(start, end, value) of a step series ([[t, value], ...], each value holding until the next t)."""
    return [(t, series[i + 1][0] if i + 1 < len(series) else until, value) for i, (t, value) in enumerate(series)]


def _queued(view):
    return view if view["queue"] else None


def _idle(view):
    return view if view["slots"]["used"] == 0 else None


def test_an_unknown_run_is_a_404_naming_it(stack, client):
    response = client.get("/regionflow/api/dags/ui_region/runs/no_such_run/attempts", headers=auth(stack))
    assert response.status_code == 404
    assert "DAG 'ui_region' run 'no_such_run'" in response.json()["detail"]
    response = client.get("/regionflow/api/dags/ui_region/runs/no_such_run/timeline", headers=auth(stack))
    assert response.status_code == 404 and "DAG 'ui_region' has no run 'no_such_run'" in response.json()["detail"]


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


def test_in_a_browser_the_pages_show_the_queue_occupancy_the_plan_and_the_timeline(stack):
    """Logs in through Airflow's login page and opens the plugin's pages inside Airflow's UI while two
    runs of ``ui_region`` wait for the slot ``ui_hold`` holds. The blocklist entry is written through the
    store's ``block()``, the call the speculation sensor makes for a slow host (a real slow host and the
    copies it causes are in test_e2e_speculation, which opens the task instance's tab the same way)."""
    from browser import log_in, screenshot, script_errors, start_browser, table_rows, wait_for
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    from regionflow.store import RegionflowStore, job_id_for

    store = RegionflowStore.from_config(f"sqlite:///{stack.home}/regionflow.db")
    browser = start_browser()
    try:
        log_in(browser, stack.api_url, "admin", stack.admin_password())
        browser.get(f"{stack.api_url}/")  # Airflow's navigation: Browse > regionflow slot pool
        wait_for(lambda: browser.find_element(By.XPATH, "//button[normalize-space(.)='Browse']"), 60,
                 "Airflow's navigation").click()
        wait_for(lambda: browser.find_element(By.XPATH, "//*[@role='menuitem'][contains(., 'regionflow slot pool')]"),
                 30, "the slot pool in the Browse menu").click()
        wait_for(lambda: browser.current_url.endswith("/plugin/regionflow-slot-pool"), 30, "the slot pool page")
        holder = stack.trigger("ui_hold", conf={"seconds": 40})
        wait_for(lambda: any(row[2] == "1" for row in table_rows(browser, "hosts")), 120,
                 "the holder to take one slot")
        first = stack.trigger("ui_region")
        wait_for(lambda: len(table_rows(browser, "queue")) == 1, 120, "the first run to wait")
        second = stack.trigger("ui_region")
        queue = wait_for(lambda: _two(table_rows(browser, "queue")), 120, "both runs to wait, in order")
        assert [(row[0], row[2]) for row in queue] == [("1", first), ("2", second)]
        assert queue[0][7].startswith("not enough free slots: needs 2, 1 free")
        assert queue[1][7].startswith("behind 1 older request(s)")
        assert browser.find_element(By.ID, "oldest").text.startswith("oldest waiting: ui_region")
        position = browser.find_element(By.CSS_SELECTOR, "#queue th")  # sort by "#": ascending, then descending
        position.click()
        position.click()
        assert [row[0] for row in table_rows(browser, "queue")] == ["2", "1"]
        assert position.get_attribute("aria-sort") == "descending"
        position.click()

        store.block(job_id_for("ui_region", second), "localhost", time.time() + 30,
                    reason="slow attempt x of ui_region.source__count[0]")
        blocked = wait_for(lambda: table_rows(browser, "blocklist"), 30, "the blocklist entry on the page")
        assert blocked[0][:3] == ["localhost", f"ui_region/{second}", "slow attempt x of ui_region.source__count[0]"]
        wait_for(lambda: _two(table_rows(browser, "queue"))[1][7].startswith("blocklisted: hosts localhost"), 30,
                 "the second run's reason to name the blocklist")
        screenshot(browser, "cluster")
        assert script_errors(browser) == []

        # the plan at real size: TPC-H Q9's 10 vertices laid out left to right, no box over another
        browser.get(f"{stack.api_url}/dags/ui_tpch_q9/plugin/regionflow-plan")
        wait_for(lambda: len(browser.find_elements(By.CSS_SELECTOR, "#drawing g.vertex")) == 10, 60,
                 "Q9's ten vertices")
        vertices = _rects(browser, "#drawing g.vertex > rect")
        regions = _rects(browser, "#drawing g.region > rect")
        assert len(regions) == 10 and _overlaps(vertices) == [] and _overlaps(regions) == []
        edges = browser.find_elements(By.CSS_SELECTOR, "#drawing g.edge")
        assert len(edges) == 9 and {e.get_attribute("data-exchange") for e in edges} == {"blocking"}
        assert all(e.find_element(By.TAG_NAME, "path").get_attribute("stroke-dasharray") for e in edges)
        screenshot(browser, "plan-tpch-q9")
        Select(browser.find_element(By.ID, "mode")).select_by_value("all-pipelined")
        wait_for(lambda: len(_rects(browser, "#drawing g.region > rect")) == 1, 30, "one region when all-pipelined")
        assert "preview" in browser.find_element(By.ID, "summary").text
        assert script_errors(browser) == []

        # a plan too big to draw is summarized per region
        browser.get(f"{stack.api_url}/dags/ui_wide/plugin/regionflow-plan")
        summary = wait_for(lambda: table_rows(browser, "region-summary"), 60, "the region summary")
        assert [row[2:4] for row in summary] == [["90", "90"]]  # one region: 90 vertices, 90 subtasks
        assert "90 vertices are more than 80 to draw" in browser.find_element(By.ID, "drawing-summary").text
        assert not browser.find_elements(By.CSS_SELECTOR, "#drawing g.vertex")

        # the plan of a run: one region around both vertices, its box in the run's state
        browser.get(f"{stack.api_url}/dags/ui_region/runs/{quote(first, safe='')}/plugin/regionflow-run-plan")
        region = wait_for(lambda: browser.find_element(By.CSS_SELECTOR, "#drawing g.region[data-task='source__count']"),
                          60, "the region box")
        members = browser.find_elements(By.CSS_SELECTOR, "#drawing g.vertex[data-region='0']")
        assert sorted(v.get_attribute("data-vertex") for v in members) == ["count", "source"]
        assert stack.wait_for_run("ui_region", first, timeout=600) == "success"
        wait_for(lambda: region.get_attribute("data-state") == "success", 30, "the region's state to show success")
        screenshot(browser, "plan")
        assert script_errors(browser) == []

        assert stack.wait_for_run("ui_region", second, timeout=600) == "success"
        assert stack.wait_for_run("ui_hold", holder, timeout=600) == "success"
        # the run's timeline: its wait, then its attempt on both slots, under the blocklist band
        browser.get(f"{stack.api_url}/dags/ui_region/runs/{quote(second, safe='')}/plugin/regionflow-timeline")
        bars = wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, "#timeline g.bar-attempt"), 60, "the bars")
        assert sorted((b.get_attribute("data-host"), b.get_attribute("data-slot")) for b in bars) == [
            ("localhost", "0"), ("localhost", "1")]
        states = {(b.get_attribute("data-state"), b.get_attribute("data-winner")) for b in bars}
        assert states == {("succeeded", "true")}
        (wait,) = browser.find_elements(By.CSS_SELECTOR, "#timeline g.bar-wait")
        assert float(wait.get_attribute("data-end")) <= float(bars[0].get_attribute("data-start"))
        assert len(browser.find_elements(By.CSS_SELECTOR, "#timeline rect.block[data-host='localhost']")) == 2
        ActionChains(browser).move_to_element(bars[0]).perform()
        hovered = wait_for(lambda: browser.find_element(By.ID, "hovered").text, 10, "the hovered bar's details")
        assert "source__count[0]" in hovered and "2 slot(s)" in hovered and "succeeded" in hovered
        screenshot(browser, "timeline")
        narrow = browser.find_element(By.CSS_SELECTOR, "#timeline svg[data-zoom]").get_attribute("width")
        browser.find_element(By.CSS_SELECTOR, "#timeline button[data-zoom='4']").click()
        wide = wait_for(lambda: browser.find_element(By.CSS_SELECTOR, "#timeline svg[data-zoom='4']"), 10, "zoom")
        # four times as wide (less a scrollbar's width: the wider chart may add the page's)
        assert 3.8 * float(narrow) < float(wide.get_attribute("width")) <= 4 * float(narrow)
        wait_for(lambda: "not refreshing" in browser.find_element(By.ID, "status").text, 30,
                 "the page to stop refreshing once the run has ended")
        assert script_errors(browser) == []

        # occupancy over time: both slots in use over each region attempt, from the store's grant rows
        browser.get(f"{stack.api_url}/plugin/regionflow-slot-pool")
        steps = wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, "[data-chart='host:localhost'] rect.step"),
                         60, "the occupancy chart")
        drawn = [(float(s.get_attribute("data-from")), float(s.get_attribute("data-to")),
                  int(s.get_attribute("data-value"))) for s in steps]
        granted = [g for run in (first, second) for g in store.grants(dag_id="ui_region", run_id=run) if g.granted_at]
        assert len(granted) == 2
        for grant in granted:
            assert any(value == 2 and start <= grant.granted_at + 1e-3 and grant.released_at - 1e-3 <= end
                       for start, end, value in drawn), (grant, drawn)
        queued = [int(s.get_attribute("data-value")) for s in
                  browser.find_elements(By.CSS_SELECTOR, "[data-chart='queue'] rect.step")]
        assert max(queued) == 2  # both runs waited at once

        # dark mode, as Airflow's user menu sets it (next-themes' "theme" in local storage)
        browser.execute_script("window.localStorage.setItem('theme', 'dark')")
        browser.get(f"{stack.api_url}/dags/ui_tpch_q9/plugin/regionflow-plan")
        wait_for(lambda: len(browser.find_elements(By.CSS_SELECTOR, "#drawing g.vertex")) == 10, 60, "the plan")
        assert "dark" in browser.find_element(By.TAG_NAME, "html").get_attribute("class")
        ink = browser.execute_script(
            "return getComputedStyle(document.querySelector('#drawing g.vertex text')).fill")
        assert _lightness(ink) > 0.6, ink  # light text on a dark page
        screenshot(browser, "plan-dark")
        assert script_errors(browser) == []
    finally:
        browser.quit()


def _two(rows):
    return rows if len(rows) == 2 else None


def _rects(browser, selector):
    return browser.execute_script(
        "return [...document.querySelectorAll(arguments[0])].map(e => {"
        " const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; })", selector)


def _overlaps(rects):
    """Pairs of rectangles ([left, top, right, bottom]) that overlap (touching edges do not)."""
    return [(a, b) for i, a in enumerate(rects) for b in rects[i + 1:]
            if a[0] < b[2] - 0.5 and b[0] < a[2] - 0.5 and a[1] < b[3] - 0.5 and b[1] < a[3] - 0.5]


def _lightness(color):
    """0 (black) to 1 (white) of a CSS rgb()/rgba() colour."""
    import re

    red, green, blue = (int(v) for v in re.findall(r"\d+", color)[:3])
    return (max(red, green, blue) + min(red, green, blue)) / 510
