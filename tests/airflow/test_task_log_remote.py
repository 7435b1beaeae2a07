"""The executor's lines in a task's log reach Airflow's remote task log (a `RemoteLogIO` other than the
default file handler: tests/airflow/remote_log_config.py), not only a local file beside it. No stack:
the executor in-process, as in test_executor.py."""
import os

import pytest
from executor_doubles import executor, queue, workload


@pytest.fixture
def remote_logging(settings, monkeypatch):
    import airflow.logging_config as logging_config
    import remote_log_config

    remote = settings / "remote-logs"
    monkeypatch.setenv("RF_TEST_REMOTE_LOGS", str(remote))
    monkeypatch.setenv("AIRFLOW__LOGGING__REMOTE_LOGGING", "True")
    monkeypatch.setenv("AIRFLOW__LOGGING__LOGGING_CONFIG_CLASS", "remote_log_config.LOGGING_CONFIG")
    # Airflow resolves the remote log IO once per process: resolve it again with this configuration
    monkeypatch.setattr(logging_config._ActiveLoggingConfig, "logging_config_loaded", False)
    monkeypatch.setattr(remote_log_config.REMOTE_TASK_LOG, "uploads", [])
    return remote, remote_log_config.REMOTE_TASK_LOG


def test_a_try_failed_before_any_worker_ran_it_has_its_reason_in_the_remote_log(remote_logging, settings):
    remote, io = remote_logging
    ex = executor()
    too_big = workload(slots=5, task_id="huge")
    queue(ex, too_big)
    assert io.uploads == [(too_big.log_path, "huge")]
    text = (remote / too_big.log_path).read_text()
    assert "can never get its slots" in text and "needs 5 slots" in text
    assert not os.path.exists(settings / "logs" / too_big.log_path)  # the remote IO took the local copy


def test_a_notice_to_a_try_that_still_waits_is_left_for_its_own_upload_and_a_withdrawal_is_sent(
        remote_logging, settings, monkeypatch):
    remote, io = remote_logging
    monkeypatch.setenv("AIRFLOW__REGIONFLOW__RESOURCE_WAIT_TIMEOUT", "5")
    now = [0.0]
    ex = executor(clock=lambda: now[0])
    blocker, waiting = workload(slots=4, task_id="blocker"), workload(slots=4, task_id="waiting")
    queue(ex, blocker, waiting)
    now[0] += 6  # the run has waited past resource_wait_timeout
    ex.notices.tell()
    local = settings / "logs" / waiting.log_path
    assert "not enough resources" in local.read_text() and io.uploads == []  # its supervisor uploads the file
    ex.fail(waiting.key)  # failed by the scheduler while it waits: no worker will write this try's log
    assert io.uploads == [(waiting.log_path, "waiting")]
    text = (remote / waiting.log_path).read_text()
    assert "not enough resources" in text and "withdrawn" in text

