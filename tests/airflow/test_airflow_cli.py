"""``airflow regionflow status | plan DAG_ID | hosts | gc | session``, run as the real ``airflow`` command line,
with Airflow's ``-o/--output``.

One Airflow home for the module (a freshly migrated SQLite database, `EmbeddedAirflow`'s airflow.cfg with the
RegionExecutor, ``[regionflow] hosts`` and a store of its own; no component of a shared stack runs).
Every command runs as a subprocess in its own process group and must not print Airflow's warning
about executors whose provider has no ``cli`` section, which every ``airflow`` command printed before.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time

import pytest

from regionflow.store import RegionflowStore, job_id_for
from regionflow.testing import DEFAULT_EXECUTOR, EmbeddedAirflow

pytestmark = pytest.mark.timeout(600)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HOSTS = "a:slots=2;b:slots=1,cpu=2,mem=4g"
DAG_ID = "orders_daily"
# Printed (as one warning) by every `airflow` command while get_provider_info() had no "cli" entry:
WARNING_LINES = (
    "Please define the 'cli' section in the 'get_provider_info' for custom executors to avoid this warning.",
    "Providers with executors missing 'cli' section in 'get_provider_info': "
    "{'regionflow.executors.RegionExecutor': 'airflow-provider-regionflow'}",
)
PLAIN_DAG = '''from datetime import datetime

from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG

with DAG("plain_dag", schedule=None, start_date=datetime(2026, 1, 1)):
    EmptyOperator(task_id="nothing")
'''
TIMEOUT_S = 600  # an airflow CLI call imports Airflow: seconds on a quiet box, minutes on a throttled one


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    """A migrated Airflow home with the example DAG orders_daily and a DAG without regionflow."""
    root = tmp_path_factory.mktemp("airflow-cli")
    dags = root / "dags"
    dags.mkdir()
    shutil.copy(os.path.join(REPO, "dags", f"{DAG_ID}.py"), dags)
    (dags / "plain_dag.py").write_text(PLAIN_DAG)
    stack = EmbeddedAirflow(str(root / "home"), str(dags), executor=DEFAULT_EXECUTOR,
                            regionflow_options={"backend": "submit", "hosts": HOSTS,
                                                "store_url": f"sqlite:///{root / 'regionflow.db'}"})
    stack.write_config()
    stack.migrate_database(TIMEOUT_S)  # the session's one `airflow db migrate`, or a copy of its result
    return stack


def run(stack: EmbeddedAirflow, program: str, *args: str, env: dict[str, str] | None = None,
        timeout: float = TIMEOUT_S) -> subprocess.CompletedProcess:
    """`program` (``airflow`` or ``regionflow``) with `args` in the stack's home; the warning is never printed."""
    module = "airflow" if program == "airflow" else "regionflow.cli"
    done = subprocess.run([sys.executable, "-m", module, *args], env=stack.child_env() | (env or {}),
                          cwd=stack.home, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=timeout, start_new_session=True)
    for line in WARNING_LINES:
        assert line not in done.stdout + done.stderr, done.stdout[-3000:] + done.stderr[-3000:]
    return done


