"""The run context job code sees (`RunContext`, `TaskContext`'s run fields), built from Airflow's context or
from `regionflow run`'s options, and carried in the unit task (no Spark, no Airflow stack)."""
from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

import pendulum
import pytest

from regionflow.cli import main
from regionflow.core.errors import SpecError
from regionflow.core.run_context import RunContext, cli_context, parse_param
from regionflow.examples import orders
from regionflow.spark.data.task import UnitTask
from regionflow.spark.driver.api import TaskContext, reference_context

DAY = datetime(2026, 1, 2, tzinfo=UTC)


class FakeTI:
    dag_id = "orders_daily"
    try_number = 3
    map_index = 1


class FakeDag:
    dag_id = "orders_daily"


def airflow_context(**overrides):
    context = {"dag": FakeDag(), "ti": FakeTI(), "run_id": "scheduled__2026-01-02T00:00:00+00:00",
               "logical_date": pendulum.datetime(2026, 1, 2, tz="UTC"),
               "data_interval_start": pendulum.datetime(2026, 1, 2, tz="UTC"),
               "data_interval_end": pendulum.datetime(2026, 1, 3, tz="UTC"),
               "params": {"limit": 10, "region": "eu"}}
    context.update(overrides)
    return context


def test_from_airflow_takes_the_run_values_with_plain_timezone_aware_datetimes():
    run = RunContext.from_airflow(airflow_context())
    assert run.dag_id == "orders_daily" and run.run_id.startswith("scheduled__")
    assert type(run.logical_date) is datetime and run.logical_date == DAY and run.logical_date.tzinfo is not None
    assert run.data_interval_end - run.data_interval_start == timedelta(days=1)
    assert run.params == {"limit": 10, "region": "eu"} and run.try_number == 3 and run.map_index == 1
    assert run.ds == "2026-01-02" and run.ds_nodash == "20260102"


def test_a_manual_run_without_a_logical_date_has_no_ds():
    run = RunContext.from_airflow(airflow_context(logical_date=None, data_interval_start=None,
                                                  data_interval_end=None))
    assert run.logical_date is None and run.ds is None and run.ds_nodash is None


def test_json_round_trip_keeps_every_value():
    run = RunContext.from_airflow(airflow_context())
    again = RunContext.from_dict(json.loads(json.dumps(run.to_dict())))
    assert again == run and again.logical_date.utcoffset() == timedelta(0)
    assert RunContext.from_dict({}) == RunContext() == RunContext.from_dict(None)


def test_naive_datetimes_and_non_json_params_are_refused():
    with pytest.raises(SpecError, match="timezone-aware"):
        RunContext(logical_date=datetime(2026, 1, 2))
    with pytest.raises(SpecError, match="JSON"):
        RunContext(params={"x": object()})


def test_task_context_shows_the_run():
    run = RunContext.from_airflow(airflow_context())
    ctx = TaskContext("orders_daily", "orders", 0, 2, 4, "a1", "r", run.run_id, run, ("/in/2026-01-02",))
    assert (ctx.logical_date, ctx.ds, ctx.ds_nodash, ctx.params["limit"]) == (DAY, "2026-01-02", "20260102", 10)
    assert (ctx.dag_id, ctx.try_number, ctx.map_index, ctx.reads) == ("orders_daily", 3, 1, ("/in/2026-01-02",))
    assert ctx.data_interval_start == DAY and ctx.run_id == run.run_id
    plain = TaskContext("job", "v", 0, 1, 1, "a1", "r", "run-1")
    assert plain.logical_date is None and plain.ds is None and plain.params == {} and plain.dag_id == "job"
    reference = reference_context("job", "v", "reference-1", 3, run)
    assert reference.run is run and reference.run_id == run.run_id and reference.whole


