"""The plan page's view (`regionflow.ui.plan_view`): the same plan as ``regionflow plan``, regions as
boxes with their columns, the exchange each edge gets, and region states of a run (no Airflow here)."""
from __future__ import annotations

import itertools
import json

import pytest

from regionflow.cli.plan import plan_output
from regionflow.core.errors import SpecError
from regionflow.core.graph import JobGraph
from regionflow.core.modes import ExchangeMode
from regionflow.core.plan import Plan
from regionflow.store import RegionflowStore
from regionflow.ui.plan_view import MAX_PLAN_SUBTASKS, SlotUse, TaskInstanceRow, plan_view, slot_use


def graph():
    g = JobGraph("orders")
    g.add_vertex("source", 4, fn="regionflow.examples.orders:generate_orders")
    g.add_vertex("clean", 4)
    g.add_vertex("count", 2)
    g.add_vertex("report", 1)
    g.connect("source", "clean", "FORWARD")
    g.connect("clean", "count", "HASH", keys=["customer_id"])
    g.connect("count", "report", "REBALANCE", exchange="PIPELINED")
    return g.validate()


def reference(mode="all-blocking"):
    return Plan(graph(), mode).reference


@pytest.mark.parametrize("mode", [m.value for m in ExchangeMode])
def test_the_plan_is_what_regionflow_plan_prints_for_every_mode(mode):
    view = plan_view(reference(), "orders", mode)
    assert view["plan"] == json.loads(plan_output(graph(), ExchangeMode.parse(mode), "json"))
    assert view["mode"] == mode and view["dag_mode"] == "all-blocking"
    assert view["preview"] is (mode != "all-blocking")


def test_regions_are_boxes_around_their_vertices_in_columns_and_edges_say_their_exchange():
    blocking = plan_view(reference(), "orders")
    assert [(r["task_id"], r["vertices"], r["column"]) for r in blocking["regions"]] == [
        ("source", ["source"], 0), ("clean", ["clean"], 1), ("count__report", ["count", "report"], 2)]
    assert [(e["src"], e["dst"], e["exchange"], e["declared"]) for e in blocking["edges"]] == [
        ("source", "clean", "blocking", False), ("clean", "count", "blocking", False),
        ("count", "report", "pipelined", True)]  # a declared exchange holds under every mode
    assert blocking["edges"][1]["keys"] == ["customer_id"]
    assert {v["name"]: v["region"] for v in blocking["vertices"]} == {"source": 0, "clean": 1, "count": 2,
                                                                       "report": 2}
    forward = plan_view(reference(), "orders", "forward-pipelined-only")
    assert [(r["vertices"], r["column"], r["execution_regions"]) for r in forward["regions"]] == [
        (["source", "clean"], 0, 4), (["count", "report"], 1, 1)]
    assert forward["regions"][0]["task_id"] == "source__clean"  # the task transform would make
    assert "state" not in forward["regions"][0]  # a preview has no tasks to show states of


def test_a_run_shows_each_region_state_timing_and_slots():
    rows = [TaskInstanceRow("source", 0, "success", 10.0, 12.0), TaskInstanceRow("source", 1, "success", 11.0, 15.0),
            TaskInstanceRow("clean", 0, "running", 16.0), TaskInstanceRow("clean", 1, "queued")]
    view = plan_view(reference(), "orders", run_id="r1", task_instances=rows,
                     slots={"clean": SlotUse(waiting=1, holding=1)})
    source, clean, last = view["regions"]
    assert (source["state"], source["started_at"], source["ended_at"]) == ("success", 10.0, 15.0)
    assert (clean["state"], clean["shards"], clean["ended_at"]) == ("mixed", {"queued": 1, "running": 1}, None)
    assert (clean["shards_waiting_for_slots"], clean["shards_holding_slots"]) == (1, 1)
    assert (last["state"], last["shards"]) == (None, {})  # not started yet
    preview = plan_view(reference(), "orders", "all-pipelined", run_id="r1", task_instances=rows)
    assert all("state" not in r for r in preview["regions"])