def succeeded(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def one_line_error(done: subprocess.CompletedProcess, prefix: str) -> str:
    """Exit status 2 and stderr exactly one line starting with `prefix`: no traceback, no log."""
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and lines[0].startswith(prefix), done.stderr[-3000:]
    assert done.stdout == ""
    return lines[0]


def test_providers_list_has_no_warning(home):
    assert "airflow-provider-regionflow" in succeeded(run(home, "airflow", "providers", "list"))


def test_hosts_prints_the_configured_hosts_one_per_line(home):
    out = succeeded(run(home, "airflow", "regionflow", "hosts"))
    assert out.splitlines() == ["a: 2 x [cpu=1,heap=1024MiB] on local[2]", "b: 1 x [cpu=2,heap=4096MiB] on local[2]"]


def test_status_shows_the_pool_empty_then_with_a_grant_a_waiting_region_and_a_block(home):
    url = home.regionflow_options["store_url"]
    store_file = url[len("sqlite:///"):]
    out = succeeded(run(home, "airflow", "regionflow", "status"))
    assert out.splitlines() == [
        f"slot pool: 3 slots, 0 used, 3 free (store {url}, not created yet: nothing has run)",
        "hosts:",
        "  a: 0/2 slots used, 2 free, slot [cpu=1,heap=1024MiB] on local[2]",
        "  b: 0/1 slots used, 1 free, slot [cpu=2,heap=4096MiB] on local[2]",
        "queue (FIFO, oldest first): empty",
        "blocklist: empty",
        "grants: none",
        "schedulers sharing the pool: none",
    ]
    assert not os.path.exists(store_file), "a read-only command creates no store"

    store = RegionflowStore(url)  # what the RegionExecutor records, through the store's API
    store.record_waiting("g1", dag_id=DAG_ID, run_id="r1", task_id="orders__clean__enrich", try_number=1,
                         label="orders+clean+enrich[0]", requests=[{}] * 2, map_index=0)
    store.record_granted("g1", [("a", 0), ("a", 1)])
    store.record_waiting("w1", dag_id=DAG_ID, run_id="r2", task_id="orders__clean__enrich", try_number=1,
                         label="orders+clean+enrich[0]", requests=[{}] * 2, map_index=0)
    store.block(job_id_for(DAG_ID, "r2"), "b", time.time() + 3600, reason="slow attempt try1-x")
    out = succeeded(run(home, "airflow", "regionflow", "status"))
    assert f"slot pool: 3 slots, 2 used, 1 free (store {url})" in out
    assert "  a: 2/2 slots used, 0 free" in out and "  b: 0/1 slots used, 1 free" in out
    assert re.search(r"  1\. orders_daily/r2 orders__clean__enrich\[0\] try 1 wants 2 slot\(s\), waiting [\d.]+ s: "
                     r"not enough free slots: needs 2, 1 free", out), out
    assert re.search(r"  b for run orders_daily/r2, [\d.]+ s more \(slow attempt try1-x\)", out), out
    assert "  DAG orders_daily run r1:\n    orders_daily/r1 orders__clean__enrich[0] try 1: 2 slot(s) on a" in out

    # the same text as `regionflow status` for this store and these hosts (but the seconds that passed)
    standalone = succeeded(run(home, "regionflow", "status", "--store-url", url, "--hosts", HOSTS))
    assert seconds_out(out) == seconds_out(standalone)


def seconds_out(text: str) -> str:
    return re.sub(r"\d+(\.\d+)? s\b", "N s", text)


def test_plan_prints_what_regionflow_plan_prints_for_the_dag(home):
    out = succeeded(run(home, "airflow", "regionflow", "plan", DAG_ID))
    assert out.startswith(f"job {DAG_ID}: mode pointwise-pipelined-only")
    for region in ("orders+clean+enrich: 2 execution region(s)", "products: 1 execution region(s)",
                   "totals: 3 execution region(s)", "enrich -HASH-> totals"):
        assert region in out, out
    dag_file = os.path.join(home.dags_folder, f"{DAG_ID}.py")
    assert out == succeeded(run(home, "regionflow", "plan", dag_file, "--dag-id", DAG_ID))
    blocking = json.loads(succeeded(run(home, "airflow", "regionflow", "plan", DAG_ID, "--mode", "all-blocking",
                                        "-o", "json")))
    assert blocking["mode"] == "all-blocking" and blocking["job"] == DAG_ID
    import yaml

    as_yaml = succeeded(run(home, "airflow", "regionflow", "plan", DAG_ID, "--mode", "all-blocking", "-o", "yaml"))
    assert yaml.safe_load(as_yaml) == blocking


def test_gc_removes_what_a_finished_run_left_and_never_a_running_runs(home):
    """[regionflow] data_dir (the default: AIRFLOW_HOME/regionflow-data) and store_url from airflow.cfg."""
    from regionflow.spark.data.store import ATTEMPTS, run_key_for

    data_dir = os.path.join(home.home, "regionflow-data")
    store = RegionflowStore(home.regionflow_options["store_url"])
    store.record_waiting("gc1", dag_id=DAG_ID, run_id="running", task_id="orders__clean__enrich", try_number=1,
                         label="orders+clean+enrich[0]", requests=[{}], map_index=0)
    planted = {run: os.path.join(data_dir, run_key_for(DAG_ID, run), ATTEMPTS, "u0", "try1-x")
               for run in ("finished", "running")}
    for path in planted.values():
        os.makedirs(path)
        with open(os.path.join(path, "part-0"), "wb") as handle:
            handle.write(b"x" * 10)
    listed = json.loads(succeeded(run(home, "airflow", "regionflow", "gc", "--dry-run", "-o", "json")))
    assert [(item["path"], item["bytes"]) for item in listed["would_remove"]] == [(planted["finished"], 10)]
    assert os.path.isdir(planted["finished"])
    out = succeeded(run(home, "airflow", "regionflow", "gc"))
    assert out.splitlines()[-1] == "removed 1 dir(s), 10 bytes"
    assert not os.path.exists(planted["finished"]) and os.path.isdir(planted["running"])


def test_session_status_and_stop_of_servers_that_never_started(home):
    done = run(home, "airflow", "regionflow", "session", "status", "-o", "json")
    assert done.returncode == 1, done.stderr[-3000:]  # not every server is up
    assert [(server["host"], server["state"]) for server in json.loads(done.stdout)] == [("a", "down"), ("b", "down")]
    out = succeeded(run(home, "airflow", "regionflow", "session", "stop", "--host", "b"))
    assert out.splitlines()[0] == "stopped: none was running" and out.splitlines()[1].startswith("b: down at ")


def test_plan_finds_the_dag_file_the_metadata_database_knows(home, tmp_path):
    succeeded(run(home, "airflow", "dags", "reserialize"))
    elsewhere = {"AIRFLOW__CORE__DAGS_FOLDER": str(tmp_path)}  # an empty DAGs folder: only the database knows
    assert succeeded(run(home, "airflow", "regionflow", "plan", DAG_ID, env=elsewhere)).startswith(f"job {DAG_ID}:")


@pytest.mark.parametrize("dag_id, message", [
    ("no_such_dag", "DAG 'no_such_dag' was not found in {dags}; check the DAG id (`airflow dags list`) and "
                    "[core] dags_folder"),
    ("plain_dag", "DAG 'plain_dag' ({dags}/plain_dag.py) is not a regionflow DAG: its file does not call "
                  "regionflow.transform(dag); declare its Spark work as SparkVertexOperators and call "
                  "regionflow.transform(dag) after them"),
])
def test_plan_of_an_unknown_or_plain_dag_is_one_line_naming_it(home, dag_id, message):
    line = one_line_error(run(home, "airflow", "regionflow", "plan", dag_id), "airflow regionflow plan: error: ")
    assert line == "airflow regionflow plan: error: " + message.format(dags=home.dags_folder)


def test_a_bad_hosts_option_is_one_line_naming_it(home):
    done = run(home, "airflow", "regionflow", "hosts", env={"AIRFLOW__REGIONFLOW__HOSTS": "bogus"})
    assert one_line_error(done, "airflow regionflow hosts: error: ") == (
        "airflow regionflow hosts: error: [regionflow] hosts = 'bogus': the hosts spec must start with "
        "NAME:SLOTS, got 'bogus'; e.g. 'h1:2;h2:2' (set by the environment variable AIRFLOW__REGIONFLOW__HOSTS)")