def test_cli_context_defaults_the_interval_to_the_logical_date_and_parses_json_params():
    run = cli_context("2026-01-02", None, ["limit=10", 'name="x"', "days=[1, 2]"], dag_id="j", run_id="r")
    assert run.logical_date == DAY and run.data_interval_start == run.data_interval_end == DAY
    assert run.params == {"limit": 10, "name": "x", "days": [1, 2]} and run.try_number == 1
    zoned = cli_context("2026-01-02T05:00:00+02:00", ["2026-01-01", "2026-01-02"], [])
    assert zoned.logical_date.utcoffset() == timedelta(hours=2) and zoned.data_interval_start == DAY - timedelta(1)
    assert zoned.logical_date.tzinfo == timezone(timedelta(hours=2))
    none = cli_context(None, None, [])
    assert none.logical_date is None and none.ds is None and none.data_interval_end is None


@pytest.mark.parametrize("item, message", [
    ("limit=ten", "--param limit: 'ten' is not a JSON value"),
    ("noequals", "must look like KEY=VALUE"),
    ("=3", "must look like KEY=VALUE"),
])
def test_bad_params_name_the_param_and_the_fix(item, message):
    with pytest.raises(SpecError, match=message):
        parse_param(item)


def test_bad_dates_are_refused():
    with pytest.raises(SpecError, match="--logical-date 'yesterday' is not an ISO date"):
        cli_context("yesterday", None, [])
    with pytest.raises(SpecError, match="the end is before the start"):
        cli_context(None, ["2026-01-03", "2026-01-02"], [])


def test_regionflow_run_with_a_bad_param_exits_2_with_one_line(capsys, tmp_path):
    code = main(["run", "regionflow.examples.orders:job", "--data-dir", str(tmp_path), "--param", "limit=ten"])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.strip().count("\n") == 0 and "--param limit" in err and "JSON" in err, err


def test_runner_run_values_fill_in_the_job_and_run_and_render_the_sinks(tmp_path):
    from regionflow.core.plan import Plan
    from regionflow.scheduling.hosts import Cluster
    from regionflow.units.runner import RunOptions, run_values

    graph = orders.build_job(sink="daily/ds={{ ds }}/limit={{ params.limit }}")
    options = RunOptions(data_dir=str(tmp_path), cluster=Cluster.local_default(2),
                         context=cli_context("2026-01-02", None, ["limit=5"]))
    context, rendered = run_values(Plan(graph), options, "run-7")
    assert context.dag_id == "orders" and context.run_id == "run-7" and context.try_number == 1
    assert rendered == {"totals": {"sink": "daily/ds=2026-01-02/limit=5"}}


def test_regionflow_run_hands_its_context_to_the_runner(monkeypatch, tmp_path, capsys):
    import regionflow.units.runner as runner

    seen = {}

    class Recording:
        def __init__(self, job, plan, options):
            seen["context"] = options.context

        def run(self):
            return runner.RunSummary("orders", "all-blocking", "r", 0.0)

    monkeypatch.setattr(runner, "LocalRunner", Recording)
    assert main(["run", "regionflow.examples.orders:daily", "--data-dir", str(tmp_path), "--logical-date",
                 "2026-01-02", "--data-interval", "2026-01-01", "2026-01-02", "--param", "min_quantity=3"]) == 0
    context = seen["context"]
    assert context.logical_date == DAY and context.data_interval_start == DAY - timedelta(days=1)
    assert context.params == {"min_quantity": 3} and context.dag_id == "orders_daily"
    capsys.readouterr()


def test_unit_task_carries_the_context_and_the_rendered_fields(tmp_path):
    run = RunContext.from_airflow(airflow_context())
    task = UnitTask(job="j", mode="all-blocking", run_id="r", data_dir=str(tmp_path), unit_key="u", unit_name="u",
                    regions=[0], attempt_id="a", context=run.to_dict(), rendered={"t": {"sink": "x/ds=2026-01-02"}})
    again = UnitTask.read(task.write(str(tmp_path / "task.json")))
    assert RunContext.from_dict(again.context) == run and again.rendered == task.rendered
