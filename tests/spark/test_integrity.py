"""A committed partition changed after its commit (`regionflow.spark.data.integrity`): pure checks on files
written by hand, then on real Spark (the shared Connect server): a truncated partition fails its consumer
naming the producer unit and the file, the producer run again is computed anew and the job's answer is
the reference's; bytes changed in place are caught by Parquet's page checksums."""
import dataclasses
import glob
import os

import pytest

from regionflow.core.graph import load_job
from regionflow.core.plan import Plan
from regionflow.spark.data.integrity import VERIFY_PAGE_CHECKSUMS, PartitionCorrupted, check_partition, damage
from regionflow.spark.data.store import PartitionStore
from regionflow.units.runner import LocalRunner, RunFailed, RunOptions

pytestmark = pytest.mark.timeout(600)
ORDERS = "regionflow.examples.orders:job"


def write(path, data: bytes) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as handle:
        handle.write(data)


def committed_unit(tmp_path):
    store = PartitionStore(str(tmp_path), "run")
    attempt = store.attempt_dir("producer", "a1")
    write(os.path.join(attempt, "e3", "_rf_unit=0", "part-00000.parquet"), b"x" * 100)
    write(os.path.join(attempt, "e3", "_rf_unit=1", "part-00000.parquet"), b"y" * 50)
    write(os.path.join(attempt, "e4", "_rf_unit=-1", "part-00000.parquet"), b"z" * 10)
    store.commit("producer", "a1", {"unit": "clean[0]"})
    return store, store.committed("producer")


def test_the_commit_records_every_file_and_an_unchanged_unit_passes(tmp_path):
    store, unit = committed_unit(tmp_path)
    assert unit.manifest["files"] == {"e3/_rf_unit=0/part-00000.parquet": 100, "e3/_rf_unit=1/part-00000.parquet": 50,
                                      "e4/_rf_unit=-1/part-00000.parquet": 10}
    assert damage(store.fs, unit.path, unit.manifest) is None
    check_partition(store.fs, store.partition_path("producer", 3), "_rf_unit=0")


def test_a_consumer_reading_two_edges_of_one_producer_reads_its_manifest_once(tmp_path):
    store, _ = committed_unit(tmp_path)
    reads = []

    class CountingFs(type(store.fs)):
        def read_text(self, path):
            reads.append(path)
            return super().read_text(path)

    fs, manifests = CountingFs(), {}
    check_partition(fs, store.partition_path("producer", 3), "_rf_unit=0", manifests)
    check_partition(fs, store.partition_path("producer", 4), None, manifests)
    assert [os.path.basename(path) for path in reads] == ["_manifest.json"]
    check_partition(fs, store.partition_path("producer", 3), "_rf_unit=0")  # no cache: read again
    assert len(reads) == 2


def test_a_truncated_or_missing_file_is_named_with_its_producer_and_only_where_it_is_read(tmp_path):
    store, unit = committed_unit(tmp_path)
    damaged = os.path.join(unit.path, "e3", "_rf_unit=1", "part-00000.parquet")
    with open(damaged, "r+b") as handle:
        handle.truncate(20)
    check_partition(store.fs, store.partition_path("producer", 3), "_rf_unit=0")  # another consumer's part
    with pytest.raises(PartitionCorrupted) as caught:
        check_partition(store.fs, store.partition_path("producer", 3), "_rf_unit=1")
    message = str(caught.value)
    assert "producer unit clean[0] (attempt a1)" in message and damaged in message
    assert "is 20 bytes, but 50 were committed" in message and "run the producer unit again" in message
    os.remove(os.path.join(unit.path, "e4", "_rf_unit=-1", "part-00000.parquet"))
    with pytest.raises(PartitionCorrupted, match="e4/_rf_unit=-1/part-00000.parquet is missing"):
        check_partition(store.fs, store.partition_path("producer", 4), None)


def test_a_released_dataset_is_not_damage_and_a_damaged_unit_is_set_aside(tmp_path):
    store, unit = committed_unit(tmp_path)
    store.release([store.partition_path("producer", 4)])  # every consumer of e4 committed
    assert damage(store.fs, unit.path, unit.manifest) is None
    os.remove(os.path.join(unit.path, "e3", "_rf_unit=0", "part-00000.parquet"))
    problem = damage(store.fs, unit.path, unit.manifest)
    assert problem is not None and "missing" in problem
    moved = store.set_aside("producer", problem)
    assert store.committed("producer") is None and os.path.exists(os.path.join(moved, "_manifest.json"))


