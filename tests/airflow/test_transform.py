"""regionflow.transform at DAG parse time: vertex operators become region tasks (no Airflow stack)."""
import json
import os
from datetime import datetime

import pytest
from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG

import regionflow
from regionflow.cli import main
from regionflow.config import RegionflowConfig
from regionflow.core.errors import JobGraphError, RegionflowError
from regionflow.examples import orders as job
from regionflow.operators import SparkVertexOperator, broadcast, forward, hash_by, rescale, spark_vertex
from regionflow.scheduling.hosts import Cluster

REPO = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))


@pytest.fixture
def config():
    return RegionflowConfig.from_values(
        lambda name: {"hosts": "h1:slots=4;h2:slots=2", "max_shards": "2"}.get(name, ""), airflow_home="/tmp/unused")


def new_dag(dag_id="d"):
    return DAG(dag_id, schedule=None, start_date=datetime(2026, 1, 1))


def example(config, mode="pointwise-pipelined-only"):
    with new_dag("orders_daily") as dag:
        start = EmptyOperator(task_id="start")
        orders = SparkVertexOperator(task_id="orders", parallelism=4, fn=job.generate_orders)
        products = SparkVertexOperator(task_id="products", parallelism=1, fn=job.generate_products)
        clean = SparkVertexOperator(task_id="clean", parallelism=4, fn=job.clean_orders)
        enrich = SparkVertexOperator(task_id="enrich", parallelism=2, fn=job.enrich_orders)
        totals = SparkVertexOperator(task_id="totals", parallelism=3, fn=job.total_by_customer, sink="t")
        done = EmptyOperator(task_id="done")
        start >> orders >> forward() >> clean >> rescale() >> enrich >> hash_by("customer_id") >> totals >> done
        products >> broadcast() >> enrich
    return dag, regionflow.transform(dag, mode=mode, config=config)


def test_one_task_per_logical_region_named_after_its_vertices(config):
    dag, result = example(config)
    assert sorted(dag.task_ids) == ["done", "orders__clean__enrich", "products", "start", "totals"]
    assert dag.get_task("orders__clean__enrich").upstream_task_ids == {"products", "start"}
    assert dag.get_task("totals").upstream_task_ids == {"orders__clean__enrich"}
    assert dag.get_task("done").upstream_task_ids == {"totals"}
    assert not any(isinstance(t, SparkVertexOperator) for t in dag.tasks)
    assert result.plan.mode.value == "pointwise-pipelined-only"


def test_region_tasks_are_mapped_over_shards_and_carry_slot_requests(config):
    dag, result = example(config)
    totals = dag.get_task("totals")
    settings = totals.partial_kwargs["executor_config"]["regionflow"]
    assert len(settings["requests"]) == 2  # 3 regions in at most max_shards=2 shards
    assert settings["labels"] == ["totals[0]", "totals[shard 1: 2 regions]"]
    assert [len(r) for r in settings["requests"]] == [1, 2]  # shard 1 runs its 2 regions at once on a 4-slot host
    products = dag.get_task("products")
    assert products.executor_config["regionflow"]["requests"] == [[{"unknown": True}]]
    assert products.weight_rule is not None and products.priority_weight == 1


def test_a_region_task_whose_shards_read_part_of_an_upstream_task_waits_shard_by_shard(config):
    """all-blocking on 2 shards: clean[i] reads orders[i] (FORWARD) and enrich[j] clean[2j..2j+1]
    (RESCALE), so both wait per shard; totals reads every enrich shard (HASH); orders has a task the user
    linked upstream (start), and would wait for it anyway."""
    dag, _ = example(config, mode="all-blocking")
    rules = {}
    for task_id in ("orders", "clean", "enrich", "totals"):
        task = dag.get_task(task_id)
        kwargs = getattr(task, "partial_kwargs", None) or task.__dict__
        rule = kwargs.get("trigger_rule")
        rules[task_id] = (getattr(rule, "value", rule), kwargs.get("waits_for_inputs", False),
                          bool(kwargs["executor_config"]["regionflow"].get("waits_for_inputs")))
    assert rules == {"orders": ("all_success", False, False), "clean": ("one_success", True, True),
                     "enrich": ("one_success", True, True), "totals": ("all_success", False, False)}
    dag, _ = example(config, mode="pointwise-pipelined-only")  # its blocking edges are BROADCAST and HASH
    assert "waits_for_inputs" not in dag.get_task("totals").partial_kwargs["executor_config"]["regionflow"]


