"""Adaptive parallelism decided at grant time, on real Spark (the shared Spark Connect server, 4 slots):
a [1, 8] vertex with ``target_bytes_per_subtask`` planned at 4 (the cluster's slots) runs at 1 once its
unit sees the few KB it reads, with the same rows as the plain reference; and an adaptive
region whose full request would wait starts at once with fewer slots (an elastic request). Cut into shards,
the vertex is decided for the run once its producers have committed, and they wrote key groups (one directory
per producer unit, sorted by key group unless the job's last run was decided as one shard) that any value would
read once."""
import glob
import os

import pyarrow.parquet

from regionflow.core.adaptive import apply, decided_plan
from regionflow.core.graph import load_job
from regionflow.core.plan import Plan
from regionflow.examples.orders import ORDER_COUNT
from regionflow.scheduling.hosts import Cluster
from regionflow.spark.data.filesystems import LocalFileSystem
from regionflow.spark.data.history import DecisionHistory
from regionflow.units.layout import UnitLayout
from regionflow.units.runner import LocalRunner, RunOptions

JOB = "rf_test_jobs:adaptive_bytes_job"
SMALL_TARGET_JOB = "rf_test_jobs:adaptive_small_target_job"


def run(tmp_path, shared_servers, max_shards, job=JOB, runners=None):
    servers, _ = shared_servers
    lines: list[str] = []
    plan = decided_plan(load_job(job), 4, "all-blocking")
    options = RunOptions(data_dir=str(tmp_path), cluster=Cluster.local_default(4), max_shards=max_shards,
                         progress=lines.append, servers=servers, keep_partitions=True)
    runner = LocalRunner(job, plan, options)
    summary = runner.run()
    unit = runner.layout.units_of_logical(1)[0]
    committed = runner.store.committed(runner.keys[unit])
    assert committed is not None
    sink = summary.sinks["per_customer"]
    parts = sorted(name for name in os.listdir(sink["path"]) if name.startswith("part-"))
    if runners is not None:
        runners.append(runner)
    return lines, committed.manifest, sink, parts


def key_groups_per_file(runner: LocalRunner, edge: int) -> list[list[int]]:
    """The key group of each row of each file the producers (orders) wrote on key-grouped `edge`, in file order."""
    paths = [path for unit in runner.layout.units_of_logical(0)
             for path in sorted(glob.glob(os.path.join(runner.store.partition_path(runner.keys[unit], edge),
                                                       "_rf_unit=0", "*.parquet")))]
    assert paths
    return [pyarrow.parquet.read_table(path, columns=["_rf_bucket"]).column("_rf_bucket").to_pylist()
            for path in paths]


def history(data_dir, job: str) -> DecisionHistory:
    return DecisionHistory(str(data_dir), job, LocalFileSystem())


def test_the_bytes_read_decide_the_value_when_the_unit_starts_with_the_same_result(shared_servers, tmp_path):
    lines, manifest, sink, parts = run(tmp_path / "one-shard", shared_servers, 1)
    assert manifest["parallelism"] == {"per_customer": 1}
    said = [line for line in lines if "adaptive parallelism" in line]
    assert len(said) == 1 and "per_customer=1 for 4 granted slot(s) and" in said[0], lines
    assert "(planned per_customer=4)" in said[0]
    assert parts == ["part-00000.parquet"]  # one subtask wrote the sink

    # planned as four shards: decided for the run once orders has committed, from the bytes of its key groups,
    # as the decision task does in Airflow; the run goes on as the one shard that value gives
    runners: list[LocalRunner] = []
    run_lines, run_manifest, run_sink, run_parts = run(tmp_path / "four-shards", shared_servers, 4, runners=runners)
    said = [line for line in run_lines if "adaptive parallelism for this run" in line]
    assert len(said) == 1 and "per_customer=1" in said[0] and "1 shard(s)" in said[0], run_lines
    assert run_manifest["parallelism"] == {"per_customer": 1} and run_parts == ["part-00000.parquet"]
    assert (run_sink["rows"], run_sink["checksum"]) == (sink["rows"], sink["checksum"]) and sink["rows"] == 500
    [runner] = runners
    assert [u.name for u in runner.runs] == ["orders[0]", "orders[1]", "per_customer[0]"], runner.runs
    assert runner.store.decisions()["per_customer"]["shards"] == 1
    # the first run of the job: its producers sorted their key groups; the next run's will not
    [edge] = runner.layout.key_groups
    assert all(groups == sorted(groups) for groups in key_groups_per_file(runner, edge))
    assert history(tmp_path / "four-shards", "adaptive_bytes").last_shards("per_customer") == 1


def test_a_region_decided_for_the_run_reads_the_key_groups_of_its_shards_with_the_same_result(
        shared_servers, tmp_path):
    """1 KiB per subtask: decided 8 for the run, 4 shards of 2 subtasks. orders wrote its rows in K = 8 key
    groups (the declared max), one directory per producer unit; the job's last run was decided as one shard,
    so they are not sorted by key group (`spark.data.history`): each shard reads the range of its subtasks out
    of every file, and the rows are the reference's."""
    _, _, reference, _ = run(tmp_path / "one-shard", shared_servers, 1)
    history(tmp_path / "decided", "adaptive_small_target").remember("per_customer", 1, "an-earlier-run")
    runners: list[LocalRunner] = []
    lines, manifest, sink, parts = run(tmp_path / "decided", shared_servers, 4, job=SMALL_TARGET_JOB, runners=runners)
    assert any("adaptive parallelism for this run" in line and "4 shard(s)" in line for line in lines), lines
    assert manifest["parallelism"] == {"per_customer": 8}
    assert parts == [f"part-{first:05d}.parquet" for first in (0, 2, 4, 6)]  # a file per shard of 2 subtasks
    assert (sink["rows"], sink["checksum"]) == (reference["rows"], reference["checksum"])
    [runner] = runners
    assert len(runner.layout.units_of_logical(1)) == 4
    [edge] = runner.layout.key_groups
    assert runner.layout.key_groups == {edge: 8}
    producers = [runner.keys[u] for u in runner.layout.units_of_logical(0)]  # orders: 2 shards
    written = 0
    for producer in producers:
        dataset = runner.store.partition_path(producer, edge)
        assert sorted(n for n in os.listdir(dataset) if n.startswith("_rf_unit=")) == ["_rf_unit=0"]
        written += runner.store.fs.size(f"{dataset}/_rf_unit=0")
    files = key_groups_per_file(runner, edge)
    assert all(set(groups) == set(range(8)) for groups in files)  # 500 customers fill every key group
    assert all(groups != sorted(groups) for groups in files)  # in the rows' own order
    assert history(tmp_path / "decided", "adaptive_small_target").last_shards("per_customer") == 4  # next: sorted

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
