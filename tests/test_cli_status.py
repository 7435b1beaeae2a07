"""`regionflow status [DAG_ID RUN_ID]`: the slot pool; of a run: metrics, attempts (host, state, speculative,
winner), copies, blocklist, and the parallelism decided for the run beside the declared range."""
from __future__ import annotations

import json
import time

import pytest

from regionflow.cli import main
from regionflow.store import RegionflowStore


@pytest.fixture
def url(tmp_path):
    url = f"sqlite:///{tmp_path}/regionflow.db"
    store = RegionflowStore(url)
    store.start_attempt(attempt_id="try1-a", dag_id="d", run_id="r", task_id="t", unit_key="u0", host="h2",
                        map_index=0)
    store.end_attempt("try1-a", "succeeded")
    store.start_attempt(attempt_id="try1-b", dag_id="d", run_id="r", task_id="t", unit_key="u1", host="h1",
                        map_index=1)
    store.start_attempt(attempt_id="spec1-c", dag_id="d", run_id="r", task_id="t", unit_key="u1", host="h2",
                        map_index=1, speculative=True)
    store.end_attempt("spec1-c", "succeeded")
    store.end_attempt("try1-b", "lost_commit")
    store.record_commit("d", "r", "u0", "try1-a")
    store.record_commit("d", "r", "u1", "spec1-c")
    store.record_metrics("d", "r", "t", {"regionflow.speculation.copies_won": 1.0,
                                         "regionflow.speculation.finished_shards": 2.0})
    request = store.request_copy(dag_id="d", run_id="r", task_id="t", map_index=1, unit_key="u1", label="t[1]",
                                 requests=[{"cpu": 1}], template_path="/x", excluded_hosts=["h1"])
    store.mark_copy(request.request_id, "granted", host="h2")
    store.mark_copy(request.request_id, "running", attempt_id="spec1-c")
    store.mark_copy(request.request_id, "won")
    store.block("d/r", "h1", time.time() + 60, reason="slow attempt try1-b")
    store.record_decision("d", "r", "t", {"agg": 6, "post": 3}, {"agg": (1, 8), "post": (1, 4)}, 6,
                          "agg=6, post=3 for 370000 bytes: 6 shard(s)", 370_000)
    store.record_decision("d", "other", "t", {"agg": 2}, {"agg": (1, 8)}, 2, "2 shard(s)", 1)
    return url


def test_json(url, capsys):
    assert main(["status", "d", "r", "--store-url", url, "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    task = data["tasks"]["t"]
    assert task["metrics"] == {"copies_won": 1.0, "finished_shards": 2.0}
    by_id = {a["attempt"]: a for a in task["attempts"]}
    assert by_id["spec1-c"]["winner"] and by_id["spec1-c"]["speculative"] and by_id["spec1-c"]["host"] == "h2"
    assert not by_id["try1-b"]["winner"] and by_id["try1-b"]["state"] == "lost_commit"
    assert by_id["try1-a"]["winner"]
    assert task["copies"][0]["state"] == "won" and task["copies"][0]["excluded_hosts"] == ["h1"]
    assert data["blocklist"][0]["host"] == "h1"
    decision = data["decisions"]["t"]  # this run's, not another run's
    assert decision["vertices"] == {"agg": {"range": [1, 8], "decided": 6}, "post": {"range": [1, 4], "decided": 3}}
    assert (decision["shards"], decision["input_bytes"]) == (6, 370_000) and "6 shard(s)" in decision["reason"]


def test_text(url, capsys):
    assert main(["status", "d", "r", "--store-url", url]) == 0
    out = capsys.readouterr().out
    assert "copies_won = 1" in out
    assert "[1] spec1-c on h2: succeeded" in out and "speculative WINNER" in out
    assert "[1] try1-b on h1: lost_commit" in out
    assert "copy request 1 for shard 1: won as spec1-c on h2 (avoiding h1)" in out
    assert "h1 for" in out and "slow attempt try1-b" in out
    assert ("t: decided for this run: agg=6 (range 1-8), post=3 (range 1-4); 6 shard(s), 370000 bytes read"
            in out.splitlines())


def test_a_run_whose_only_record_is_a_decision_shows_it(tmp_path, capsys):
    url = f"sqlite:///{tmp_path}/regionflow.db"
    RegionflowStore(url).record_decision("d", "r", "agg", {"agg": 2}, {"agg": (1, 8)}, 2, "2 shard(s)", None)
    assert main(["status", "d", "r", "--store-url", url]) == 0
    assert "agg: decided for this run: agg=2 (range 1-8); 2 shard(s)" in capsys.readouterr().out.splitlines()


def test_unknown_run_is_an_error(url, capsys):
    assert main(["status", "d", "nope", "--store-url", url]) == 2
    assert "nothing for DAG 'd' run 'nope'" in capsys.readouterr().err


def test_without_a_run_it_shows_the_slot_pool_of_the_hosts(url, capsys):
    store = RegionflowStore(url)
    store.record_waiting("g1", dag_id="d", run_id="r", task_id="t", try_number=1, label="t[0]", requests=[{}] * 2,
                         map_index=0)
    store.record_granted("g1", [("a", 0), ("b", 0)])
    store.record_waiting("w1", dag_id="d", run_id="r2", task_id="t", try_number=2, label="t", requests=[{}] * 3)
    assert main(["status", "--store-url", url, "--hosts", "a:slots=2;b:slots=1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"slot pool: 3 slots, 2 used, 1 free (store {url})\nhosts:\n"
                          "  a: 1/2 slots used, 1 free, slot [cpu=1,heap=1024MiB] on local[2]\n"
                          "  b: 1/1 slots used, 0 free, slot [cpu=1,heap=1024MiB] on local[1]\n"
                          "queue (FIFO, oldest first):\n  1. d/r2 t try 2 wants 3 slot(s), waiting "), out
    assert "s: not enough free slots: needs 3, 1 free\n" in out
    assert "blocklist:\n  h1 for run d/r, " in out
    assert "grants:\n  DAG d run r:\n    d/r t[0] try 1: 2 slot(s) on a, b" in out
    assert main(["status", "--store-url", url, "--hosts", "a:slots=2;b:slots=2", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["slots"] == {"total": 4, "used": 2, "free": 2} and [q["bulk_id"] for q in data["queue"]] == ["w1"]


def test_without_a_store_yet_the_pool_is_empty_and_no_store_is_created(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("AIRFLOW__REGIONFLOW__HOSTS", "x:slots=3")
    url = f"sqlite:///{tmp_path}/none.db"
    assert main(["status", "--store-url", url]) == 0
    assert capsys.readouterr().out.splitlines()[:3] == [
        f"slot pool: 3 slots, 0 used, 3 free (store {url}, not created yet: nothing has run)", "hosts:",
        "  x: 0/3 slots used, 3 free, slot [cpu=1,heap=1024MiB] on local[3]"]
    assert not (tmp_path / "none.db").exists()


def test_a_dag_id_without_a_run_id_is_an_error(url, capsys):
    assert main(["status", "d", "--store-url", url]) == 2
    assert "give both DAG_ID and RUN_ID" in capsys.readouterr().err