def test_tasks_of_regions_without_upstream_regions_declare_the_whole_run(config):
    """FLIP-138 per run: the region tasks a run starts with carry every distinct shard shape of every
    region task, which the executor checks against the cluster when the run starts."""
    from regionflow.contract import from_executor_config

    dag, _ = example(config)

    def contract(task_id):
        task = dag.get_task(task_id)
        body = task.partial_kwargs["executor_config"] if hasattr(task, "partial_kwargs") else task.executor_config
        return from_executor_config(json.loads(json.dumps(body)), task_id)  # what serialization keeps

    declared = [(need.task_id, need.shard, need.label, len(need.requests)) for need in contract("products").run_needs]
    assert declared == [("orders__clean__enrich", 0, "orders+clean+enrich[0]", 2),  # one shard shape
                        ("products", 0, "products[0]", 1),
                        ("totals", 0, "totals[0]", 1), ("totals", 1, "totals[shard 1: 2 regions]", 2)]
    need = contract("products").run_needs[0]
    assert need.bulk_label("orders_daily") == "orders_daily.orders__clean__enrich[0] (orders+clean+enrich[0])"
    # the tasks of regions with upstream regions (products feeds enrich by broadcast) declare nothing
    assert contract("orders__clean__enrich").run_needs == () and contract("totals").run_needs == ()


def test_plain_rshift_is_forward_for_equal_parallelism_else_rescale(config):
    with new_dag() as dag:
        a = SparkVertexOperator(task_id="a", parallelism=2, fn=job.generate_orders)
        b = SparkVertexOperator(task_id="b", parallelism=2, fn=job.clean_orders)
        c = SparkVertexOperator(task_id="c", parallelism=3, fn=job.clean_orders)
        a >> b >> c
    edges = {(e.src, e.dst): e.distribution.name for e in regionflow.transform(dag, config=config).plan.graph.edges}
    assert edges == {("a", "b"): "FORWARD", ("b", "c"): "RESCALE"}


def test_several_producers_with_one_exchange_and_the_decorator(config):
    @spark_vertex(parallelism=2)
    def joined(spark, inputs, ctx):
        return inputs["a"]

    with new_dag() as dag:
        a = SparkVertexOperator(task_id="a", parallelism=2, fn=job.generate_orders)
        b = SparkVertexOperator(task_id="b", parallelism=1, fn=job.generate_products)
        [a, b] >> broadcast() >> joined()
    graph = regionflow.transform(dag, mode="batch", config=config).plan.graph
    assert {(e.src, e.dst, e.distribution.name) for e in graph.edges} == {("a", "joined", "BROADCAST"),
                                                                         ("b", "joined", "BROADCAST")}


def test_invalid_graph_fails_at_parse_time_naming_the_edge(config):
    with new_dag() as dag:
        a = SparkVertexOperator(task_id="a", parallelism=2, fn=job.generate_orders)
        b = SparkVertexOperator(task_id="b", parallelism=3, fn=job.clean_orders)
        a >> forward() >> b
    with pytest.raises(JobGraphError, match="a -> b is FORWARD but the parallelisms differ"):
        regionflow.transform(dag, config=config)


@pytest.mark.parametrize("max_shards", [0, -1, 2.5, True, "4"])
def test_a_bad_max_shards_is_refused_not_replaced_by_the_default(config, max_shards):
    with new_dag() as dag:
        SparkVertexOperator(task_id="a", parallelism=2, fn=job.generate_orders)
    with pytest.raises(JobGraphError) as info:
        regionflow.transform(dag, config=config, max_shards=max_shards)
    assert f"max_shards={max_shards!r}" in str(info.value) and ">= 1" in str(info.value)


def test_an_exchange_between_a_vertex_and_another_task_names_both(config):
    with new_dag():
        a = SparkVertexOperator(task_id="a", parallelism=2, fn=job.generate_orders)
        with pytest.raises(JobGraphError, match="'a' >> hash.*'e'.*plain >>"):
            a >> hash_by("k") >> EmptyOperator(task_id="e")
        with pytest.raises(JobGraphError, match="'f' >> forward.*plain >>"):
            EmptyOperator(task_id="f") >> forward() >> a


