"""``airflow db migrate`` keeps regionflow's store where it lives in Airflow's own database, once ``[database]
external_db_managers`` names `RegionflowDBManager`: a real ``airflow db migrate`` (a subprocess) in an Airflow
home on SQLite creates the store's tables there and stamps them in the store's own version table (Airflow's
``alembic_version`` untouched); a later one upgrades a store an older regionflow left, keeping its rows.

The Airflow database is a copy of the session's freshly migrated one (tests/conftest.py), so each ``db
migrate`` here finds Airflow's own tables at their head and runs the external managers only."""
from __future__ import annotations

import sqlite3
import subprocess
import sys

import pytest
from alembic import command
from sqlalchemy import create_engine

from regionflow.store import SCHEMA_VERSION, RegionflowStore
from regionflow.store.db_manager import RegionflowDBManager
from regionflow.store.migrate import HEAD, alembic_config
from regionflow.store.models import MIGRATABLE_FROM, VERSION_TABLE, Base, revision_of
from regionflow.testing.stack import EmbeddedAirflow

MANAGER = f"{RegionflowDBManager.__module__}.{RegionflowDBManager.__name__}"
MIGRATE_TIMEOUT_S = 600  # an Airflow interpreter's start on a busy 2-core box; the migration itself is short


@pytest.fixture
def stack(tmp_path) -> EmbeddedAirflow:
    """An Airflow home with a migrated SQLite database (Airflow's tables only) that regionflow's store shares."""
    stack = EmbeddedAirflow(str(tmp_path / "home"), str(tmp_path / "dags"),
                            regionflow_options={"backend": "submit"})
    stack.regionflow_options["store_url"] = f"sqlite:///{stack.database_path}"
    stack.write_config()
    stack.migrate_database()  # without the store's manager: the session's kept copy stays Airflow's alone
    return stack


def airflow_db_migrate(stack: EmbeddedAirflow) -> str:
    """Run ``airflow db migrate`` with regionflow's DB manager configured; its output."""
    env = {**stack.child_env(), "AIRFLOW__DATABASE__EXTERNAL_DB_MANAGERS": MANAGER}
    result = subprocess.run([sys.executable, "-m", "airflow", "db", "migrate"], env=env, cwd=stack.home,
                            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=MIGRATE_TIMEOUT_S)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-5000:]
    return output


def rows(path: str, sql: str) -> list[tuple]:
    with sqlite3.connect(path) as db:
        return db.execute(sql).fetchall()


def test_the_manager_passes_airflows_checks():
    """No table of the store is one of Airflow's; its version table is not Airflow's; env.py names it."""
    from airflow.models import import_all_models
    from airflow.utils.db_manager import RunDBManager

    import_all_models()
    RunDBManager._validate(RegionflowDBManager)
    assert RegionflowDBManager.version_table_name == VERSION_TABLE != "alembic_version"


def test_airflow_db_migrate_creates_the_store_then_upgrades_one_an_older_regionflow_left(stack):
    path, url = stack.database_path, f"sqlite:///{stack.database_path}"
    airflow_revision = rows(path, "SELECT version_num FROM alembic_version")
    assert not rows(path, f"SELECT name FROM sqlite_master WHERE name = '{VERSION_TABLE}'")

    output = airflow_db_migrate(stack)
    tables = {name for (name,) in rows(path, "SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert set(Base.metadata.tables) | {VERSION_TABLE} <= tables, output[-3000:]
    assert rows(path, f"SELECT version_num FROM {VERSION_TABLE}") == [(HEAD,)]
    assert rows(path, "SELECT version FROM schema_version") == [(SCHEMA_VERSION,)]
    assert rows(path, "SELECT version_num FROM alembic_version") == airflow_revision
    store = RegionflowStore(url)
    store.admit("ti-kept", 1, dag_id="dag", run_id="run", task_id="kept", label="kept", requests=[{"cpu": 1.0}])

    # What regionflow's schema version 2 left, from before Alembic: no version table, schema_version's row
    with create_engine(url).begin() as connection:
        command.downgrade(alembic_config(connection), revision_of(MIGRATABLE_FROM[0]))
    with sqlite3.connect(path) as db:
        db.execute(f"DROP TABLE {VERSION_TABLE}")
    assert rows(path, "SELECT version FROM schema_version") == [(2,)]

    output = airflow_db_migrate(stack)
    assert rows(path, f"SELECT version_num FROM {VERSION_TABLE}") == [(HEAD,)], output[-3000:]
    assert rows(path, "SELECT version FROM schema_version") == [(SCHEMA_VERSION,)]
    assert rows(path, "SELECT version_num FROM alembic_version") == airflow_revision
    [kept] = RegionflowStore(url).grants()
    assert kept.task_id == "kept" and kept.owner is None
