"""The daily example DAG (dags/orders_daily.py) through the real stack (scheduler, api-server, dag-processor,
triggerer, RegionExecutor, session backend): an ``airflow backfill create`` of three dates (one run at a time,
in logical-date order) writes three ``ds=`` partitions, each equal to the plain reference run for its date, and
clearing day 2 leaves the others' files untouched; a run triggered with a conf that
overrides a param the job reads (``min_quantity``) writes its own partition, equal to the reference run with
that param. On the stack shared with other modules (tests/airflow/shared_stack.py), its scheduler keeping
partitions (partition_retention 3600 s); the references run on its Spark Connect server once the runs are done."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from shared_stack import ModuleStack

from regionflow.core.plan import Plan
from regionflow.core.run_context import cli_context
from regionflow.examples import orders
from regionflow.spark.data.store import SINK_MARKER, run_key_for
from regionflow.spark.servers.client_env import no_client_marks
from regionflow.units.dags import dag_run_outputs
from regionflow.units.reference import run_reference
from regionflow.units.runner import RunOptions

pytestmark = [pytest.mark.heavy, pytest.mark.timeout(900)]
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DAG_ID = "orders_daily"


@pytest.fixture(scope="module")
def stack(shared_stack, request):
    # partitions kept after their consumers committed, so a cleared sink task finds its inputs (see docs/daily-runs.md);
    # only the backfill's runs and the one triggered here: the shared stack runs no DAG on its schedule
    needs = ModuleStack({f"{DAG_ID}.py": os.path.join(REPO, "dags", f"{DAG_ID}.py")},
                        {"AIRFLOW__REGIONFLOW__PARTITION_RETENTION": "3600"})
    with shared_stack.module(request.node.nodeid, needs) as airflow:
        yield airflow


def reference(stack, tmp_path_factory, day, *params):
    """The plain PySpark run of the DAG's job for `day` (and `params`) on the stack's Spark Connect server."""
    servers = stack.session_servers
    options = RunOptions(data_dir=str(tmp_path_factory.mktemp("reference")), cluster=servers.cluster, progress=None,
                         servers=servers, context=cli_context(day, None, list(params)))
    with no_client_marks():
        return run_reference("regionflow.examples.orders:daily", Plan(orders.daily), options).sinks["totals"]


def create_backfill(stack, first, last, tries=4):
    """`airflow backfill create` of the days `first` to `last`, again when SQLite answered "database is locked".
    On SQLite (WAL) a transaction that read and then writes after another process's commit is refused at once,
    not after the busy timeout (it happened once in a suite run here). Airflow has committed the backfill row by
    then and cleans it up only for PostgreSQL's and MySQL's lock errors, so the orphan is cancelled first."""
    for _ in range(tries):
        done = subprocess.run(
            [sys.executable, "-m", "airflow", "backfill", "create", "--dag-id", DAG_ID, "--from-date", first,
             "--to-date", last, "--max-active-runs", "1"],
            env=stack.child_env(), cwd=stack.home, capture_output=True, text=True, timeout=180)
        if done.returncode == 0 or "database is locked" not in done.stdout + done.stderr:
            return done
        with stack.http_client() as http:
            for backfill in http.get("/api/v2/backfills", params={"dag_id": DAG_ID}).json()["backfills"]:
                if backfill.get("completed_at") is None:
                    http.put(f"/api/v2/backfills/{backfill['id']}/cancel").raise_for_status()
        time.sleep(2)
    return done


def test_a_backfill_and_a_run_with_conf_write_one_partition_per_date_equal_to_its_reference(stack, tmp_path_factory):
    stack.wait_for_dag(DAG_ID)
    # created while the DAG is paused: the scheduler does not read the runs the command is writing (on SQLite a
    # scheduler transaction upgrading to a write while the command holds its write lock gave "database is locked")
    backfill = create_backfill(stack, "2026-01-01", "2026-01-03")
    assert backfill.returncode == 0, backfill.stdout + backfill.stderr
    stack.unpause(DAG_ID)
    conf_run = stack.trigger(DAG_ID, conf={"min_quantity": 3}, logical_date="2026-01-04T00:00:00+00:00")
    backfilled = [r for r in stack.dag_runs(DAG_ID) if r["run_type"] == "backfill"]
    days = {r["dag_run_id"]: r["logical_date"][:10] for r in backfilled}
    assert sorted(days.values()) == ["2026-01-01", "2026-01-02", "2026-01-03"], stack.dag_runs(DAG_ID)
    days[conf_run] = "2026-01-04"
    for run_id in days:
        assert stack.wait_for_run(DAG_ID, run_id, timeout=600) == "success", failures(stack, run_id)
    # --max-active-runs 1: the backfill's runs ran one at a time, in logical-date order
    spans = sorted((r["logical_date"], r["start_date"], r["end_date"]) for r in stack.dag_runs(DAG_ID)
                   if r["run_type"] == "backfill")
    assert all(later[1] >= earlier[2] for earlier, later in zip(spans, spans[1:], strict=False)), spans

    data_dir = stack.regionflow_options["data_dir"]
    got = {}
    for run_id, day in days.items():
        layout, partitions = dag_run_outputs(os.path.join(stack.dags_folder, f"{DAG_ID}.py"), DAG_ID, run_id,
                                             data_dir, 1)
        figures = layout.sink_figures(partitions, data_dir)["totals"]
        assert figures["path"] == os.path.join(data_dir, "sinks", "orders_daily", "totals", f"ds={day}")
        with open(os.path.join(figures["path"], SINK_MARKER)) as handle:
            marker = json.load(handle)
        assert marker["run"] == run_key_for(DAG_ID, run_id) and marker["per_run"] and marker["logical_date"][:10] == day
        files = [n for n in os.listdir(figures["path"]) if not n.startswith(("_", "."))]
        assert files and all(n.startswith("part-") and n.endswith(".parquet") for n in files), files
        got[day] = (figures["rows"], figures["checksum"])
    partitions_dir = os.path.join(data_dir, "sinks", "orders_daily", "totals")
    assert sorted(n for n in os.listdir(partitions_dir) if not n.startswith(".")) == \
        ["ds=2026-01-01", "ds=2026-01-02", "ds=2026-01-03", "ds=2026-01-04"]
    assert not [n for n in os.listdir(partitions_dir) if "rf-swap" in n]
    # the reference of each date (the conf run: with its param); the param changed what the job computed
    expected = {day: reference(stack, tmp_path_factory, day) for day in ("2026-01-01", "2026-01-02", "2026-01-03")}
    expected["2026-01-04"] = reference(stack, tmp_path_factory, "2026-01-04", "min_quantity=3")
    default_day4 = reference(stack, tmp_path_factory, "2026-01-04")
    for day, (rows, checksum) in got.items():
        assert (rows, checksum) == (expected[day]["rows"], expected[day]["checksum"]), day
    assert got["2026-01-01"] != got["2026-01-02"]  # each day has its own orders
    assert (default_day4["rows"], default_day4["checksum"]) != got["2026-01-04"]

    # clearing day 2's sink region task: it runs again (its unit is committed: first commit wins, so it publishes
    # the same files again) and leaves every other partition as it was
    before = {day: mtimes(os.path.join(partitions_dir, f"ds={day}"))
              for day in ("2026-01-01", "2026-01-03", "2026-01-04")}
    day2 = next(run_id for run_id, day in days.items() if day == "2026-01-02")
    tries = {ti["task_id"]: ti["try_number"] for ti in stack.task_instances(DAG_ID, day2)}
    stack.clear_task(DAG_ID, day2, ["totals"])
    assert stack.wait_for_run(DAG_ID, day2, timeout=300) == "success", failures(stack, day2)
    assert {ti["task_id"]: ti["try_number"] for ti in stack.task_instances(DAG_ID, day2)}["totals"] == \
        tries["totals"] + 1
    assert {day: mtimes(os.path.join(partitions_dir, f"ds={day}")) for day in before} == before
    layout, partitions = dag_run_outputs(os.path.join(stack.dags_folder, f"{DAG_ID}.py"), DAG_ID, day2, data_dir, 1)
    figures = layout.sink_figures(partitions, data_dir)["totals"]
    assert (figures["rows"], figures["checksum"]) == got["2026-01-02"]


def test_regionflow_run_writes_the_rendered_path_and_a_second_run_of_that_path_is_refused(stack, tmp_path):
    """`regionflow run` of the DAG's job for a logical date (its runner, on the stack's Spark Connect server)
    writes the partition of that date, equal to the reference; another run rendering the same path is
    refused before any Spark work, naming both runs."""
    from regionflow.spark.data.sinks import SinkConflictError
    from regionflow.units.runner import LocalRunner

    servers = stack.session_servers

    def runner(run_id):
        options = RunOptions(data_dir=str(tmp_path), cluster=servers.cluster, progress=None, servers=servers,
                             run_id=run_id, context=cli_context("2026-01-05", None, []))
        return LocalRunner("regionflow.examples.orders:daily", Plan(orders.daily), options)

    summary = runner("first").run()
    totals = summary.sinks["totals"]
    assert totals["path"] == os.path.join(str(tmp_path), "sinks", "orders_daily", "totals", "ds=2026-01-05")
    with pytest.raises(SinkConflictError) as info:
        runner("second").preflight()
    assert "run 'first' (logical date 2026-01-05" in str(info.value) and "run 'second'" in str(info.value)
    reference_options = RunOptions(data_dir=str(tmp_path / "reference"), cluster=servers.cluster, progress=None,
                                   servers=servers, context=cli_context("2026-01-05", None, []))
    with no_client_marks():
        expected = run_reference("regionflow.examples.orders:daily", Plan(orders.daily), reference_options)
    assert (totals["rows"], totals["checksum"]) == (expected.sinks["totals"]["rows"],
                                                    expected.sinks["totals"]["checksum"])


def failures(stack, run_id):
    """The run's failed task instances and the end of their last try's log."""
    return "\n".join(f"{ti['task_id']}[{ti['map_index']}] try {ti['try_number']}:\n"
                     + stack.task_log(DAG_ID, run_id, ti["task_id"], ti["try_number"], ti["map_index"])[-2500:]
                     for ti in stack.task_instances(DAG_ID, run_id) if ti["state"] == "failed")


def mtimes(path):
    return {name: os.stat(os.path.join(path, name)).st_mtime_ns for name in os.listdir(path)}
