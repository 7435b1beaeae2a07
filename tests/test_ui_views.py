"""The views the UI plugin and `regionflow status` show, read from a real (SQLite) store."""
from __future__ import annotations

import itertools

from regionflow.scheduling.blocklist import EVERY_JOB
from regionflow.scheduling.hosts import Cluster
from regionflow.store import RegionflowStore
from regionflow.ui.views import cluster_view, run_view

CLUSTER = Cluster.parse("a:slots=2;b:slots=2")


def store_at(tmp_path):
    ticks = itertools.count(1000)
    return RegionflowStore(f"sqlite:///{tmp_path / 'store.db'}", clock=lambda: float(next(ticks)))


def wait(store, bulk, dag, slots, run="r1"):
    store.record_waiting(bulk, dag_id=dag, run_id=run, task_id="t", try_number=1, label=f"{dag} region",
                         requests=[{}] * slots)


def test_the_queue_is_oldest_first_and_says_why_each_region_waits(tmp_path):
    store = store_at(tmp_path)
    wait(store, "g1", "holder", 3)
    store.record_granted("g1", [("a", 0), ("a", 1), ("b", 0)])
    wait(store, "w1", "first", 2)
    wait(store, "w2", "second", 1)
    wait(store, "w3", "huge", 5)
    store.block("blocked/r1", "a", 10**9, reason="slow attempt x")
    wait(store, "w4", "blocked", 3)
    view = cluster_view(store, CLUSTER, now=2000.0)
    assert [(h["name"], h["used"], h["free"]) for h in view["hosts"]] == [("a", 2, 0), ("b", 1, 1)]
    assert view["slots"] == {"total": 4, "used": 3, "free": 1}
    assert [q["dag_id"] for q in view["queue"]] == ["first", "second", "huge", "blocked"]
    why = {q["dag_id"]: q["why"] for q in view["queue"]}
    assert why["first"] == "not enough free slots: needs 2, 1 free"
    assert why["second"].startswith("behind 1 older request(s) in the FIFO queue")
    assert why["huge"] == "unfulfillable: needs 5 slots, the cluster has 4"
    assert why["blocked"].startswith("blocklisted: hosts a are blocked for this run")
    assert view["blocklist"] == [{"job_id": "blocked/r1", "host": "a", "reason": "slow attempt x",
                                  "expires_in_s": view["blocklist"][0]["expires_in_s"]}]
    assert [g["dag_id"] for g in view["grants"]] == ["holder"]


def test_dags_the_user_may_not_see_are_counted_not_shown(tmp_path):
    store = store_at(tmp_path)
    wait(store, "w1", "secret", 1)
    wait(store, "w2", "public", 1)
    view = cluster_view(store, CLUSTER, may_see=lambda dag_id: dag_id == "public", now=2000.0)
    assert [q["dag_id"] for q in view["queue"]] == ["public"] and view["queue"][0]["position"] == 2
    assert view["queue_hidden"] == 1


def test_a_lost_host_is_shown_to_every_user_and_blocks_every_waiting_run(tmp_path):
    store = store_at(tmp_path)
    store.block(EVERY_JOB, "a", 10**9, reason="host lost: the Spark Connect server is down")
    store.block("secret/r1", "b", 10**9, reason="slow attempt y")
    wait(store, "w1", "public", 3)
    view = cluster_view(store, CLUSTER, may_see=lambda dag_id: dag_id == "public", now=2000.0)
    assert [(b["job_id"], b["host"]) for b in view["blocklist"]] == [("*", "a")]  # not the hidden DAG's entry
    (waiting,) = view["queue"]
    assert waiting["blocked_hosts"] == ["a"] and waiting["why"].startswith("blocklisted: hosts a")


def test_an_empty_store_or_none_yet_gives_empty_views(tmp_path):
    for store in (store_at(tmp_path), None):
        view = cluster_view(store, CLUSTER, now=2000.0)
        assert view["queue"] == [] and view["grants"] == [] and view["slots"]["free"] == 4
        assert [(h["name"], h["free"]) for h in view["hosts"]] == [("a", 2), ("b", 2)]
        assert run_view(store, "d", "r")["tasks"] == {}


def test_the_plugin_opens_the_store_once_it_exists_not_before(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from regionflow.ui import app

    url = f"sqlite:///{tmp_path / 'later.db'}"
    monkeypatch.setattr(app, "_config", lambda: SimpleNamespace(store_url=url, cluster=CLUSTER))
    monkeypatch.setattr(app, "_stores", {})
    assert app._store() is None and not (tmp_path / "later.db").exists()  # a page creates no store
    RegionflowStore(url).create_all()  # the executor's first grant creates it
    assert app._store() is not None and app._store() is app._store()


def test_the_schedulers_sharing_the_pool_are_shown_with_their_heartbeat(tmp_path):
    from regionflow.cli.status import cluster_text

    store = store_at(tmp_path)
    store.register_scheduler("host1:10:aa", hostname="host1", pid=10)  # heartbeat at tick ~1000
    store.register_scheduler("host2:20:bb", hostname="host2", pid=20)  # 1002
    store.register_scheduler("gone:30:cc", hostname="gone", pid=30)
    store.end_scheduler("gone:30:cc", "stopped")
    view = cluster_view(store, CLUSTER, now=1020.0)
    assert [(s["scheduler_id"], s["state"]) for s in view["schedulers"]] == [
        ("host1:10:aa", "live"), ("host2:20:bb", "live")]
    later = cluster_view(store, CLUSTER, now=1031.0)
    assert [s["state"] for s in later["schedulers"]] == ["silent (taken over when seen)", "live"]
    assert "host2:20:bb: heartbeat 29 s ago, live" in cluster_text(later)
