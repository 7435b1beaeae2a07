"""The session backend through Airflow: region tasks run as client sessions on the host's long-lived
Spark Connect server (started by the embedded stack, as `regionflow session start` would), give the
reference checksum in every mode, a server that does not answer fails the task at once as a lost
host, and fifty runs leave no partition on disk. One stack for the module."""
import glob
import json
import os
import re
import shutil

import pytest
from test_e2e import DAGS, MODES, run

from regionflow.cli import main
from regionflow.operators.region import dag_run_outputs
from regionflow.spark.store import run_key_for
from regionflow.store import RegionflowStore
from regionflow.testing import EmbeddedAirflow

pytestmark = pytest.mark.timeout(1200)


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    home = tmp_path_factory.mktemp("airflow-session")
    dags = home / "dags"
    os.makedirs(dags)
    shutil.copy(os.path.join(DAGS, "rf_modes.py"), dags / "rf_modes.py")
    shutil.copy(os.path.join(DAGS, "rf_disk.py"), dags / "rf_disk.py")
    options = {"hosts": "localhost:slots=4", "max_shards": "1", "data_dir": str(home / "data"), "backend": "session"}
    with EmbeddedAirflow(str(home), str(dags), regionflow_options=options) as airflow:
        yield airflow
    assert [status.state for status in airflow.session_servers.status()] == ["down"]


def task_log_file(stack, dag_id, run_id, task_id, try_number):
    """The try's log file as written (the exception's text is in its structured error detail)."""
    path = os.path.join(stack.logs_dir, f"dag_id={dag_id}", f"run_id={run_id}", f"task_id={task_id}",
                        f"attempt={try_number}.log")
    with open(path, encoding="utf-8") as handle:
        return handle.read()


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


def test_a_server_that_does_not_answer_fails_the_task_at_once_as_a_lost_host(stack):
    stack.session_servers.stop()
    try:
        run_id = run(stack, "orders_all_pipelined")
        assert stack.wait_for_run("orders_all_pipelined", run_id, timeout=300) == "failed"
        [ti] = stack.task_instances("orders_all_pipelined", run_id)
        log = task_log_file(stack, "orders_all_pipelined", run_id, ti["task_id"], ti["try_number"])
        assert "host localhost lost" in log and "regionflow session start --host localhost" in log
    finally:
        stack.session_servers.start()
    stack.clear_task("orders_all_pipelined", run_id, [ti["task_id"]])
    assert stack.wait_for_run("orders_all_pipelined", run_id, timeout=300) == "success"


@pytest.mark.long  # ~4 min here; the every-mode test above checks that its four runs leave no partition
def test_fifty_runs_leave_no_partition_and_gc_lists_exactly_a_planted_orphan(stack, capsys):
    """Partitions are released in the Airflow path run after run (partition_retention = 0): fifty runs
    of a two-region blocking job, triggered at once (they queue in the FIFO pool), all succeed and leave
    no partition dataset and no attempt dir; what stays of a run is its sink and manifests, the same for
    every run, so the data dir grows by the sinks alone. `regionflow gc --dry-run` then finds nothing to
    remove among them, and lists exactly the orphaned attempt dir planted into one finished run."""
    stack.wait_for_dag("disk_runs")
    stack.unpause("disk_runs")
    run_ids = [stack.trigger("disk_runs") for _ in range(50)]
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
