"""The store's schema migrations (Alembic, regionflow/store/migrations): one revision per schema version, a new
store created from the models and stamped at the head, a store from before Alembic recognised by its
schema_version row, an older store refused until `migrate` upgrades it keeping its rows, a store this
regionflow does not know refused with one line naming the store and the fix. On SQLite and PostgreSQL where
the database matters (`store_url`); the store's own Airflow DB manager is tested in tests/airflow."""
from __future__ import annotations

import re
import sqlite3

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from setuptools import find_packages
from sqlalchemy import Engine, create_engine, text

from regionflow.store import SCHEMA_VERSION, RegionflowStore, StoreError, migrate
from regionflow.store.migrate import HEAD, VERSIONS, alembic_config, scripts, upgrade_schema
from regionflow.store.models import MIGRATABLE_FROM, VERSION_TABLE, Base, revision_of


def admit(store: RegionflowStore, task_id: str):
    return store.admit(f"ti-{task_id}", 1, dag_id="dag", run_id="run", task_id=task_id, label=task_id,
                       requests=[{"cpu": 1.0}])


def plain(url: str) -> Engine:
    """An engine that is not the store's: what another tool, or Airflow, would open."""
    return create_engine(url, poolclass=None) if url.startswith("sqlite") else create_engine(url)


def revisions(url: str) -> list[str]:
    with plain(url).connect() as connection:
        return list(connection.scalars(text(f"SELECT version_num FROM {VERSION_TABLE}")))


def legacy_version(url: str) -> int:
    with plain(url).connect() as connection:
        return connection.scalar(text("SELECT version FROM schema_version WHERE id = 1"))


def set_revision(path, revision: str) -> None:
    with sqlite3.connect(path) as db:
        db.execute(f"UPDATE {VERSION_TABLE} SET version_num = ?", (revision,))


def test_the_revisions_are_the_schema_versions_oldest_first():
    newest_first = [script.revision for script in scripts().walk_revisions()]
    assert newest_first == [revision_of(version) for version in sorted(VERSIONS.values(), reverse=True)]
    assert scripts().get_heads() == [HEAD] == [revision_of(SCHEMA_VERSION)]
    assert set(VERSIONS.values()) == {*MIGRATABLE_FROM, SCHEMA_VERSION}


def test_the_revisions_build_the_schema_of_the_models(store_url):
    engine = plain(store_url)
    with engine.begin() as connection:
        assert upgrade_schema(connection, "test", 0.0, use_migration_files=True) == (None, SCHEMA_VERSION)
    with engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True, "version_table": VERSION_TABLE})
        assert compare_metadata(context, Base.metadata) == []
    assert revisions(store_url) == [HEAD] and legacy_version(store_url) == SCHEMA_VERSION
    store = RegionflowStore(store_url)
    assert store.schema_version() == SCHEMA_VERSION and admit(store, "a").pool_version == 1


def test_a_new_store_is_created_from_the_models_and_stamped_at_the_head(store_url):
    store = RegionflowStore(store_url)
    assert admit(store, "a").pool_version == 1
    assert revisions(store_url) == [HEAD] and legacy_version(store_url) == SCHEMA_VERSION
    assert migrate(store_url) == (SCHEMA_VERSION, SCHEMA_VERSION) and revisions(store_url) == [HEAD]


def test_a_current_store_from_before_alembic_is_stamped_when_opened_keeping_its_rows(tmp_path):
    path = tmp_path / "regionflow.db"
    url = f"sqlite:///{path}"
    admit(RegionflowStore(url), "kept")
    with sqlite3.connect(path) as db:  # what regionflow wrote before Alembic: schema_version's row only
        db.execute(f"DROP TABLE {VERSION_TABLE}")
    [kept] = RegionflowStore(url).grants()
    assert kept.task_id == "kept" and revisions(url) == [HEAD]


