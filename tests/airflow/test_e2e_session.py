"""The session backend through Airflow: region tasks run as client sessions on the host's long-lived
Spark Connect server (started by the embedded stack, as `regionflow session start` would), give the
reference checksum in every mode, the pool's scheduling holds through Airflow (FIFO, no starvation, a
region bigger than the cluster fails at once), a stopped server is started by the next region task and a
silent one fails it as a lost host, and run after run leaves no partition on disk. On the stack these modules
share (shared_stack.py: one host of 4 slots, elastic_wait 2 s, partition_retention 0)."""
import glob
import json
import os
import re
from urllib.parse import quote

import pytest
from e2e_runs import DAGS, MODES, run, task_log_file, times
from shared_stack import ModuleStack
from stopping import pause_group, resume_group

from regionflow.cli import main
from regionflow.cli.status import status_output
from regionflow.core.adaptive import decided_plan
from regionflow.core.graph import load_dag_file_job
from regionflow.processes import wait_until
from regionflow.spark.data.store import PartitionStore, run_key_for
from regionflow.store import RegionflowStore
from regionflow.units.dags import dag_run_outputs
from regionflow.units.layout import UnitLayout

pytestmark = pytest.mark.timeout(1200)
SESSION_DAGS = os.path.join(os.path.dirname(__file__), "dags_session")


@pytest.fixture(scope="module")
def stack(shared_stack, request):
    dag_files = {name: os.path.join(DAGS, name) for name in ("rf_modes.py", "rf_disk.py", "rf_scheduling.py")}
    dag_files |= {name: os.path.join(SESSION_DAGS, name) for name in ("rf_early_shards.py", "rf_adaptive.py")}
    with shared_stack.module(request.node.nodeid, ModuleStack(dag_files)) as airflow:
        yield airflow


def test_every_mode_gives_the_reference_checksum_on_the_session_backend(stack, orders_reference):
    assert [status.state for status in stack.session_servers.status()] == ["up"]
    runs = {"orders_" + mode.replace("-", "_"): None for mode in MODES}
    for dag_id in runs:
        runs[dag_id] = run(stack, dag_id)
    for dag_id, run_id in runs.items():
        assert stack.wait_for_run(dag_id, run_id, timeout=600) == "success", dag_id
    data_dir = stack.regionflow_options["data_dir"]
    store = RegionflowStore.from_config(f"sqlite:///{stack.home}/regionflow.db")
    for dag_id, run_id in runs.items():
        layout, partitions = dag_run_outputs(os.path.join(stack.dags_folder, "rf_modes.py"), dag_id, run_id,
                                             data_dir, 1)
        figures = layout.sink_figures(partitions, data_dir)["totals"]
        assert (figures["rows"], figures["checksum"]) == (orders_reference["rows"], orders_reference["checksum"])
        attempts = store.attempts(dag_id, run_id)
        assert attempts and all(a.state.value == "succeeded" for a in attempts)
        # every blocking partition was released once its consumers committed (partition_retention = 0)
        left = [path for path in glob.glob(os.path.join(partitions.units_dir, "*", "e*")) if os.path.isdir(path)]
        assert left == [], (dag_id, left)
    # consumers of blocking edges recorded the bytes they read (the speculation sensor weights by them)
    blocking = store.attempts("orders_all_blocking", runs["orders_all_blocking"])
    assert any(a.input_bytes for a in blocking) and any(a.input_bytes is None for a in blocking)
    some_task = stack.task_instances("orders_all_blocking", runs["orders_all_blocking"])[0]
    log = stack.task_log("orders_all_blocking", runs["orders_all_blocking"], some_task["task_id"], 1)
    assert "on sc://127.0.0.1:" in log  # the attempt's own lines reach the task log


# The pool's scheduling through Airflow on this 4-slot cluster (rf_scheduling.py): FIFO per run, no
# starvation, regions bigger than the cluster failing at once.

def test_region_bigger_than_cluster_fails_at_once_with_the_pools_message(stack):
    run_id = run(stack, "too_big")
    assert stack.wait_for_run("too_big", run_id, timeout=300) == "failed"
    (ti,) = stack.task_instances("too_big", run_id)
    assert ti["state"] == "failed" and ti["start_date"] is None or ti["end_date"] is not None
    log = stack.task_log("too_big", run_id, ti["task_id"], max(ti["try_number"], 1), ti["map_index"])
    assert "needs 5 slots" in log and "4 slots" in log, log[-2000:]