def test_an_adaptive_vertex_shows_its_range_and_in_a_run_the_value_its_region_was_decided(tmp_path):
    g = JobGraph("adaptive")
    g.add_vertex("scan", 2, fn="m:f")
    g.add_vertex("agg", (1, 8), fn="m:g", target_bytes_per_subtask=1 << 16)
    g.connect("scan", "agg", "hash", "blocking", keys=["k"])
    ref = Plan(g.validate(), "all-blocking").reference
    plain = plan_view(ref, "adaptive")
    assert {v["name"]: (v["range"], v["decided"]) for v in plain["vertices"]} == {"scan": (None, None),
                                                                                    "agg": ([1, 8], None)}
    store = RegionflowStore(f"sqlite:///{tmp_path}/s.db")
    store.record_decision("adaptive", "r1", "agg", {"agg": 6}, {"agg": (1, 8)}, 6, "6 shard(s)", 370_000)
    store.record_decision("adaptive", "r2", "agg", {"agg": 2}, {"agg": (1, 8)}, 2, "2 shard(s)", 90_000)
    run = plan_view(ref, "adaptive", run_id="r1", decisions=store.decisions("adaptive", "r1"))
    assert {v["name"]: v["decided"] for v in run["vertices"]} == {"scan": None, "agg": 6}
    scan, agg = run["regions"]
    assert scan["decision"] is None
    assert agg["decision"] == {"shards": 6, "input_bytes": 370_000, "reason": "6 shard(s)"}
    preview = plan_view(ref, "adaptive", "all-pipelined", run_id="r1", decisions=store.decisions("adaptive", "r1"))
    assert all(v["decided"] is None for v in preview["vertices"])  # another mode's plan: no run's decision


def test_slot_use_counts_the_runs_waiting_and_live_grants_only(tmp_path):
    ticks = itertools.count(1000)
    store = RegionflowStore(f"sqlite:///{tmp_path / 'store.db'}", clock=lambda: float(next(ticks)))
    for bulk, run, task in (("b1", "r1", "clean"), ("b2", "r1", "clean"), ("b3", "r2", "clean"), ("b4", "r1", "src")):
        store.record_waiting(bulk, dag_id="orders", run_id=run, task_id=task, try_number=1, label=bulk, requests=[{}])
    store.record_granted("b1", [("a", 0)])
    store.record_waiting("b5", dag_id="orders", run_id="r1", task_id="src", try_number=1, label="b5", requests=[{}])
    store.record_released("b5")  # released: neither waiting nor holding
    use = slot_use(store.grants(dag_id="orders", run_id="r1"))
    assert use == {"clean": SlotUse(waiting=1, holding=1), "src": SlotUse(waiting=1, holding=0)}


def test_a_bad_mode_names_the_modes_there_are():
    with pytest.raises(SpecError, match="unknown exchange mode 'fast'; use one of all-blocking"):
        plan_view(reference(), "orders", "fast")


def test_a_huge_plan_leaves_out_the_per_subtask_listing_and_says_where_to_get_it():
    g = JobGraph("big")
    g.add_vertex("a", MAX_PLAN_SUBTASKS)
    g.add_vertex("b", 10)
    g.connect("a", "b", "REBALANCE")
    view = plan_view(Plan(g.validate(), "all-blocking").reference, "big")
    assert view["plan"] is None and "airflow regionflow plan big --mode all-blocking" in view["plan_left_out"]
    assert view["region_count"] == MAX_PLAN_SUBTASKS + 10


def test_the_plan_of_a_dag_version_and_mode_is_built_once_across_refreshes():
    from regionflow.ui.plan_view import _planned

    ref = reference("pointwise-pipelined-only")
    ref["job"]["name"] = "built_once"  # a reference no other test has planned
    before = _planned.cache_info()
    first = plan_view(ref, "orders", run_id="r1")
    again = plan_view(json.loads(json.dumps(ref)), "orders", run_id="r2")  # an equal reference, another run
    after = _planned.cache_info()
    assert (after.misses - before.misses, after.hits - before.hits) == (1, 1)
    assert first["plan"] == again["plan"] and again["run_id"] == "r2"
