"""`RegionflowDBManager.downgrade` (``airflow db-manager downgrade``) on a SQLite store, without an Airflow
process: back to an older schema version keeping the rows its tables hold (and up again with `migrate`),
back to base (no store tables), refusals naming the store, and the SQL printed instead of run."""
from __future__ import annotations

import sqlite3

import pytest
from sqlalchemy import create_engine, inspect
from sqlalchemy.orm import Session

from regionflow.store import SCHEMA_VERSION, RegionflowStore, StoreError, migrate
from regionflow.store.db_manager import RegionflowDBManager
from regionflow.store.migrate import BASE, HEAD
from regionflow.store.models import MIGRATABLE_FROM, VERSION_TABLE, Base, revision_of

OLDER = revision_of(MIGRATABLE_FROM[0])


@pytest.fixture
def url(tmp_path) -> str:
    """A store at the head with one admitted grant."""
    url = f"sqlite:///{tmp_path}/regionflow.db"
    RegionflowStore(url).admit("ti-kept", 1, dag_id="dag", run_id="run", task_id="kept", label="kept",
                               requests=[{"cpu": 1.0}])
    return url


def downgrade(url: str, to_revision: str, **options) -> None:
    engine = create_engine(url)
    try:
        with Session(engine) as session:
            RegionflowDBManager(session).downgrade(to_revision, **options)
    finally:
        engine.dispose()


def rows(url: str, sql: str) -> list[tuple]:
    with sqlite3.connect(url.removeprefix("sqlite:///")) as db:
        return db.execute(sql).fetchall()


def tables(url: str) -> set[str]:
    engine = create_engine(url)
    try:
        return set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


def test_a_downgrade_to_an_older_version_keeps_its_rows_and_migrate_brings_the_store_back(url):
    downgrade(url, OLDER)
    assert rows(url, f"SELECT version_num FROM {VERSION_TABLE}") == [(OLDER,)]
    assert rows(url, "SELECT version FROM schema_version") == [(MIGRATABLE_FROM[0],)]
    assert {"schedulers", "pool_state"}.isdisjoint(tables(url))
    assert rows(url, "SELECT task_id FROM grants") == [("kept",)]
    with pytest.raises(StoreError, match="written by an older regionflow"):
        RegionflowStore(url).grants()

    assert migrate(url) == (MIGRATABLE_FROM[0], SCHEMA_VERSION)
    [kept] = RegionflowStore(url).grants()
    assert kept.task_id == "kept" and kept.owner is None


def test_a_downgrade_to_base_drops_the_stores_tables_and_the_next_open_creates_a_new_store(url):
    downgrade(url, BASE)
    assert set(Base.metadata.tables).isdisjoint(tables(url))
    assert rows(url, f"SELECT version_num FROM {VERSION_TABLE}") == []
    store = RegionflowStore(url)
    assert store.grants() == [] and store.schema_version() == SCHEMA_VERSION


def test_a_downgrade_to_the_current_revision_changes_nothing(url, monkeypatch):
    from alembic import command

    def not_called(*args, **kwargs):
        raise AssertionError("a downgrade to the current revision ran Alembic's downgrade")

    monkeypatch.setattr(command, "downgrade", not_called)
    downgrade(url, HEAD)
    assert rows(url, f"SELECT version_num FROM {VERSION_TABLE}") == [(HEAD,)]
    assert [grant.task_id for grant in RegionflowStore(url).grants()] == ["kept"]


@pytest.mark.parametrize("revision", ["0009", "head"])
def test_an_unknown_revision_is_refused_naming_the_store(url, revision):
    with pytest.raises(StoreError, match=f"regionflow.db.*{revision!r}.*its revisions are"):
        downgrade(url, revision)
    assert rows(url, f"SELECT version_num FROM {VERSION_TABLE}") == [(HEAD,)]


def test_a_downgrade_goes_back_only(url):
    downgrade(url, OLDER)
    with pytest.raises(StoreError, match="a downgrade goes back only"):
        downgrade(url, HEAD)
    assert rows(url, f"SELECT version_num FROM {VERSION_TABLE}") == [(OLDER,)]


def test_an_empty_database_has_no_store_to_downgrade(tmp_path):
    with pytest.raises(StoreError, match="no regionflow store at .* to downgrade"):
        downgrade(f"sqlite:///{tmp_path}/empty.db", OLDER)


def test_the_sql_of_a_downgrade_can_be_printed_without_a_database(monkeypatch, capsys):
    """What ``airflow db-manager downgrade --show-sql-only`` prints (Alembic's offline mode)."""
    from airflow import settings

    monkeypatch.setattr(settings, "SQL_ALCHEMY_CONN", "postgresql://nobody@nowhere/airflow")
    RegionflowDBManager(None).downgrade(OLDER, show_sql_only=True)
    sql = capsys.readouterr().out
    assert "DROP TABLE schedulers" in sql and "DROP TABLE pool_state" in sql
    assert f"UPDATE {VERSION_TABLE} SET version_num='{OLDER}'" in sql
