"""Adaptive parallelism decided at grant time, on real Spark (the shared Spark Connect server, 4 slots):
a [1, 8] vertex with ``target_bytes_per_subtask`` planned at 4 (the cluster's slots) runs at 1 once its
unit sees the few KB it reads, with the same result as when it keeps the planned 4; and an adaptive
region whose full request would wait starts at once with fewer slots (an elastic request). Cut into shards,
the vertex keeps its planned value, and its producers write key groups (one directory per producer unit,
sorted by key group) that any value would read once."""
import glob
import os

import pyarrow.parquet

from regionflow.core.adaptive import apply, decided_plan
from regionflow.core.graph import load_job
from regionflow.core.plan import Plan
from regionflow.examples.orders import ORDER_COUNT
from regionflow.scheduling.hosts import Cluster
from regionflow.units.layout import UnitLayout
from regionflow.units.runner import LocalRunner, RunOptions

JOB = "rf_test_jobs:adaptive_bytes_job"


def run(tmp_path, shared_servers, max_shards, planned_for=4, runners=None):
    servers, _ = shared_servers
    lines: list[str] = []
    plan = decided_plan(load_job(JOB), planned_for, "all-blocking")
    options = RunOptions(data_dir=str(tmp_path), cluster=Cluster.local_default(4), max_shards=max_shards,
                         progress=lines.append, servers=servers, keep_partitions=True)
    runner = LocalRunner(JOB, plan, options)
    summary = runner.run()
    unit = runner.layout.units_of_logical(1)[0]
    committed = runner.store.committed(runner.keys[unit])
    assert committed is not None
    sink = summary.sinks["per_customer"]
    parts = sorted(name for name in os.listdir(sink["path"]) if name.startswith("part-"))
    if runners is not None:
        runners.append(runner)
    return lines, committed.manifest, sink, parts


def test_the_bytes_read_decide_the_value_when_the_unit_starts_with_the_same_result(shared_servers, tmp_path):
    lines, manifest, sink, parts = run(tmp_path / "one-shard", shared_servers, 1)
    assert manifest["parallelism"] == {"per_customer": 1}
    said = [line for line in lines if "adaptive parallelism" in line]
    assert len(said) == 1 and "per_customer=1 for 4 granted slot(s) and" in said[0], lines
    assert "(planned per_customer=4)" in said[0]
    assert parts == ["part-00000.parquet"]  # one subtask wrote the sink

    # four shards: each shard has its own grant, so the planned value stays, and the result is the same
    kept_lines, kept_manifest, kept_sink, kept_parts = run(tmp_path / "four-shards", shared_servers, 4)
    assert kept_manifest["parallelism"] == {"per_customer": 4}  # the planned value, in each of the 4 shards
    assert any("planned values kept: the region runs as several shards" in line for line in kept_lines)
    assert len(kept_parts) == 4
    assert (sink["rows"], sink["checksum"]) == (kept_sink["rows"], kept_sink["checksum"]) and sink["rows"] == 500

    # planned at 6 in 4 shards (2, 1, 2, 1 subtasks): orders writes its rows in K = 8 key groups (the declared
    # max), one directory per producer unit sorted by key group; each shard reads the range of its subtasks,
    # and the rows are the reference's
    runners: list[LocalRunner] = []
    _, six_manifest, six_sink, _ = run(tmp_path / "six-in-four", shared_servers, 4, planned_for=6, runners=runners)
    assert six_manifest["parallelism"] == {"per_customer": 6}
    assert (six_sink["rows"], six_sink["checksum"]) == (sink["rows"], sink["checksum"])
    [runner] = runners
    [edge] = runner.layout.key_groups
    assert runner.layout.key_groups == {edge: 8}
    producers = [runner.keys[u] for u in runner.layout.units_of_logical(0)]  # orders: 2 shards
    written = 0
    for producer in producers:
        dataset = runner.store.partition_path(producer, edge)
        assert sorted(n for n in os.listdir(dataset) if n.startswith("_rf_unit=")) == ["_rf_unit=0"]
        written += runner.store.fs.size(f"{dataset}/_rf_unit=0")
        seen: set[int] = set()
        for path in glob.glob(os.path.join(dataset, "_rf_unit=0", "*.parquet")):
            groups = pyarrow.parquet.read_table(path, columns=["_rf_bucket"]).column("_rf_bucket").to_pylist()
            assert groups == sorted(groups), path  # each file sorted by key group
            seen |= set(groups)
        assert seen == set(range(8))  # 500 customers fill every key group

    # any value in [1, 8] the consumer were given would read those files, each byte counted once
    for value in range(1, 9):
        layout = UnitLayout(Plan(apply(runner.plan.graph, {"per_customer": value}), "all-blocking"), 4)
        assert [layout.keys[u] for u in layout.units_of_logical(0)] == producers  # the producer units as written
        assert sum(layout.input_bytes(u, runner.store) for u in layout.units_of_logical(1)) == written, value


def test_an_adaptive_region_starts_at_once_with_the_free_slots_when_its_full_request_would_wait(
        shared_servers, tmp_path):
    servers, _ = shared_servers
    lines: list[str] = []
    job = "rf_test_jobs:elastic_job"
    plan = decided_plan(load_job(job), 4, "all-pipelined")
    assert plan.graph.vertices["orders"].parallelism == 4
    options = RunOptions(data_dir=str(tmp_path), cluster=Cluster.local_default(4), progress=lines.append,
                         servers=servers)
    runner = LocalRunner(job, plan, options)
    summary = runner.run()
    # orders: 4 one-subtask regions (no edges) in one shard, 4 slots asked, 1 free
    assert any("orders[shard 0: 4 regions]: starts with 1 of the 4 slots it asks for" in line for line in lines), lines
    assert any("adaptive parallelism orders=1 for 1 granted slot(s)" in line for line in lines), lines
    units = {unit.name.partition("[")[0]: unit for unit in summary.units}
    hold, orders = units["hold"], units["orders"]
    assert (hold.slots, orders.slots) == (3, 1) and orders.start < hold.end  # ran side by side
    committed = runner.store.committed(runner.keys[runner.layout.units_of_logical(1)[0]])
    assert committed is not None and committed.manifest["parallelism"] == {"orders": 1}
    assert summary.sinks["orders"]["rows"] == ORDER_COUNT