def test_a_run_whose_later_region_is_bigger_than_the_cluster_fails_at_its_start(stack):
    """FLIP-138 per run: the first region task declares the run; its 5-slot second region can never
    run on 4 slots, so the first task fails when it is queued, before any Spark work."""
    run_id = run(stack, "too_big_later")
    assert stack.wait_for_run("too_big_later", run_id, timeout=300) == "failed"
    states = {ti["task_id"]: ti for ti in stack.task_instances("too_big_later", run_id)}
    assert {task: ti["state"] for task, ti in states.items()} == {"source": "failed",
                                                                  "spread__count": "upstream_failed"}
    log = stack.task_log("too_big_later", run_id, "source", max(states["source"]["try_number"], 1))
    assert "this DAG run can never finish on this cluster" in log, log[-2000:]
    assert "region 'too_big_later.spread__count[0]" in log and "needs 5 slots" in log and "4 slots" in log
    store = RegionflowStore.from_config(f"sqlite:///{stack.home}/regionflow.db")
    assert store.attempts("too_big_later", run_id) == []  # no Spark work was done


def test_two_runs_each_needing_the_whole_cluster_both_complete_oldest_first(stack):
    first = run(stack, "whole_cluster")
    second = stack.trigger("whole_cluster")
    assert stack.wait_for_run("whole_cluster", first, timeout=900) == "success"
    assert stack.wait_for_run("whole_cluster", second, timeout=900) == "success"
    (start_1, end_1, _), = times(stack, "whole_cluster", first).values()
    (start_2, end_2, _), = times(stack, "whole_cluster", second).values()
    assert end_1 <= start_2, "the second run's region started while the first held the whole cluster"


def test_big_region_starts_before_a_stream_of_one_slot_tasks_ends(stack):
    stream_run = run(stack, "stream")
    stack.wait_for_dag("big_after_stream")
    stack.unpause("big_after_stream")
    _wait_until_running(stack, "stream", stream_run)
    big_run = stack.trigger("big_after_stream")
    assert stack.wait_for_run("big_after_stream", big_run, timeout=900) == "success"
    assert stack.wait_for_run("stream", stream_run, timeout=900) == "success"
    (big_start, _, _), = times(stack, "big_after_stream", big_run).values()
    stream_starts = [start for start, _, _ in times(stack, "stream", stream_run).values()]
    assert big_start < max(stream_starts), "the 4-slot region waited for the whole stream"


def _wait_until_running(stack, dag_id, run_id, timeout=120):
    assert wait_until(lambda: any(ti["state"] == "running" for ti in stack.task_instances(dag_id, run_id)),
                      timeout, 0.5), f"no task of {dag_id} started within {timeout} s"


def test_an_adaptive_vertex_is_decided_again_when_its_region_task_is_granted(stack):
    """Planned at 4 (the cluster's slots), `per_customer` reads a few KB against 1 GiB per subtask: its
    region task runs it as one subtask, says so in its log, and the sink has every customer."""
    run_id = run(stack, "adaptive_at_grant")
    assert stack.wait_for_run("adaptive_at_grant", run_id, timeout=600) == "success"
    log = stack.task_log("adaptive_at_grant", run_id, "per_customer", 1)
    # 4 slots, or fewer when its upstream's release came more than elastic_wait (2 s) after it was queued
    assert re.search(r"adaptive parallelism per_customer=1 for [1-4] granted slot\(s\) and \d+ bytes read", log), log
    assert "(planned per_customer=4)" in log
    data_dir = stack.regionflow_options["data_dir"]
    # the plan the dag-processor parsed, for the stack's 4 slots (this process's [regionflow] hosts differ)
    graph = load_dag_file_job(os.path.join(stack.dags_folder, "rf_adaptive.py"), "adaptive_at_grant")
    layout = UnitLayout(decided_plan(graph, 4), 1)
    partitions = PartitionStore(data_dir, run_key_for("adaptive_at_grant", run_id))
    assert layout.plan.graph.vertices["per_customer"].parallelism == 4
    committed = partitions.committed(layout.keys[layout.units_of_logical(1)[0]])
    assert committed is not None and committed.manifest["parallelism"] == {"per_customer": 1}
    figures = layout.sink_figures(partitions, data_dir)["per_customer"]
    parts = [name for name in os.listdir(figures["path"]) if name.startswith("part-")]
    assert figures["rows"] == 500 and parts == ["part-00000.parquet"]


