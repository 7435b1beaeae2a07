"""Templated vertex fields (sink, reads): declared on SparkVertexOperator, carried by the region task as its
``vertex_templates`` and rendered by Airflow's Jinja environment when it runs; outside Airflow rendered by
jinja2 from `regionflow run`'s context (no Airflow stack, no Spark)."""
from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from airflow.sdk import DAG

import regionflow
from regionflow.config import RegionflowConfig
from regionflow.core.jobspec import graph_from_spec
from regionflow.core.run_context import RunContext
from regionflow.core.templates import TemplateError, checked, is_template, vertex_templates
from regionflow.examples import orders as job
from regionflow.operators import SparkVertexOperator, forward
from regionflow.units.rendering import render

SINK = "daily/totals/ds={{ ds }}"


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.setenv("AIRFLOW__REGIONFLOW__HOSTS", "h1:slots=4")
    monkeypatch.setenv("AIRFLOW__REGIONFLOW__MAX_SHARDS", "1")
    monkeypatch.setenv("AIRFLOW__REGIONFLOW__STORE_URL", f"sqlite:///{tmp_path}/regionflow.db")
    monkeypatch.setenv("AIRFLOW__REGIONFLOW__DATA_DIR", str(tmp_path / "data"))
    return tmp_path


def daily(sink=SINK, reads=(), dag_id="daily_tpl", **dag_args):
    with DAG(dag_id, schedule="@daily", start_date=datetime(2026, 1, 1), catchup=False,
             params={"limit": 5}, **dag_args) as dag:
        orders = SparkVertexOperator(task_id="orders", parallelism=2, fn=job.generate_orders)
        totals = SparkVertexOperator(task_id="totals", parallelism=2, fn=job.count_per_customer, sink=sink,
                                     reads=reads)
        orders >> forward() >> totals
    regionflow.transform(dag, mode="all-blocking", config=RegionflowConfig.from_airflow())
    return dag


def airflow_context(dag, **values):
    return {"dag": dag, "ds": "2026-01-02", "ds_nodash": "20260102", "params": {"limit": 5},
            "logical_date": datetime(2026, 1, 2, tzinfo=UTC), "run_id": "scheduled__2026-01-02", **values}


def test_vertex_operators_declare_the_templated_fields_and_region_tasks_carry_their_templates(env):
    dag = daily(reads=["/in/{{ ds }}"])
    region = dag.get_task("totals")
    assert region.template_fields == ("vertex_templates",)
    assert region.vertex_templates == {"totals": {"sink": SINK, "reads": ["/in/{{ ds }}"]}}  # not rendered at parse
    assert dag.get_task("orders").vertex_templates == {}


def test_airflow_renders_them_with_the_dags_jinja_environment_and_macros(env):
    dag = daily(sink="daily/{{ params.limit }}/{{ ds_nodash }}/{{ shout('x') }}", user_defined_macros={
        "shout": lambda text: text.upper()})
    region = dag.get_task("totals")
    region.render_template_fields(airflow_context(dag))
    assert region.vertex_templates == {"totals": {"sink": "daily/5/20260102/X"}}


@pytest.mark.parametrize("sink, error", [("daily/{{ nope }}", "'nope' is undefined"),
                                         ("daily/{{ ds ", "TemplateSyntaxError")])
def test_a_template_that_fails_to_render_names_the_vertex_and_the_field(env, sink, error):
    region = daily(sink=sink).get_task("totals")
    with pytest.raises(TemplateError) as info:
        region.render_template_fields(airflow_context(region.dag))
    assert "vertex 'totals' field 'sink'" in str(info.value) and error in str(info.value)


@pytest.mark.parametrize("rendered, message", [
    ("", "rendered to an empty path"),
    ("   ", "rendered to an empty path"),
    ("../../etc", "leaves the data directory's sinks/ folder"),
    ("a/../../b", "leaves the data directory's sinks/ folder"),
    ("/etc/x", "escapes the data dir's sinks/ folder"),
    ("s3a://bucket/x", "escapes the data dir's sinks/ folder"),
    ("a/..", "leaves the data directory's sinks/ folder"),
])
def test_a_rendered_sink_that_is_empty_or_escapes_the_sinks_root_is_refused_naming_the_field(rendered, message):
    graph = job.build_job(sink="out/{{ params.where }}")
    with pytest.raises(TemplateError) as info:
        checked(graph, {"totals": {"sink": rendered}})
    assert "vertex 'totals' field 'sink'" in str(info.value) and message in str(info.value)


def test_an_absolute_template_may_render_an_absolute_path():
    graph = job.build_job(sink="/data/{{ ds }}")
    assert checked(graph, {"totals": {"sink": "/data/2026-01-02"}}) == {"totals": {"sink": "/data/2026-01-02"}}
    assert checked(graph, {"totals": {"sink": "x/./y/"}})["totals"]["sink"] == "x/y"


