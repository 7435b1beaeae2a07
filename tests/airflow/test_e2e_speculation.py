"""Speculative execution end to end: a real Airflow stack, real Spark local[1] submissions on two hosts
pinned to different cores, and CPU hogs on the core of the host where the first shard started (see
`SlowHost`) until a copy has won, so that host is really slow, not sleeping.
The slow host's shard is copied to the other host, the copy commits first, the output equals the reference, the
sink holds exactly one part file per subtask, and the blocklist entry expires afterwards."""
from __future__ import annotations

import os
import shutil
import threading
import time

import pytest

from regionflow.store import RegionflowStore, job_id_for
from regionflow.testing import EmbeddedAirflow
from regionflow.testing.slow_host import CpuHogs
from regionflow.units.dags import dag_run_outputs

DAGS = os.path.join(os.path.dirname(__file__), "dags_speculation")
DAG_ID = "orders_speculation"
SPECULATED_TASK = "orders__clean"  # the 4-shard source region task
HOSTS = {"a": 0, "b": 1}  # host -> the core it is pinned to
BLOCKLIST_EXPIRY_S = 20
# long (tests/conftest.py): ~8 min here, a dozen spark-submits with a core hogged; `make test` covers speculation with
# tests/speculation/, tests/scheduling/test_speculation.py and tests/airflow/test_executor_copies.py
pytestmark = [pytest.mark.timeout(1500), pytest.mark.long,
              pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPU cores")]


class SlowHost(threading.Thread):
    """Slows down the host where the speculated region's first shard starts, until a copy has won.

    Choosing the host from the first attempt (rather than up front) puts a multi-shard region on the
    slow host for sure: a single-shard region there (products) has no siblings to compare with, so
    nothing could speculate it. Hogs: 2 at nice -10 in their own sessions (see regionflow.testing.slow_host),
    about 20x slower on that core. Once a copy has won the host recovers, so later regions run at
    full speed and the test stays short.
    """

    def __init__(self, store_url: str, run_id: str) -> None:
        super().__init__(daemon=True)
        self.store_url, self.run_id = store_url, run_id
        self.host: str | None = None
        self.hogs: CpuHogs | None = None
        self.done = threading.Event()

    def run(self) -> None:
        store = RegionflowStore.from_config(self.store_url)
        while self.host is None and not self.done.wait(0.5):
            first = [a for a in store.attempts(DAG_ID, self.run_id, SPECULATED_TASK) if not a.speculative]
            if first:
                self.host = min(first, key=lambda a: a.started_at).host
                self.hogs = CpuHogs([HOSTS[self.host]], count=2, nice=-10).start()
        while not self.done.wait(2):
            if any(c.state.value == "won" for c in store.copy_requests(DAG_ID, self.run_id)):
                break
        self.stop()

    def stop(self) -> None:
        self.done.set()
        if self.hogs is not None:
            self.hogs.stop()


def test_the_copy_of_the_slow_hosts_shard_wins(tmp_path, orders_reference):
    dags = tmp_path / "dags"
    shutil.copytree(DAGS, dags)
    data_dir = str(tmp_path / "data")
    hosts = ";".join(f"{host}:slots=1,affinity={core}" for host, core in HOSTS.items())
    options = {"hosts": hosts, "max_shards": "4", "data_dir": data_dir, "blocklist_expiry": str(BLOCKLIST_EXPIRY_S),
               "backend": "submit"}
    airflow = EmbeddedAirflow(str(tmp_path / "home"), str(dags), regionflow_options=options)
    airflow.start()
    store_url = f"sqlite:///{tmp_path / 'home' / 'regionflow.db'}"
    slow_host: SlowHost | None = None
    try:
        airflow.wait_for_dag(DAG_ID)
        airflow.unpause(DAG_ID)
        run_id = airflow.trigger(DAG_ID)
        slow_host = SlowHost(store_url, run_id)
        slow_host.start()
        state = airflow.wait_for_run(DAG_ID, run_id, timeout=1200)
        slow_host.stop()
        slow, healthy = slow_host.host, next(host for host in HOSTS if host != slow_host.host)
        store = RegionflowStore.from_config(store_url)
        deadline = time.time() + 60  # a losing copy is killed within a watcher tick of the commit
        while any(c.is_open for c in store.copy_requests(DAG_ID, run_id)) and time.time() < deadline:
            time.sleep(1)
        attempts = store.attempts(DAG_ID, run_id)
        copies = store.copy_requests(DAG_ID, run_id)
        summary = "\n".join(f"{a.task_id}[{a.map_index}] {a.attempt_id} on {a.host}: {a.state} "
                            f"{a.duration_s and round(a.duration_s, 1)} s{' (copy)' if a.speculative else ''}"
                            for a in attempts) + "\n" + "\n".join(
            f"copy {c.request_id} {c.task_id}[{c.map_index}]: {c.state} {c.host} {c.message}" for c in copies)
        assert state == "success", summary + "\n" + airflow.log_tails()
        # a copy of a shard that ran on the slow host won; the copy ran on b; its original lost
        winners = {c.unit_key: c.winner_attempt for c in store.commits(DAG_ID, run_id)}
        won = [a for a in attempts if a.speculative and winners.get(a.unit_key) == a.attempt_id]

        def slow_host_original_lost(copy) -> bool:
            originals = [a for a in attempts if a.unit_key == copy.unit_key and not a.speculative]
            return bool(originals) and all(a.host == slow and a.state in ("lost_commit", "killed", "failed")
                                           for a in originals)

        assert any(copy.host == healthy and slow_host_original_lost(copy) for copy in won), \
            f"no copy on {healthy} beat a slow original on {slow}:\n" + summary
        for copy in won:  # whoever won, its unit has no other winner
            assert [a for a in attempts if a.unit_key == copy.unit_key and a.state == "succeeded"] == [copy], summary
        assert all(c.state.value in ("won", "lost", "failed", "cancelled") for c in copies), summary
        # every unit has exactly one winner and the output equals the reference
        layout, partitions = dag_run_outputs(os.path.join(str(dags), "rf_speculation.py"), DAG_ID, run_id, data_dir, 4)
        assert all(partitions.committed(key) is not None for key in layout.keys)
        figures = layout.sink_figures(partitions, data_dir)["totals"]
        assert (figures["rows"], figures["checksum"]) == (orders_reference["rows"], orders_reference["checksum"])
        files = sorted(name for name in os.listdir(figures["path"]) if not name.startswith(("_", ".")))
        assert files == [f"part-{subtask:05d}.parquet" for subtask in range(4)], files
        # the UI plugin's attempts page, in a browser, shows the copy that won and the state of every copy
        attempts_page_shows(airflow, run_id, {a.attempt_id for a in won}, {c.request_id: c.state.value for c in copies})
        # the blocklist entry of the slow host expires
        job = job_id_for(DAG_ID, run_id)
        assert any(c.excluded_hosts and slow in c.excluded_hosts for c in copies)
        deadline = time.time() + BLOCKLIST_EXPIRY_S + 10
        while store.active_blocks(job_id=job) and time.time() < deadline:
            time.sleep(1)
        assert store.active_blocks(job_id=job) == []
        print(summary)
    finally:
        if slow_host is not None:
            slow_host.stop()
        airflow.stop()


def attempts_page_shows(airflow: EmbeddedAirflow, run_id: str, winners: set[str], copies: dict[int, str]) -> None:
    """Logs in to the stack's Airflow UI with headless Chromium and opens the plugin's tab of the speculated
    task instance: its timeline draws each winning copy as a speculative bar linked to the attempt it
    copied (a slower original, crossed where the winner ended it), on another slot; its attempts table
    marks the copy speculative and winner; each copy request shows its state (won, lost, cancelled, failed).
    Saves the page as ``build/screenshots/speculation-timeline.png`` (docs/ui.md shows it)."""
    from urllib.parse import quote

    from browser import log_in, screenshot, script_errors, start_browser, table_rows, wait_for
    from selenium.webdriver.common.by import By

    browser = start_browser()
    try:
        log_in(browser, airflow.api_url, "admin", airflow.admin_password())
        # the tab of shard 0's task instance (the task is mapped: a task instance per shard); it shows every shard
        browser.get(f"{airflow.api_url}/dags/{DAG_ID}/runs/{quote(run_id, safe='')}/tasks/{SPECULATED_TASK}"
                    f"/mapped/0/plugin/regionflow-attempts")
        rows = wait_for(lambda: table_rows(browser, "attempts"), 60, "the attempts table")
        shown_winners = {row[2] for row in rows if row[8] == "speculative" and row[9] == "winner"}
        assert shown_winners == winners, rows
        shown_copies = wait_for(lambda: table_rows(browser, "copies"), 30, "the copies table")
        assert {int(row[2]): row[3] for row in shown_copies} == copies, shown_copies
        for winner in winners:
            bars = browser.find_elements(By.CSS_SELECTOR, f"#timeline g.bar-attempt[data-attempt='{winner}']")
            assert bars and all(b.get_attribute("data-speculative") == "true" and
                                b.get_attribute("data-winner") == "true" for b in bars), winner
            original = bars[0].get_attribute("data-original")
            assert original and original not in winners
            originals = browser.find_elements(By.CSS_SELECTOR, f"#timeline g.bar-attempt[data-attempt='{original}']")
            assert originals and originals[0].get_attribute("data-state") in ("lost_commit", "killed", "failed")
            assert {(b.get_attribute("data-host"), b.get_attribute("data-slot")) for b in bars}.isdisjoint(
                {(b.get_attribute("data-host"), b.get_attribute("data-slot")) for b in originals})
            assert browser.find_elements(By.CSS_SELECTOR, f"#timeline path.copy-link[data-to='{winner}']"
                                                          f"[data-from='{original}']")
        assert "No Task Instance found" not in browser.find_element(By.TAG_NAME, "body").text
        assert script_errors(browser) == []
        screenshot(browser, "speculation-timeline")
    finally:
        browser.quit()