def test_an_adaptive_region_of_several_shards_is_decided_per_run_and_its_shards_are_mapped_over_the_decision(stack):
    """`per_customer` [1, 8], 64 KiB per subtask, cut into shards: its decision task decides from the bytes
    `orders` wrote, and Airflow maps its shards over the decision: 2 task instances for 8,000 orders, 6 for
    70,000, and the sink has the reference's counts per customer both times; `regionflow status` and the UI's
    plan of each run show the decided value beside the declared range. In the 70,000 run, mapped shard 1 fails
    its first try on purpose: its retry reads the same key groups (else the counts would not hold)."""
    stack.wait_for_dag("adaptive_per_run")
    stack.unpause("adaptive_per_run")
    runs = {orders: stack.trigger("adaptive_per_run", conf={"orders": orders}) for orders in (8000, 70000)}
    data_dir = stack.regionflow_options["data_dir"]
    for orders, run_id in runs.items():
        assert stack.wait_for_run("adaptive_per_run", run_id, timeout=600) == "success", orders
    decided = {}
    for orders, run_id in runs.items():
        partitions = PartitionStore(data_dir, run_key_for("adaptive_per_run", run_id))
        decision = partitions.decisions()["per_customer"]
        shards = sorted(ti["map_index"] for ti in stack.task_instances("adaptive_per_run", run_id)
                        if ti["task_id"] == "per_customer")
        assert shards == list(range(decision["shards"])), (orders, decision)
        tries = {ti["map_index"]: ti["try_number"] for ti in stack.task_instances("adaptive_per_run", run_id)
                 if ti["task_id"] == "per_customer"}
        assert tries == {i: 2 if (orders == 70000 and i == 1) else 1 for i in shards}, (orders, tries)
        if orders == 70000:
            assert "fails its first try on purpose" in stack.task_log("adaptive_per_run", run_id, "per_customer", 1, 1)
        assert decision["values"] == {"per_customer": decision["shards"]}, decision
        decided[orders] = (decision["shards"], decision["input_bytes"])
        log = stack.task_log("adaptive_per_run", run_id, "per_customer__decide", 1)
        assert f"per_customer={decision['shards']}" in log and f"{decision['input_bytes']} bytes read" in log, log
        layout, _ = dag_run_outputs(os.path.join(stack.dags_folder, "rf_adaptive.py"), "adaptive_per_run", run_id,
                                    data_dir, 8)
        assert len(layout.units_of_logical(1)) == decision["shards"]
        figures = layout.sink_figures(partitions, data_dir)["per_customer"]
        assert figures["path"].endswith(f"orders={orders}")
        counts = {row["customer_id"]: row["count"] for row in _parquet_rows(figures["path"])}
        expected = {}
        for order_id in range(orders):
            expected[order_id * 7919 % 500] = expected.get(order_id * 7919 % 500, 0) + 1
        assert counts == expected, orders
        shown = json.loads(status_output(f"sqlite:///{stack.home}/regionflow.db", None, "adaptive_per_run", run_id,
                                         "json"))["decisions"]["per_customer"]  # `regionflow status DAG RUN`
        assert shown["vertices"] == {"per_customer": {"range": [1, 8], "decided": decision["shards"]}}, shown
        assert (shown["shards"], shown["input_bytes"]) == (decision["shards"], decision["input_bytes"]), shown
        with stack.http_client() as http:  # the UI's plan of the run
            plan = http.get(f"/regionflow/api/dags/adaptive_per_run/plan?run_id={quote(run_id)}").json()
        assert {v["name"]: (v["range"], v["decided"]) for v in plan["vertices"]}["per_customer"] == (
            [1, 8], decision["shards"]), plan["vertices"]
    assert decided[8000][0] == 2 and decided[70000][0] == 6, decided


def _parquet_rows(path):
    import pyarrow.parquet as pq

    return pq.read_table(path).to_pylist()