@pytest.mark.parametrize("arguments, named", [
    ({"resources": "cpu=1"}, "resources='cpu=1' is not a mapping"),
    ({"resources": {"cpu": float("nan")}}, "resource 'cpu' is nan"),
    ({"resources": {"cpu": "1"}}, "resource 'cpu' must be a number"),
    ({"resources": {"cpu": 1, "heap_mib": 1000.5}},
     "resources.heap_mib is 1000.5; memory sizes are whole MiB: write 1001"),
    ({"reads": 3}, "reads=3 is not a path or a list of paths"),
])
def test_bad_operator_resources_fail_at_parse_naming_the_vertex(arguments, named):
    with new_dag():
        with pytest.raises(RegionflowError) as info:
            SparkVertexOperator(task_id="v", parallelism=1, fn=job.generate_orders, **arguments)
    assert "vertex 'v'" in str(info.value) and named in str(info.value)


@pytest.mark.parametrize("arguments, named", [
    ({"fn": 42}, "vertex 'v'.fn must be a string"), ({"fn": "clean orders"}, "vertex 'v'.fn = 'clean orders'"),
    ({"sink": 123}, "vertex 'v'.sink must be a string or object"),
    ({"parallelism": 10**9}, "vertex 'v'.parallelism is 1000000000; it must be at most 32768"),
    ({"sink": "../../etc"}, "vertex 'v': sink path '../../etc' leaves"),
])
def test_bad_operator_arguments_fail_at_transform_naming_the_vertex(config, arguments, named):
    with pytest.raises(RegionflowError) as info:
        with new_dag() as dag:
            SparkVertexOperator(task_id="v", **{"parallelism": 1, "fn": job.generate_orders, **arguments})
        regionflow.transform(dag, config=config)
    assert named in str(info.value)


def test_dag_without_vertices_is_refused(config):
    with new_dag("empty") as dag:
        EmptyOperator(task_id="x")
    with pytest.raises(RegionflowError, match="no SparkVertexOperator"):
        regionflow.transform(dag, config=config)


def test_transforming_twice_says_the_dag_was_already_transformed(config):
    dag, _ = example(config)
    with pytest.raises(RegionflowError) as info:
        regionflow.transform(dag, config=config)
    assert str(info.value) == ("DAG 'orders_daily' was already transformed (its vertices are region tasks now); call "
                               "regionflow.transform(dag) once, at the end of the DAG file")


def test_reads_none_is_no_reads_and_a_whole_float_heap_is_whole_mib(config):
    with new_dag() as dag:
        vertex = SparkVertexOperator(task_id="v", parallelism=1, fn=job.generate_orders, reads=None,
                                     resources={"cpu": 1, "heap_mib": 512.0})
    assert vertex.reads == () and vertex.vertex_resources.heap_mib == 512
    assert regionflow.transform(dag, config=config).plan.graph.vertices["v"].reads == ()


def test_untransformed_vertex_refuses_to_run():
    vertex = SparkVertexOperator(task_id="v", parallelism=1, fn=job.generate_orders)
    with pytest.raises(RuntimeError, match="regionflow.transform"):
        vertex.execute({})


def test_invalid_graph_is_a_dag_import_error(tmp_path):
    from airflow.dag_processing.dagbag import DagBag

    (tmp_path / "bad_dag.py").write_text(
        "from datetime import datetime\n"
        "from airflow.sdk import DAG\n"
        "import regionflow\n"
        "from regionflow.examples import orders as job\n"
        "from regionflow.operators import SparkVertexOperator, forward\n"
        "with DAG('bad', schedule=None, start_date=datetime(2026, 1, 1)) as dag:\n"
        "    a = SparkVertexOperator(task_id='a', parallelism=2, fn=job.generate_orders)\n"
        "    b = SparkVertexOperator(task_id='b', parallelism=3, fn=job.clean_orders)\n"
        "    a >> forward() >> b\n"
        "regionflow.transform(dag)\n"
    )
    bag = DagBag(str(tmp_path))
    (message,) = bag.import_errors.values()
    assert "FORWARD but the parallelisms differ" in message


