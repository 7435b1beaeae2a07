"""A RegionExecutor whose ``[regionflow]`` section is wrong cannot start, and says why: in-process, and
from a real ``airflow scheduler`` whose output must name the option, its value and where it was set,
its last line being that one line.

The scheduler runs in an Airflow home of its own (a fresh SQLite database, `EmbeddedAirflow`'s
airflow.cfg with the RegionExecutor, no component of a shared stack), in its own process group, killed
if it has not exited within 120 s.
"""
from __future__ import annotations

import configparser
import os
import signal
import subprocess
import sys

import pytest
from airflow.exceptions import AirflowConfigException

from regionflow.executors import RegionExecutor, RegionflowConfigError
from regionflow.testing import DEFAULT_EXECUTOR, EmbeddedAirflow

pytestmark = pytest.mark.timeout(600)

EXPIRY_VARIABLE = "AIRFLOW__REGIONFLOW__BLOCKLIST_EXPIRY"
EXPIRY_RULE = "[regionflow] blocklist_expiry = 0.0 must be greater than 0"
SCHEDULER_TIMEOUT_S = 300  # the scheduler imports Airflow before it can refuse the config


@pytest.mark.parametrize("variable, value, fragments", [
    (EXPIRY_VARIABLE, "0", [EXPIRY_RULE]),
    ("AIRFLOW__REGIONFLOW__HOSTS", "a:0", ["[regionflow] hosts = 'a:0': host 'a'.slots is 0"]),
    ("AIRFLOW__REGIONFLOW__BLOCKLIST_EXPRY", "5", ["[regionflow] blocklist_expry is not an option",
                                                    "did you mean 'blocklist_expiry'"]),
])
def test_a_bad_option_stops_the_executor_with_one_line_naming_it(tmp_path, monkeypatch, variable, value, fragments):
    monkeypatch.setenv("AIRFLOW__REGIONFLOW__STORE_URL", f"sqlite:///{tmp_path}/regionflow.db")
    monkeypatch.setenv(variable, value)
    with pytest.raises(RegionflowConfigError) as info:
        RegionExecutor(parallelism=4)
    message = str(info.value)
    assert isinstance(info.value, AirflowConfigException) and info.value.__cause__ is None
    assert message.startswith("RegionExecutor cannot start: ") and "\n" not in message, message
    for fragment in fragments + [f"environment variable {variable}"]:
        assert fragment in message, (fragment, message)
    assert not os.path.exists(tmp_path / "regionflow.db"), "nothing is created before the config is checked"


@pytest.fixture(scope="module")
def airflow_home(tmp_path_factory):
    """A migrated Airflow home of its own whose ``[core] executor`` is the RegionExecutor."""
    root = tmp_path_factory.mktemp("bad-config")
    stack = EmbeddedAirflow(str(root / "home"), str(root / "dags"), executor=DEFAULT_EXECUTOR,
                            regionflow_options={"backend": "submit"})
    stack.write_config()
    stack.migrate_database()  # once per session, a copy after (tests/conftest.py)
    return stack


def run_scheduler(stack: EmbeddedAirflow, env: dict[str, str]) -> tuple[int, str]:
    """Start ``airflow scheduler`` and wait for it to exit; its exit code and output (stdout + stderr)."""
    process = subprocess.Popen([sys.executable, "-m", "airflow", "scheduler", "--skip-serve-logs"], env=env,
                               cwd=stack.home, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        output, _ = process.communicate(timeout=SCHEDULER_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        pytest.fail(f"the scheduler was still running after {SCHEDULER_TIMEOUT_S} s; its output:\n{output[-5000:]}")
    return process.returncode, output


def assert_says_why(code: int, output: str, message: str) -> None:
    """Exit non-zero; an error line of the scheduler's log, and the last line of its output, carry `message`,
    raised once and not chained to another traceback."""
    lines = [line for line in output.splitlines() if line.strip()]
    assert code != 0, output[-5000:]
    assert lines[-1] == f"{RegionflowConfigError.__module__}.RegionflowConfigError: {message}", output[-5000:]
    logged = [line for line in lines if "[error" in line and message in line]
    assert len(logged) == 1, output[-5000:]
    assert output.count("Traceback (most recent call last)") == 1, output[-5000:]
    assert "During handling of the above exception" not in output
    assert "The above exception was the direct cause" not in output


def test_the_scheduler_log_says_which_env_variable_stops_the_executor(airflow_home):
    env = airflow_home.child_env() | {EXPIRY_VARIABLE: "0"}
    code, output = run_scheduler(airflow_home, env)
    assert_says_why(code, output, f"RegionExecutor cannot start: {EXPIRY_RULE} (set by the environment variable "
                                  f"{EXPIRY_VARIABLE})")


def test_the_scheduler_log_says_which_config_file_stops_the_executor(airflow_home, tmp_path):
    config = configparser.ConfigParser(interpolation=None)
    config.read(airflow_home.config_path)
    config["regionflow"]["blocklist_expiry"] = "0"
    bad_config = tmp_path / "airflow.cfg"
    with open(bad_config, "w", encoding="utf-8") as handle:
        config.write(handle)
    code, output = run_scheduler(airflow_home, airflow_home.child_env() | {"AIRFLOW_CONFIG": str(bad_config)})
    assert_says_why(code, output, f"RegionExecutor cannot start: {EXPIRY_RULE} (set in {bad_config})")