def test_an_adaptive_region_whose_full_request_waits_starts_with_the_free_slot_after_elastic_wait(stack):
    run_id = run(stack, "elastic_at_grant")
    assert stack.wait_for_run("elastic_at_grant", run_id, timeout=600) == "success"
    log = stack.task_log("elastic_at_grant", run_id, "orders", 1)
    assert "with 1 slot(s)" in log and "adaptive parallelism orders=1 for 1 granted slot(s)" in log, log
    spans = times(stack, "elastic_at_grant", run_id)
    (hold_start, hold_end, _), (orders_start, _, _) = spans[("hold", -1)], spans[("orders", -1)]
    assert hold_start < orders_start < hold_end  # it did not wait for hold's slots
    store = RegionflowStore.from_config(f"sqlite:///{stack.home}/regionflow.db")
    first, second = sorted((g for g in store.grants(dag_id="elastic_at_grant") if g.task_id == "orders"),
                           key=lambda g: g.bulk_id)
    assert len(first.requests) == 4 and "admitted again with 1 of its 4 slot requests" in first.message
    assert len(second.requests) == len(second.slots) == 1


def test_a_stopped_server_is_started_by_the_next_region_and_a_silent_one_is_a_lost_host(stack):
    """regionflow starts the servers of its hosts: with the host's server stopped (as an operator would), the
    next region task starts it (no `regionflow session start`) and succeeds. A server that accepts connections
    but does not serve (its JVM stopped with SIGSTOP, as a hung one) fails the task as a lost host; once it
    runs again, the cleared task succeeds on it."""
    stack.session_servers.stop()
    run_id = run(stack, "orders_all_pipelined")
    assert stack.wait_for_run("orders_all_pipelined", run_id, timeout=300) == "success"
    [ti] = stack.task_instances("orders_all_pipelined", run_id)
    log = task_log_file(stack, "orders_all_pipelined", run_id, ti["task_id"], ti["try_number"])
    assert "host localhost: its Spark Connect server is not running; starting it" in log, log[-3000:]
    [status] = stack.session_servers.status()
    assert status.up, status

    pause_group(status.pid)
    try:
        run_id = run(stack, "orders_all_pipelined")
        assert stack.wait_for_run("orders_all_pipelined", run_id, timeout=300) == "failed"
        [ti] = stack.task_instances("orders_all_pipelined", run_id)
        log = task_log_file(stack, "orders_all_pipelined", run_id, ti["task_id"], ti["try_number"])
        assert "host localhost lost" in log, log[-3000:]
    finally:
        resume_group(status.pid)
    assert [s.pid for s in stack.session_servers.status()] == [status.pid]  # the same server, not a second one
    stack.clear_task("orders_all_pipelined", run_id, [ti["task_id"]])
    assert stack.wait_for_run("orders_all_pipelined", run_id, timeout=300) == "success"


# Issue 16's fifty runs took ~4 min here: `make test` runs twelve (~1 min; what stays of a run is compared
# across all of them, so anything that grows run after run shows from the second), `make test-long` fifty.
@pytest.mark.parametrize("runs", [12, pytest.param(50, marks=pytest.mark.long)])
def test_runs_leave_no_partition_and_gc_lists_exactly_a_planted_orphan(stack, capsys, runs):
    """Partitions are released in the Airflow path run after run (partition_retention = 0): `runs` runs
    of a two-region blocking job, triggered at once (they queue in the FIFO pool), all succeed and leave
    no partition dataset and no attempt dir; what stays of a run is its sink and manifests, the same for
    every run, so the data dir grows by the sinks alone. `regionflow gc --dry-run` then finds nothing to
    remove among them, and lists exactly the orphaned attempt dir planted into one finished run."""
    stack.wait_for_dag("disk_runs")
    stack.unpause("disk_runs")
    run_ids = [stack.trigger("disk_runs") for _ in range(runs)]
    for run_id in run_ids:
        assert stack.wait_for_run("disk_runs", run_id, timeout=900) == "success", run_id
    data_dir = stack.regionflow_options["data_dir"]
    roots = [os.path.join(data_dir, run_key_for("disk_runs", run_id)) for run_id in run_ids]
    residues = []
    for root in roots:
        assert glob.glob(os.path.join(root, "units", "*", "_manifest.json")), root  # the run did commit
        assert [p for p in glob.glob(os.path.join(root, "units", "*", "e*")) if os.path.isdir(p)] == [], root
        assert glob.glob(os.path.join(root, "_attempts", "*", "*")) == [], root
        files = (os.path.relpath(os.path.join(d, f), root) for d, _, names in os.walk(root) for f in names)
        residues.append(sorted(re.sub(r"[0-9a-f]{6,}(-[0-9a-f]{4,})*", "<id>", path) for path in files))
    assert all(residue == residues[0] for residue in residues)  # sink and manifests, nothing that grows
    assert "units/counts-shard-0-2-regions/_sink/counts/_SUCCESS" in residues[0], residues[0]

    store_url = f"sqlite:///{stack.home}/regionflow.db"

    def would_remove():
        assert main(["gc", "--data-dir", data_dir, "--store-url", store_url, "--older-than", "0", "--dry-run",
                     "--format", "json"]) == 0
        listed = json.loads(capsys.readouterr().out)["would_remove"]
        return sorted((item["kind"], os.path.relpath(item["path"], data_dir)) for item in listed
                      if item["path"].startswith(tuple(roots)))

    assert would_remove() == []
    orphan = os.path.join(roots[7], "_attempts", "orders-0", "a9-lost", "e0", "_rf_unit=0")
    os.makedirs(orphan)
    with open(os.path.join(orphan, "part-00000.parquet"), "wb") as handle:
        handle.write(b"x" * 100)
    assert would_remove() == [("attempt", os.path.relpath(os.path.dirname(os.path.dirname(orphan)), data_dir))]