def test_cli_plan_of_a_dag_file(capsys):
    assert main(["plan", os.path.join(REPO, "dags", "orders_daily.py"), "--dag-id", "orders_daily",
                 "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["mode"] == "pointwise-pipelined-only"
    assert data["logical_regions"] == [["orders", "clean", "enrich"], ["products"], ["totals"]]
    assert main(["plan", os.path.join(REPO, "dags", "orders_daily.py"), "--dag-id", "nope"]) == 2
    assert "no regionflow job 'nope'" in capsys.readouterr().err


def test_config_errors_name_the_option():
    with pytest.raises(RegionflowError, match=r"\[regionflow\] max_shards = 0 must be at least 1"):
        RegionflowConfig.from_values(lambda name: {"max_shards": "0"}.get(name, ""), airflow_home="/x")
    with pytest.raises(RegionflowError, match="spark_conf is not valid JSON"):
        RegionflowConfig.from_values(lambda name: {"spark_conf": "{oops"}.get(name, ""), airflow_home="/x")
    defaults = RegionflowConfig.from_values(lambda name: "", airflow_home="/home/af")
    assert defaults.store_url == "sqlite:////home/af/regionflow.db" and defaults.max_shards == 8
    assert defaults.cluster.total_slots == Cluster.local_default().total_slots
    assert defaults.backend == "session" and defaults.slot_idle_timeout == 600.0
    with pytest.raises(RegionflowError, match=r"\[regionflow\] backend = 'yarn'"):
        RegionflowConfig.from_values(lambda name: {"backend": "yarn"}.get(name, ""), airflow_home="/x")
    with pytest.raises(RegionflowError, match=r"\[regionflow\] slot_idle_timeout = -1.0 must be at least 0"):
        RegionflowConfig.from_values(lambda name: {"slot_idle_timeout": "-1"}.get(name, ""), airflow_home="/x")


@pytest.mark.parametrize("option, value, message", [
    ("blocklist_expiry", "0", r"\[regionflow\] blocklist_expiry = 0.0 must be greater than 0"),
    ("blocklist_expiry", "nan", r"\[regionflow\] blocklist_expiry = 'nan' must be a finite number"),
    ("resource_wait_timeout", "inf", r"\[regionflow\] resource_wait_timeout = 'inf' must be a finite number"),
    ("session_base_port", "70000", r"\[regionflow\] session_base_port = 70000 must be at most 65535"),
    ("session_base_port", "80", r"\[regionflow\] session_base_port = 80 must be at least 1024"),
    ("hosts", "a:slots=x", r"\[regionflow\] hosts = 'a:slots=x': "),
    ("mode", "fast", r"\[regionflow\] mode: .*'fast'"),
    ("spark_conf", '{"spark.a": {"b": 1}}', r"\[regionflow\] spark_conf: 'spark.a' must be a string"),
])
def test_bad_options_are_refused_at_config_load_naming_the_option(option, value, message):
    with pytest.raises(RegionflowError, match=message):
        RegionflowConfig.from_values(lambda name: {option: value}.get(name, ""), airflow_home="/x")


def test_spark_conf_booleans_are_spelled_as_spark_spells_them():
    config = RegionflowConfig.from_values(
        lambda name: {"spark_conf": '{"spark.sql.adaptive.enabled": false, "spark.x": 2}'}.get(name, ""),
        airflow_home="/x")
    assert config.spark_conf == {"spark.sql.adaptive.enabled": "false", "spark.x": "2"}


def test_region_tasks_can_name_their_executor_alias(config):
    with new_dag("hybrid") as dag:
        EmptyOperator(task_id="plain")
        SparkVertexOperator(task_id="v", parallelism=1, fn=job.generate_products)
    regionflow.transform(dag, config=config, executor="regionflow")
    assert dag.get_task("v").executor == "regionflow"
    assert dag.get_task("plain").executor is None


def test_speculation_options_come_from_the_config_and_name_the_option_at_fault():
    options = {"speculation": "on", "speculation_quantile": "0.5", "speculation_min_runtime": "30"}
    config = RegionflowConfig.from_values(lambda name: options.get(name, ""), airflow_home="/x")
    assert config.speculation is True
    assert (config.speculation_config.quantile, config.speculation_config.min_runtime,
            config.speculation_config.multiplier) == (0.5, 30.0, 1.5)
    defaults = RegionflowConfig.from_values(lambda name: "", airflow_home="/x")
    assert defaults.speculation is False and defaults.speculation_config.quantile == 0.75
    with pytest.raises(RegionflowError, match=r"\[regionflow\] speculation_quantile = '1.5'.*quantile"):
        RegionflowConfig.from_values(lambda name: {"speculation_quantile": "1.5"}.get(name, ""), airflow_home="/x")
    with pytest.raises(RegionflowError, match=r"\[regionflow\] speculation_multiplier = '0.5'"):
        RegionflowConfig.from_values(lambda name: {"speculation_multiplier": "0.5"}.get(name, ""), airflow_home="/x")
    with pytest.raises(RegionflowError, match=r"\[regionflow\] speculation"):
        RegionflowConfig.from_values(lambda name: {"speculation": "maybe"}.get(name, ""), airflow_home="/x")


def test_transform_takes_speculation_defaults_from_the_config_and_overrides_named_keys():
    options = {"hosts": "h1:slots=4;h2:slots=2", "max_shards": "2", "speculation": "on",
               "speculation_quantile": "0.5", "speculation_min_runtime": "30"}
    config = RegionflowConfig.from_values(lambda name: options.get(name, ""), airflow_home="/x")
    dag, _ = example(config)  # transform() without speculation arguments
    sensors = [task for task in dag.tasks if task.task_id.endswith("__speculation")]
    assert sensors and {sensor.config.quantile for sensor in sensors} == {0.5}
    assert {sensor.config.min_runtime for sensor in sensors} == {30.0}
    with new_dag("overridden") as dag:
        SparkVertexOperator(task_id="v", parallelism=4, fn=job.generate_orders)
    result = regionflow.transform(dag, config=config, max_shards=2,
                                  speculation_config={"multiplier": 3, "quantile": ""})
    sensor = next(task for task in dag.tasks if task.task_id.endswith("__speculation"))
    assert (sensor.config.multiplier, sensor.config.quantile, sensor.config.min_runtime) == (3.0, 0.5, 30.0)
    assert any(policy.enabled for policy in result.speculation.values())
    with new_dag("off") as dag:
        SparkVertexOperator(task_id="v", parallelism=4, fn=job.generate_orders)
    regionflow.transform(dag, config=config, max_shards=2, speculation=False)
    assert not [task for task in dag.tasks if task.task_id.endswith("__speculation")]


def test_an_undeclared_regionflow_option_is_refused_with_the_closest_one():
    from regionflow.config import check_option_names

    check_option_names(["hosts", "blocklist_expiry", "BACKEND"])
    with pytest.raises(RegionflowError, match=r"\[regionflow\] session_idle_timeout was renamed slot_idle_timeout "
                                              r"\(same meaning\): rename it in airflow.cfg or "
                                              r"AIRFLOW__REGIONFLOW__SLOT_IDLE_TIMEOUT"):
        check_option_names(["hosts", "session_idle_timeout"])
    with pytest.raises(RegionflowError, match=r"\[regionflow\] blocklist_expire is not an option of regionflow "
                                              r"\(did you mean 'blocklist_expiry'\?\)"):
        check_option_names(["hosts", "blocklist_expire"])


def test_an_undeclared_option_in_airflow_cfg_fails_config_loading(monkeypatch):
    from airflow.configuration import conf

    monkeypatch.setenv("AIRFLOW__REGIONFLOW__MAX_SHARD", "4")
    assert conf.get("regionflow", "max_shard") == "4"
    with pytest.raises(RegionflowError, match="max_shard is not an option of regionflow .*did you mean .max_shards.*"
                                              "AIRFLOW__REGIONFLOW__MAX_SHARD"):
        RegionflowConfig.from_airflow()


def test_a_bad_option_value_says_where_it_was_set(monkeypatch):
    monkeypatch.setenv("AIRFLOW__REGIONFLOW__BLOCKLIST_EXPIRY", "0")
    with pytest.raises(RegionflowError, match=r"\[regionflow\] blocklist_expiry = 0.0 must be greater than 0 \(set "
                                              r"by the environment variable AIRFLOW__REGIONFLOW__BLOCKLIST_EXPIRY\)"):
        RegionflowConfig.from_airflow()


def test_the_first_region_task_carries_the_plan_for_the_ui(config):
    from regionflow.core.plan import Plan

    dag, result = example(config)
    carriers = []
    for task in dag.tasks:
        settings = (task.partial_kwargs["executor_config"] if hasattr(task, "partial_kwargs")
                    else task.executor_config).get("regionflow") or {}
        if "plan" in settings:
            carriers.append((task.task_id, settings["plan"]))
    ((task_id, reference),) = carriers  # once per DAG, not per region
    assert task_id == result.plan.region_task_id(0)
    json.dumps(reference)  # it is JSON: it goes into the serialized DAG
    again = Plan.from_reference(reference)
    assert again.to_dict() == result.plan.to_dict()
    assert "fn" in reference["job"]["vertices"][0]  # a reference by name, never the function itself


def test_a_vertex_no_host_can_serve_is_a_dag_import_error_naming_vertex_and_resource(config):
    with new_dag("gpu_dag") as dag:
        load = SparkVertexOperator(task_id="load", parallelism=2, fn=job.generate_orders,
                                   resources={"cpu": 1, "heap_mib": 512})
        train = SparkVertexOperator(task_id="train", parallelism=2, fn=job.clean_orders,
                                    resources={"cpu": 1, "heap_mib": 512, "gpu": 1}, slot_sharing_group="gpu")
        load >> forward() >> train
    with pytest.raises(JobGraphError) as error:
        regionflow.transform(dag, config=config)
    message = str(error.value)
    assert message.startswith("DAG 'gpu_dag' cannot run on this cluster: vertex 'train' asks cpu=1,heap=512MiB,gpu=1")
    assert "gpu: asked 1 per slot, the largest slot offers 0 (host 'h1')" in message


def test_adaptive_vertices_are_decided_from_the_configured_slots_at_parse_time(config):
    with new_dag("adaptive_dag") as dag:
        orders = SparkVertexOperator(task_id="orders", parallelism=(2, 8), fn=job.generate_orders)
        totals = SparkVertexOperator(task_id="totals", parallelism=[2, 8], fn=job.total_by_customer, sink="t")
        orders >> totals  # equal declarations: FORWARD
    result = regionflow.transform(dag, mode="all-pipelined", config=config)
    assert {name: v.parallelism for name, v in result.plan.graph.vertices.items()} == {"orders": 6, "totals": 6}
    assert result.plan.graph.edges[0].distribution.name == "FORWARD"
    (task,) = [t for t in dag.tasks]
    reference = task.partial_kwargs["executor_config"]["regionflow"]["plan"] if hasattr(task, "partial_kwargs") \
        else task.executor_config["regionflow"]["plan"]
    assert reference["parallelism"] == {"orders": 6, "totals": 6}


def test_an_adaptive_region_of_one_shard_carries_smaller_requests_and_a_fixed_one_none(config):
    from regionflow.contract import from_executor_config

    with new_dag("elastic_dag") as dag:
        orders = SparkVertexOperator(task_id="orders", parallelism=(1, 8), fn=job.generate_orders)
        per = SparkVertexOperator(task_id="per", parallelism=(1, 8), fn=job.count_per_customer, sink="p")
        SparkVertexOperator(task_id="fixed", parallelism=2, fn=job.generate_products)  # a region of its own
        orders >> hash_by("customer_id") >> per
    regionflow.transform(dag, mode="all-pipelined", config=config)
    elastic = from_executor_config(dag.get_task("orders__per").executor_config, "elastic_dag.orders__per")
    assert len(elastic.shard(0)[0]) == 6  # planned for the cluster's 6 slots
    assert [len(shape) for shape in elastic.smaller_of(0)] == [3, 1]
    assert from_executor_config(dag.get_task("fixed").executor_config, "elastic_dag.fixed").smaller == ()


def test_region_tasks_carry_the_job_which_stays_out_of_the_serialized_dag(config):
    """transform leaves the JobGraph on each region task (plain and mapped), registers it nowhere global,
    and Airflow's serialization (a fixed set of fields) does not see it."""
    from airflow.serialization.serialized_objects import DagSerialization

    from regionflow.core.registry import JobRegistry, collecting, current_registry
    from regionflow.units.dags import JOB_ATTRIBUTE, attached_job, registered_job

    dag, result = example(config)
    graph = result.plan.graph
    assert current_registry() is None  # no collecting block here: nothing was kept
    region_tasks = list(result.region_tasks.values())
    assert {type(t).__name__ for t in region_tasks} == {"RegionOperator", "MappedOperator"}
    assert all(getattr(task, JOB_ATTRIBUTE) is graph for task in region_tasks)
    assert attached_job(dag) is graph and registered_job(dag) is graph
    assert attached_job(new_dag("orders_daily")) is None  # a DAG without region tasks
    subset = dag.partial_subset("products", include_upstream=False, include_downstream=False)
    copied = attached_job(subset)  # a copied task (shallow_copy_attrs) shares the graph's vertices
    assert copied is not None and copied.name == graph.name and copied.vertices is graph.vertices

    serialized = DagSerialization.to_dict(dag)
    assert JOB_ATTRIBUTE not in json.dumps(serialized)
    restored = DagSerialization.from_dict(serialized)
    assert all(not hasattr(task, JOB_ATTRIBUTE) for task in restored.tasks)

    registry = JobRegistry()
    with collecting(registry):
        _, again = example(config)
    assert registry.names() == ["orders_daily"] and registry.get("orders_daily") is again.plan.graph