def test_a_partition_truncated_after_its_commit_fails_its_consumer_and_running_the_producer_again_repairs_it(
        shared_servers, tmp_path, capfd):
    from regionflow.spark.data.task import UnitTask
    from regionflow.spark.driver.program import run_unit
    from regionflow.spark.servers.auth import remote_session

    servers, _ = shared_servers
    plan = Plan(load_job(ORDERS), "all-blocking")
    truncated = []

    def corrupt_clean(line: str) -> None:  # runs before the consumers of clean are submitted
        if "finished clean" in line and not truncated:
            units = os.path.join(str(tmp_path), "run", "units")
            for folder, _, names in os.walk(units):
                if "clean" in folder:
                    for name in (n for n in names if n.endswith(".parquet")):
                        with open(os.path.join(folder, name), "r+b") as handle:
                            handle.truncate(8)
                        truncated.append(os.path.join(folder, name))

    # partitions kept (Airflow: partition_retention > 0): clean, run again, reads orders' partitions again
    options = RunOptions(data_dir=str(tmp_path), cluster=servers.cluster, progress=corrupt_clean, retries=0,
                         servers=servers, run_id="run", keep_partitions=True)
    runner = LocalRunner(ORDERS, plan, options)
    with pytest.raises(RunFailed) as caught:
        runner.run()
    assert truncated
    message = str(caught.value)
    assert "enrich" in message and "was changed after its commit" in message and "producer unit clean" in message
    assert "is 8 bytes, but" in message and any(path in message for path in truncated)

    # what a cleared region task does: the producer runs again (a new attempt of the same unit task), finds its
    # committed unit damaged, sets it aside and computes it anew; then the consumer reads it and commits
    spark = remote_session(servers.server(servers.cluster.hosts[0].name).url,
                           servers.server(servers.cluster.hosts[0].name).token)
    try:
        for vertex in ("clean", "enrich"):
            [path] = glob.glob(os.path.join(runner.work_dir, f"{vertex}*-a1-*.json"))
            task = dataclasses.replace(UnitTask.read(path), attempt_id=f"again-{vertex}")
            run_unit(spark, task.plan(), task)
    finally:
        spark.stop()
    assert "damaged" in capfd.readouterr().err
    for key in runner.keys:
        unit = runner.store.committed(key)
        if key.startswith(("clean", "enrich")):
            assert unit is not None and unit.attempt_id.startswith("again-")
            assert damage(runner.store.fs, unit.path, unit.manifest) is None


def test_bytes_changed_in_place_fail_the_read_by_their_page_checksum(shared_servers, tmp_path):
    """On a local data dir Hadoop's .crc files beside each file catch it first; without them (an object
    store, or a file rewritten with its .crc), Parquet's page checksums do, instead of a decoding error."""
    from regionflow.spark.servers.auth import remote_session

    servers, _ = shared_servers
    server = servers.server(servers.cluster.hosts[0].name)
    spark = remote_session(server.url, server.token)
    try:
        path = str(tmp_path / "data")
        spark.range(0, 20000).selectExpr("id", "id * 7 AS v").coalesce(1).write.parquet(path)
        [name] = [n for n in os.listdir(path) if n.endswith(".parquet")]
        for sidecar in glob.glob(os.path.join(path, ".*.crc")):
            os.remove(sidecar)
        with open(os.path.join(path, name), "r+b") as handle:
            size = handle.seek(0, os.SEEK_END)
            handle.seek(size // 3)
            chunk = handle.read(16)
            handle.seek(size // 3)
            handle.write(bytes(b ^ 0xFF for b in chunk))  # same size, other bytes, inside a data page
        with pytest.raises(Exception, match="CRC checksum verification failed"):
            spark.read.options(**VERIFY_PAGE_CHECKSUMS).parquet(path).selectExpr("sum(id)", "sum(v)").collect()
    finally:
        spark.stop()
