"""Fixtures of the in-process RegionExecutor tests (test_executor*.py, test_task_log_remote.py); their
doubles and helpers are in executor_doubles.py and copy_doubles.py. A module's own fixture of the same
name overrides one here."""
from __future__ import annotations

import pytest
import structlog.testing
from copy_doubles import RUN_KEY

from regionflow.spark.data.store import PartitionStore
from regionflow.store import RegionflowStore


@pytest.fixture
def settings(tmp_path, monkeypatch):
    monkeypatch.setenv("AIRFLOW__REGIONFLOW__HOSTS", "a:slots=2;b:slots=2")
    monkeypatch.setenv("AIRFLOW__REGIONFLOW__STORE_URL", f"sqlite:///{tmp_path}/regionflow.db")
    monkeypatch.setenv("AIRFLOW__LOGGING__BASE_LOG_FOLDER", str(tmp_path / "logs"))
    return tmp_path


@pytest.fixture
def logs():
    """What is logged meanwhile, the executor's log included (a structlog logger, which caplog does not see)."""
    with structlog.testing.capture_logs() as captured:
        yield captured


@pytest.fixture
def copy_settings(settings, monkeypatch):
    """`settings` for the speculative copies: their partitions' data directory and the spark-submit backend
    (test_executor_copies.py and test_executor_copy_takeover.py use it for every test)."""
    monkeypatch.setenv("AIRFLOW__REGIONFLOW__DATA_DIR", str(settings / "data"))
    monkeypatch.setenv("AIRFLOW__REGIONFLOW__BACKEND", "submit")
    return settings


@pytest.fixture
def store(settings):
    return RegionflowStore.from_config(f"sqlite:///{settings}/regionflow.db")


@pytest.fixture
def partitions(settings):
    return PartitionStore(str(settings / "data"), RUN_KEY)


@pytest.fixture(scope="session")
def shared_stack(request, tmp_path_factory):
    """The embedded Airflow stack that the modules of `suite_order.SHARED_STACK_MODULES` share (shared_stack.py);
    each module's own ``stack`` fixture configures it for that module."""
    from shared_stack import SharedStack, modules_to_run

    shared = SharedStack(str(tmp_path_factory.mktemp("airflow-shared")), modules_to_run(request.session.items))
    yield shared
    shared.stop()