def test_the_region_task_refuses_a_bad_rendered_sink_before_any_spark_work(env, monkeypatch):
    from regionflow.units.service import UnitRunService

    monkeypatch.setattr(UnitRunService, "run", lambda *a, **k: pytest.fail("no Spark work for a bad sink"))
    dag = daily(sink="{{ params.root }}/x")
    region = dag.get_task("totals")
    region.render_template_fields(airflow_context(dag, params={"root": "/etc"}))

    class TI:
        task_id, map_index, id, try_number, dag_id = "totals", -1, "ti-1", 1, "daily_tpl"

    with pytest.raises(TemplateError, match="vertex 'totals' field 'sink'.*escapes"):
        region.execute(airflow_context(dag, ti=TI(), params={"root": "/etc"}))


def test_outside_airflow_jinja2_renders_them_from_the_run_context():
    graph = job.build_job(sink="daily/ds={{ ds }}/{{ params.kind }}/{{ logical_date.year }}")
    run = RunContext(dag_id="orders", run_id="r", logical_date=datetime(2026, 1, 2, tzinfo=UTC), params={"kind": "a"})
    assert render(vertex_templates(graph), run) == {"totals": {"sink": "daily/ds=2026-01-02/a/2026"}}
    with pytest.raises(TemplateError, match="vertex 'totals' field 'sink'.*'dict object' has no attribute 'kind'"):
        render(vertex_templates(graph), RunContext(logical_date=datetime(2026, 1, 2, tzinfo=UTC)))
    assert not is_template("plain/path") and is_template("{% if x %}a{% endif %}")
    with pytest.raises(TemplateError, match="'ds' is undefined; give the run a logical date"):
        render({"totals": {"sink": "daily/ds={{ ds }}"}}, RunContext(params={"kind": "a"}))  # never "ds=None"


def test_a_json_spec_sink_may_be_a_template():
    spec = {"name": "tpl", "vertices": [
        {"id": "src", "parallelism": 1, "fn": "regionflow.examples.orders:generate_orders",
         "sink": {"path": "orders/ds={{ ds }}"}}], "edges": []}
    graph = graph_from_spec(json.loads(json.dumps(spec)))
    run = RunContext(logical_date=datetime(2026, 1, 3, tzinfo=UTC))
    assert checked(graph, render(vertex_templates(graph), run)) == {"src": {"sink": "orders/ds=2026-01-03"}}


def test_an_unrendered_template_is_never_written_under_its_literal_name():
    from regionflow.spark.driver.program import resolve_sink_path

    graph = job.build_job(sink=SINK)
    with pytest.raises(ValueError, match="is a template that was not rendered"):
        resolve_sink_path(graph.vertices["totals"], "/data")
    assert resolve_sink_path(graph.vertices["totals"], "/data", {"totals": {"sink": "daily/totals/ds=2026-01-02"}}) \
        == "/data/sinks/daily/totals/ds=2026-01-02"


def test_a_mapped_region_task_renders_them_for_each_shard(env, monkeypatch):
    """A region of several shards is a mapped task: Airflow renders the unmapped shard's vertex_templates."""
    from types import SimpleNamespace

    from regionflow.operators import hash_by

    monkeypatch.setenv("AIRFLOW__REGIONFLOW__MAX_SHARDS", "2")
    with DAG("mapped_tpl", schedule="@daily", start_date=datetime(2026, 1, 1)) as dag:
        orders = SparkVertexOperator(task_id="orders", parallelism=2, fn=job.generate_orders)
        totals = SparkVertexOperator(task_id="totals", parallelism=3, fn=job.count_per_customer, sink=SINK)
        orders >> hash_by("customer_id") >> totals
    regionflow.transform(dag, mode="all-blocking", config=RegionflowConfig.from_airflow())
    mapped = dag.get_task("totals")
    assert mapped.partial_kwargs["vertex_templates"] == {"totals": {"sink": SINK}}

    def context():
        ti = SimpleNamespace(map_index=1, task_id="totals", dag_id="mapped_tpl", run_id="r", task=mapped)
        return airflow_context(dag, ti=ti, dag_run=SimpleNamespace(conf={}))

    rendered = context()
    mapped.render_template_fields(rendered)
    assert rendered["task"].shard == 1 and rendered["task"].vertex_templates == {
        "totals": {"sink": "daily/totals/ds=2026-01-02"}}
    mapped.partial_kwargs["vertex_templates"] = {"totals": {"sink": "daily/{{ nope }}"}}
    with pytest.raises(TemplateError, match="vertex 'totals' field 'sink'.*'nope' is undefined"):
        mapped.render_template_fields(context())
