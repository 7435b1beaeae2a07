"""End-to-end tests of `regionflow.testing.EmbeddedAirflow`: a real api-server, scheduler and
dag-processor on SQLite, started once per module.

The executor is a parameter of the stack; these tests use Airflow's own ``LocalExecutor`` so they
do not depend on ``regionflow.executors.RegionExecutor``. Measured times are printed (``-s``).
"""
from __future__ import annotations

import os
import re
import socket
import sqlite3
import subprocess
import textwrap
import time
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from regionflow.testing import ComponentFailed, EmbeddedAirflow, EmbeddedAirflowError

EXECUTOR = "LocalExecutor"
TWO_TASKS_DAG = "rf_embedded_two_tasks"
SLEEPER_DAG = "rf_embedded_sleeper"
# A distinctive command line, so pgrep finds exactly this task's process.
SLEEP_COMMAND = "sleep 987"

TWO_TASKS_SOURCE = """
from __future__ import annotations

import pathlib

import pendulum
from airflow.providers.standard.operators.bash import BashOperator
from airflow.providers.standard.operators.python import PythonOperator
from airflow.sdk import DAG

OUT = pathlib.Path({out!r})


def write_marker():
    OUT.write_text("written by the python task\\n")
    print("python-task-wrote-marker", OUT)


with DAG("{dag_id}", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), catchup=False):
    hello = BashOperator(task_id="say_hello", bash_command="echo bash-task-says-hello")
    write = PythonOperator(task_id="write_file", python_callable=write_marker)
    hello >> write
"""

SLEEPER_SOURCE = """
from __future__ import annotations

import pendulum
from airflow.providers.standard.operators.bash import BashOperator
from airflow.sdk import DAG

with DAG("{dag_id}", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), catchup=False):
    BashOperator(task_id="sleep", bash_command="{command}")
"""

DESCRIBED_DAG = "rf_embedded_described"
DESCRIBED_SOURCE = """
import pendulum
from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG

with DAG("{dag_id}", description="{description}", schedule=None,
         start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), catchup=False):
    EmptyOperator(task_id="nothing")
"""

BROKEN_SOURCE = """
from airflow.sdk import DAG

with DAG("rf_embedded_broken" :
    pass
"""


def _write(path: str, text: str) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(textwrap.dedent(text))


def _report(name: str, seconds: float) -> None:
    print(f"\n[embedded-airflow timing] {name}: {seconds:.2f} s", flush=True)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("embedded-airflow")
    dags = root / "dags"
    dags.mkdir()
    marker = root / "marker.txt"
    _write(str(dags / f"{TWO_TASKS_DAG}.py"), TWO_TASKS_SOURCE.format(out=str(marker), dag_id=TWO_TASKS_DAG))
    _write(str(dags / f"{SLEEPER_DAG}.py"), SLEEPER_SOURCE.format(dag_id=SLEEPER_DAG, command=SLEEP_COMMAND))
    return {"home": str(root / "home"), "dags": str(dags), "marker": str(marker)}


@pytest.fixture(scope="module")
def stack(workspace: dict[str, str]) -> Iterator[EmbeddedAirflow]:
    airflow = EmbeddedAirflow(workspace["home"], workspace["dags"], executor=EXECUTOR, parallelism=4,
                              regionflow_options={"speculation": "off", "backend": "submit"})
    with airflow.start():
        _report("db migrate", airflow.timings["db_migrate_s"])
        _report("start() to healthy", airflow.timings["start_to_healthy_s"])
        yield airflow


# ---- configuration (no processes) ---------------------------------------------------------


