"""`regionflow gc`: orphaned attempt dirs and partitions of finished runs go; a running run (live slot
requests in regionflow's store), a recent run and committed manifests stay. Real store, real files."""
import json
import os
import time

import pytest

from regionflow.cli import main
from regionflow.cli.gc import collect
from regionflow.spark.data.store import run_key_for
from regionflow.store import RegionflowStore


def plant(root, run, files):
    for relative, size in files.items():
        path = root / run / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x" * size)


@pytest.fixture
def data(tmp_path):
    root = tmp_path / "data"
    finished, running, recent = run_key_for("d", "done"), run_key_for("d", "live"), run_key_for("d", "new")
    for run in (finished, running, recent):
        plant(root, run, {
            "_attempts/orders-0/a2-lost/e0/_rf_unit=0/part-00000.parquet": 300,  # an orphaned loser
            "units/orders-0/e0/_rf_unit=0/part-00000.parquet": 1000,  # a partition
            "units/orders-0/_manifest.json": 20,
            "units/totals-0/_manifest.json": 20,
        })
    old = time.time() - 3600
    for run in (finished, running):
        for folder, dirs, files in os.walk(root / run):
            for name in dirs + files:
                os.utime(os.path.join(folder, name), (old, old))
        os.utime(root / run, (old, old))
    (root / "not-a-run").mkdir()
    store_url = f"sqlite:///{tmp_path}/regionflow.db"
    store = RegionflowStore.from_config(store_url)
    store.record_waiting("live-bulk", dag_id="d", run_id="live", task_id="t", map_index=-1, try_number=1,
                         job_id="d/live", label="t", requests=[{"unknown": True}])
    return root, store_url, finished


def test_dry_run_lists_exactly_the_planted_orphans_of_the_finished_run(data, capsys):
    root, store_url, finished = data
    assert main(["gc", "--data-dir", str(root), "--store-url", store_url, "--older-than", "600", "--dry-run",
                 "--format", "json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert sorted((item["kind"], os.path.relpath(item["path"], root)) for item in listed["would_remove"]) == [
        ("attempt", f"{finished}/_attempts/orders-0/a2-lost"),
        ("partitions", f"{finished}/units/orders-0/e0"),
    ]
    assert listed["bytes"] == 1300 and os.path.exists(root / finished / "units/orders-0/e0")


def test_gc_removes_them_and_keeps_manifests_running_and_recent_runs(data, capsys):
    root, store_url, finished = data
    assert main(["gc", "--data-dir", str(root), "--store-url", store_url, "--older-than", "600"]) == 0
    assert "removed 2 dir(s), 1300 bytes" in capsys.readouterr().out
    assert not (root / finished / "units/orders-0/e0").exists()
    assert not (root / finished / "_attempts/orders-0/a2-lost").exists()
    assert (root / finished / "units/orders-0/_manifest.json").exists()
    for run in (run_key_for("d", "live"), run_key_for("d", "new")):
        assert (root / run / "units/orders-0/e0/_rf_unit=0/part-00000.parquet").exists()
    live = run_key_for("d", "live")
    assert collect(str(root), {live}, 600) == []  # nothing left to collect
    # without a store every run counts as finished: the live run's old files would go
    assert [g.kind for g in collect(str(root), set(), 600)] == ["attempt", "partitions"]


def test_bad_input_is_an_error_naming_the_option(tmp_path, capsys):
    assert main(["gc"]) == 2 and "--data-dir" in capsys.readouterr().err
    assert main(["gc", "--data-dir", str(tmp_path / "missing")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["gc", "--data-dir", str(tmp_path), "--older-than", "-1"]) == 2
    assert "--older-than" in capsys.readouterr().err