def test_an_older_store_is_refused_until_migrated_keeping_its_rows(store_url):
    admit(RegionflowStore(store_url), "kept")
    with plain(store_url).begin() as connection:  # the revisions go down too: to schema version 2
        command.downgrade(alembic_config(connection), revision_of(MIGRATABLE_FROM[0]))
    assert revisions(store_url) == ["0002"] and legacy_version(store_url) == 2
    with pytest.raises(StoreError, match=r"schema version 2, written by an older regionflow; this one uses version "
                                         rf"{SCHEMA_VERSION}: stop the Airflow schedulers and run "
                                         r"`regionflow migrate-store`"):
        RegionflowStore(store_url).grants()
    assert migrate(store_url) == (2, SCHEMA_VERSION)
    store = RegionflowStore(store_url)
    [kept] = store.grants()
    assert kept.task_id == "kept" and kept.owner is None and revisions(store_url) == [HEAD]
    assert admit(store, "new").pool_version == 1 and legacy_version(store_url) == SCHEMA_VERSION


@pytest.mark.parametrize(("revision", "named"), [("0099", "schema version 99"),
                                                 ("e5f0c1a2b3d4", "schema revision 'e5f0c1a2b3d4'")])
def test_a_store_at_a_revision_this_regionflow_does_not_know_is_refused_with_the_fix(tmp_path, revision, named):
    path = tmp_path / "regionflow.db"
    url = f"sqlite:///{path}"
    RegionflowStore(url).create_all()
    set_revision(path, revision)
    with pytest.raises(StoreError) as opened:
        RegionflowStore(url).grants()
    assert str(opened.value) == (f"regionflow's store at '{url}' has {named}, but this regionflow uses version "
                                 f"{SCHEMA_VERSION}; install the matching regionflow or point it at a new store URL")
    with pytest.raises(StoreError) as migrated:
        migrate(url)
    assert str(migrated.value) == (f"regionflow's store at '{url}' has {named}, which this regionflow cannot "
                                   f"migrate (it migrates {list(MIGRATABLE_FROM)}); install the regionflow that "
                                   f"wrote it or point regionflow at a new store URL")
    assert revisions(url) == [revision], "a refused store is left as it is"


def test_a_store_from_before_alembic_at_a_version_never_migrated_is_refused(tmp_path):
    path = tmp_path / "regionflow.db"
    url = f"sqlite:///{path}"
    RegionflowStore(url).create_all()
    with sqlite3.connect(path) as db:
        db.execute(f"DROP TABLE {VERSION_TABLE}")
        db.execute("UPDATE schema_version SET version = 1")
    with pytest.raises(StoreError, match=rf"has schema version 1, but this regionflow uses version "
                                         rf"{SCHEMA_VERSION}; install"):
        RegionflowStore(url).grants()
    with pytest.raises(StoreError, match=r"has schema version 1, which this regionflow cannot migrate \(it migrates"):
        migrate(url)


def test_tables_without_a_schema_version_are_not_taken_for_a_store(tmp_path):
    url = f"sqlite:///{tmp_path}/other.db"
    Base.metadata.create_all(plain(url))
    with pytest.raises(StoreError, match="has its tables but no schema version; it was not created by regionflow"):
        RegionflowStore(url).grants()


def test_the_sql_of_an_upgrade_can_be_printed_without_a_database(capsys):
    """What ``airflow db-manager migrate --show-sql-only`` prints (Alembic's offline mode)."""
    command.upgrade(alembic_config(url="postgresql://nobody@nowhere/airflow"), "0002:0003", sql=True)
    sql = capsys.readouterr().out
    assert "ALTER TABLE grants ADD COLUMN owner VARCHAR(250)" in sql
    assert f"UPDATE {VERSION_TABLE} SET version_num='0003'" in sql
    assert re.search(r"\balembic_version\b", sql) is None, "Airflow's version table is never touched"


def test_the_migrations_ship_in_the_package():
    """pyproject.toml's package finder (setuptools' find_packages) takes every folder with an __init__.py,
    and the .py files in it."""
    packages = find_packages("provider")
    assert {"regionflow.store.migrations", "regionflow.store.migrations.versions"} <= set(packages)