def test_a_shard_runs_once_the_partitions_it_reads_are_committed_not_its_whole_upstream_task(stack):
    """copy[0] reads only source[0]'s partitions (FORWARD, blocking, 2 shards): it runs and commits while
    source[1] still pauses; copy[1], queued before its input existed, first ran without slots and
    deferred (the gate's admission row); the sink holds every row once. With source[1] broken, copy[1]
    fails naming it and copy[0] still succeeds."""
    from regionflow.contract import INPUTS_GATE_NOTE
    from regionflow.examples.orders import ORDER_COUNT

    runs = {dag_id: run(stack, dag_id) for dag_id in ("early_shards", "early_shards_broken")}
    assert stack.wait_for_run("early_shards", runs["early_shards"], timeout=600) == "success"
    assert stack.wait_for_run("early_shards_broken", runs["early_shards_broken"], timeout=600) == "failed"
    data_dir = stack.regionflow_options["data_dir"]
    store = RegionflowStore.from_config(f"sqlite:///{stack.home}/regionflow.db")
    dag_file = os.path.join(stack.dags_folder, "rf_early_shards.py")
    # a run ends in Airflow before the executor's next sync records its last release
    assert wait_until(lambda: store.live_grants() == [], 60), store.live_grants()

    layout, partitions = dag_run_outputs(dag_file, "early_shards", runs["early_shards"], data_dir, 2)
    key_of = {layout.task_instance_of(unit): layout.keys[unit] for unit in range(len(layout.keys))}
    commits = {c.unit_key: c for c in store.commits("early_shards", runs["early_shards"])}
    attempts = store.attempts("early_shards", runs["early_shards"])
    slow_source_end = max(a.ended_at for a in attempts if a.unit_key == key_of[("source", 1)])
    assert commits[key_of[("copy", 0)]].committed_at < slow_source_end - 5, "copy[0] waited for all of source"
    assert commits[key_of[("copy", 1)]].committed_at > slow_source_end
    figures = layout.sink_figures(partitions, data_dir)["copy"]
    assert figures["rows"] == ORDER_COUNT
    copies = {ti["map_index"]: ti for ti in stack.task_instances("early_shards", runs["early_shards"])
              if ti["task_id"] == "copy"}
    # copy[1] was queued while source[1] ran: its first run held no slots (the gate's row), its resume did
    admissions = store.admissions(copies[1]["id"], copies[1]["try_number"])
    assert [a.state.value for a in admissions] == ["released", "released"]
    assert admissions[0].message == INPUTS_GATE_NOTE and not admissions[0].slots and admissions[1].slots
    # copy[0] was queued once source[0] had committed: straight to its slots, no gate run
    assert [bool(a.slots) for a in store.admissions(copies[0]["id"], copies[0]["try_number"])] == [True]
    assert store.live_grants() == []

    broken = {(ti["task_id"], ti["map_index"]): ti for ti in stack.task_instances("early_shards_broken",
                                                                                 runs["early_shards_broken"])}
    assert {key: ti["state"] for key, ti in broken.items()} == {
        ("source", 0): "success", ("source", 1): "failed", ("copy", 0): "success", ("copy", 1): "failed"}
    log = task_log_file(stack, "early_shards_broken", runs["early_shards_broken"], "copy",
                        broken[("copy", 1)]["try_number"], 1)
    assert "cannot run" in log and "source[1] (failed)" in log, log[-3000:]
