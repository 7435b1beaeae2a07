"""The cache of freshly migrated Airflow databases: migrate once per key, copy after, never replace."""
import sqlite3

import pytest

from regionflow.testing.migrated_db import MigratedDatabaseCache, migration_inputs, migration_key


def fake_migration(database, calls, fail=False):
    def migrate():
        calls.append(database)
        connection = sqlite3.connect(database)
        connection.execute("create table if not exists alembic_version (version_num text)")
        connection.execute("insert into alembic_version values ('v1')")
        connection.commit()
        connection.close()
        if fail:
            raise RuntimeError("db migrate exited with code 1")
        return 1.5
    return migrate


def versions(database):
    connection = sqlite3.connect(database)
    try:
        return connection.execute("select version_num from alembic_version").fetchall()
    finally:
        connection.close()


def test_the_first_database_of_a_key_is_migrated_and_the_next_is_a_copy(tmp_path):
    cache = MigratedDatabaseCache(str(tmp_path / "cache"))
    calls = []
    first, second = str(tmp_path / "a.db"), str(tmp_path / "b.db")
    assert cache.provide(first, "k", fake_migration(first, calls)) == 1.5
    cache.provide(second, "k", fake_migration(second, calls))
    assert calls == [first]
    assert versions(second) == [("v1",)]
    # another key migrates again
    third = str(tmp_path / "c.db")
    cache.provide(third, "other", fake_migration(third, calls))
    assert calls == [first, third]


def test_an_existing_database_is_migrated_in_place_never_replaced(tmp_path):
    cache = MigratedDatabaseCache(str(tmp_path / "cache"))
    calls = []
    kept = str(tmp_path / "kept.db")
    cache.provide(kept, "k", fake_migration(kept, calls))
    existing = str(tmp_path / "existing.db")
    connection = sqlite3.connect(existing)
    connection.execute("create table alembic_version (version_num text)")
    connection.execute("insert into alembic_version values ('mine')")
    connection.commit()
    connection.close()
    cache.provide(existing, "k", fake_migration(existing, calls))
    assert calls == [kept, existing]
    assert versions(existing) == [("mine",), ("v1",)]


def test_a_failed_migration_keeps_nothing(tmp_path):
    cache = MigratedDatabaseCache(str(tmp_path / "cache"))
    calls = []
    broken = str(tmp_path / "broken.db")
    with pytest.raises(RuntimeError, match="db migrate"):
        cache.provide(broken, "k", fake_migration(broken, calls, fail=True))
    assert not (tmp_path / "cache" / "airflow-k.db").exists()
    fresh = str(tmp_path / "fresh.db")
    cache.provide(fresh, "k", fake_migration(fresh, calls))
    assert calls == [broken, fresh]


def test_the_key_follows_what_migrate_writes_and_ignores_ports_paths_and_secrets():
    def key(config):
        return migration_key(migration_inputs(config))

    base = {"core": {"default_pool_task_slot_count": "128", "fernet_key": "x", "dags_folder": "/a"},
            "api": {"port": "8080"}}
    same = {"core": {"default_pool_task_slot_count": "128", "fernet_key": "y", "dags_folder": "/b"},
            "api": {"port": "9090"}}
    assert key(base) == key(same)
    assert key(base) != key({"core": {"default_pool_task_slot_count": "256"}})
    templated = {**base, "logging": {"log_filename_template": "{{ ti.dag_id }}.log"}}
    assert key(base) != key(templated)