@pytest.mark.timeout(60)
def test_write_config_is_private_complete_and_ignores_inherited_overrides(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("AIRFLOW__CORE__LOAD_EXAMPLES", "True")
    airflow = EmbeddedAirflow(str(tmp_path / "home"), str(tmp_path / "dags"), executor=EXECUTOR,
                              regionflow_options={"hosts": "local[2]", "backend": "submit"},
                              extra_config={"scheduler": {"task_queued_timeout": "1200"}})
    path = airflow.write_config()
    text = open(path, encoding="utf-8").read()
    first_secret = re.search(r"^jwt_secret = (.+)$", text, re.M).group(1)

    assert os.stat(path).st_mode & 0o777 == 0o600
    assert os.stat(airflow.passwords_path).st_mode & 0o777 == 0o600
    for line in ("executor = LocalExecutor", "load_examples = False", "host = 127.0.0.1",
                 f"base_url = {airflow.api_url}", f"execution_api_server_url = {airflow.api_url}/execution/",
                 "simple_auth_manager_all_admins = False", "[regionflow]\nhosts = local[2]",
                 "task_queued_timeout = 1200"):
        assert line in text
    assert airflow.admin_password() not in text
    env = airflow.child_env()
    assert "AIRFLOW__CORE__LOAD_EXAMPLES" not in env
    assert env["AIRFLOW_CONFIG"] == path and env["AIRFLOW_HOME"] == airflow.home

    airflow.write_config()
    rewritten = open(path, encoding="utf-8").read()
    assert f"jwt_secret = {first_secret}" in rewritten, "secrets must survive a rewrite (same DB, same keys)"


@pytest.mark.timeout(60)
def test_unknown_components_and_a_missing_api_server_are_refused(tmp_path) -> None:
    with pytest.raises(EmbeddedAirflowError, match="unknown component"):
        EmbeddedAirflow(str(tmp_path), str(tmp_path), components=("api-server", "webserver"))
    with pytest.raises(EmbeddedAirflowError, match="api-server is required"):
        EmbeddedAirflow(str(tmp_path), str(tmp_path), components=("scheduler",))


# ---- a real stack -------------------------------------------------------------------------


@pytest.mark.timeout(900)  # the module stack starts in its setup (600 s bound)
def test_a_later_home_of_the_session_gets_a_copy_of_the_migrated_database_not_a_migration(
        stack: EmbeddedAirflow, tmp_path) -> None:
    """tests/conftest.py keeps the session's first freshly migrated database: once the module's stack
    has started, another home's database is a copy of it (no ``airflow db migrate`` runs, so no log of
    one), with the schema, alembic version and default pool a migration gives."""
    later = EmbeddedAirflow(str(tmp_path / "home"), str(tmp_path / "dags"), executor=EXECUTOR, parallelism=4,
                            regionflow_options={"backend": "submit"})
    later.write_config()
    later.migrate_database()
    assert not os.path.exists(later.log_path("db-migrate")), "a migration ran instead of a copy"

    def schema(path: str) -> tuple:
        with sqlite3.connect(path) as connection:
            version = connection.execute("select version_num from alembic_version").fetchall()
            pools = connection.execute("select pool, slots from slot_pool where pool = 'default_pool'").fetchall()
            tables = connection.execute("select name from sqlite_master where type = 'table' order by name").fetchall()
        return version, pools, tables

    assert schema(later.database_path) == schema(stack.database_path)
    assert schema(later.database_path)[1] == [("default_pool", 128)]


@pytest.mark.timeout(600)
def test_a_two_task_dag_runs_to_success_with_readable_logs(stack: EmbeddedAirflow, workspace) -> None:
    stack.wait_for_dag(TWO_TASKS_DAG)
    stack.unpause(TWO_TASKS_DAG)
    triggered = time.monotonic()
    run_id = stack.trigger(TWO_TASKS_DAG, conf={"why": "test"})

    state = stack.wait_for_run(TWO_TASKS_DAG, run_id, timeout=300)
    _report("trigger to success of a 2-task run", time.monotonic() - triggered)

    instances = stack.task_instances(TWO_TASKS_DAG, run_id)
    assert state == "success", instances
    assert sorted((ti["task_id"], ti["map_index"], ti["state"]) for ti in instances) == [
        ("say_hello", -1, "success"), ("write_file", -1, "success"),
    ]
    for ti in instances:
        assert {"start_date", "end_date", "try_number", "queued_when"} <= set(ti)
    assert open(workspace["marker"], encoding="utf-8").read() == "written by the python task\n"
    assert "bash-task-says-hello" in stack.task_log(TWO_TASKS_DAG, run_id, "say_hello", 1)
    assert "python-task-wrote-marker" in stack.task_log(TWO_TASKS_DAG, run_id, "write_file", 1)


@pytest.mark.timeout(300)
def test_a_dag_file_with_a_syntax_error_shows_up_in_import_errors(stack: EmbeddedAirflow, workspace) -> None:
    _write(os.path.join(workspace["dags"], "rf_embedded_broken.py"), BROKEN_SOURCE)

    error = stack.wait_for_import_error("rf_embedded_broken.py", timeout=120)

    assert "SyntaxError" in error["stack_trace"]
    assert any(e["filename"].endswith("rf_embedded_broken.py") for e in stack.import_errors())


@pytest.mark.timeout(300)
def test_a_dag_file_rewritten_after_the_start_is_parsed_again_at_once(stack: EmbeddedAirflow, workspace) -> None:
    """The stack parses an unchanged file once per ``min_file_process_interval`` (600 s, to spare the CPU) but a
    changed one at once (``file_parsing_sort_mode = modified_time``): a test that rewrites a DAG file mid-module
    sees the new version within seconds, not minutes."""
    path = os.path.join(workspace["dags"], f"{DESCRIBED_DAG}.py")
    _write(path, DESCRIBED_SOURCE.format(dag_id=DESCRIBED_DAG, description="first version"))
    assert stack.wait_for_dag(DESCRIBED_DAG, timeout=120)["description"] == "first version"

    _write(path, DESCRIBED_SOURCE.format(dag_id=DESCRIBED_DAG, description="second version"))
    os.utime(path, (time.time() + 1, time.time() + 1))  # newer than the first parse even on a coarse clock
    rewritten = time.monotonic()
    deadline = rewritten + 120
    while stack.wait_for_dag(DESCRIBED_DAG)["description"] != "second version":
        assert time.monotonic() < deadline, "the rewritten DAG file was not parsed again within 120 s"
        time.sleep(0.5)
    _report("rewrite to parsed again", time.monotonic() - rewritten)


@pytest.mark.timeout(600)
def test_only_loopback_listeners_and_stop_leaves_no_process(stack: EmbeddedAirflow) -> None:
    """Stops the shared stack while a task (in a session of its own) still runs; later tests of the
    module do not need the shared stack running."""
    stack.wait_for_dag(SLEEPER_DAG)
    stack.unpause(SLEEPER_DAG)
    run_id = stack.trigger(SLEEPER_DAG)
    _wait_for_running_task(stack, SLEEPER_DAG, run_id)
    assert _pgrep(SLEEP_COMMAND), "the sleeping task should be running"
    live_log = stack.task_log(SLEEPER_DAG, run_id, "sleep", 1)
    assert "attempt=1.log" in live_log, live_log

    pids = stack.pids()
    listeners = _listeners_of(pids)
    assert (("127.0.0.1", int(stack.api_url.rsplit(":", 1)[1])) in
            {(address, port) for address, port, _ in listeners}), listeners
    exposed = [listener for listener in listeners if not _is_loopback(listener[0])]
    assert not exposed, f"listeners of the stack on non-loopback addresses: {exposed}"

    started = {pid: _start_time(pid) for pid in pids}
    stack.stop()
    _report("stop() with a task running", stack.timings["stop_s"])
    stack.stop()

    assert stack.pids() == []
    survivors = [pid for pid, start in started.items() if start is not None and _start_time(pid) == start]
    assert not survivors, f"processes of the stack left after stop(): {[_describe(pid) for pid in survivors]}"
    api_title = f"airflow api_server -- host:127.0.0.1 port:{stack.api_url.rsplit(':', 1)[1]}"
    assert not _pgrep(api_title) and not _pgrep(SLEEP_COMMAND)


@pytest.mark.timeout(900)  # a whole stack start (600 s bound) and stop
def test_a_restart_on_the_same_home_keeps_the_database_and_waits_for_fresh_heartbeats(stack, workspace) -> None:
    """A new stack on the shared stack's home right after it stopped (a quick restart) keeps the
    database and does not report healthy on the stopped scheduler's recent heartbeat."""
    stack.stop()
    with sqlite3.connect(os.path.join(workspace["home"], "airflow.db")) as db:
        runs_before = sorted(db.execute("SELECT run_id FROM dag_run WHERE dag_id = ?", (SLEEPER_DAG,)))
    again = EmbeddedAirflow(workspace["home"], workspace["dags"], executor=EXECUTOR, parallelism=4,
                            regionflow_options={"backend": "submit"})
    restarted_at = datetime.now(UTC)
    with again.start():
        runs = sorted((run["dag_run_id"],) for run in again.dag_runs(SLEEPER_DAG))
        health = again.health()

    assert runs == runs_before
    for component, key in (("scheduler", "latest_scheduler_heartbeat"),
                           ("dag_processor", "latest_dag_processor_heartbeat")):
        assert health[component]["status"] == "healthy"
        assert datetime.fromisoformat(health[component][key]) >= restarted_at
    assert again.pids() == []


@pytest.mark.timeout(300)
def test_a_component_that_dies_is_reported_with_its_log(tmp_path) -> None:
    airflow = EmbeddedAirflow(str(tmp_path / "home"), str(tmp_path / "dags"),
                              executor="regionflow.no_such_module.NoExecutor", regionflow_options={"backend": "submit"})

    with pytest.raises(ComponentFailed) as failure:
        airflow.start(timeout=240)

    assert failure.value.component in failure.value.args[0] and failure.value.log_path in failure.value.args[0]
    assert failure.value.log_path == airflow.log_path(failure.value.component)
    assert airflow.pids() == []


@pytest.mark.timeout(300)
def test_a_session_server_that_cannot_start_fails_the_start_and_leaves_nothing_running(tmp_path) -> None:
    """The session servers start while the components do: a server's error (its port taken here) fails `start`
    with its cause as soon as it happens, without waiting for the components to be healthy, and the stack it was
    starting beside is stopped."""
    from regionflow.spark.servers.connect import SessionServerError

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        airflow = EmbeddedAirflow(str(tmp_path / "home"), str(tmp_path / "dags"), executor=EXECUTOR,
                                  regionflow_options={"backend": "session", "session_base_port": str(port)})
        with pytest.raises(SessionServerError, match=f"port {port} on 127.0.0.1 is already in use"):
            airflow.start(timeout=240)
    assert "start_to_healthy_s" not in airflow.timings, airflow.timings  # it gave up, not waited for the health
    assert airflow.pids() == []
    assert [status.state for status in airflow.session_servers.status()] == ["down"]


# ---- helpers ------------------------------------------------------------------------------


def _wait_for_running_task(stack: EmbeddedAirflow, dag_id: str, run_id: str, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(ti["state"] == "running" for ti in stack.task_instances(dag_id, run_id)) and _pgrep(SLEEP_COMMAND):
            return
        time.sleep(0.5)
    raise AssertionError(f"{dag_id} never ran: {stack.task_instances(dag_id, run_id)}\n{stack.log_tails()}")


def _listeners_of(pids: list[int]) -> list[tuple[str, int, int]]:
    """(address, port, pid) of every TCP LISTEN socket of `pids`, as `ss -ltnp` shows them."""
    wanted = set(pids)
    output = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout
    found = []
    for line in output.splitlines():
        fields = line.split()
        address, port = fields[3].rsplit(":", 1)
        for pid in map(int, re.findall(r"pid=(\d+)", line)):
            if pid in wanted:
                found.append((address.strip("[]"), int(port), pid))
    return found


def _is_loopback(address: str) -> bool:
    return address.startswith("127.") or address in ("::1", "::ffff:127.0.0.1") or address.startswith("::ffff:127.")


def _pgrep(pattern: str) -> list[int]:
    output = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True).stdout
    return [int(pid) for pid in output.split() if int(pid) != os.getpid()]


def _describe(pid: int) -> str:
    """pid, state and command line of a live process (for a failure message)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as handle:
            state = handle.read().rsplit(")", 1)[1].split()[0]
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            command = handle.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError as error:
        return f"{pid} ({error})"
    return f"{pid} [{state}] {command[:200]}"


def _start_time(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as handle:
            stat = handle.read()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2:].split()
    if fields[0] in ("Z", "X"):  # exited, waiting to be reaped (orphans go to PID 1, which may be slow to)
        return None
    return fields[19]
