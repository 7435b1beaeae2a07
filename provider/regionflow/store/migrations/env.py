"""Alembic's environment for regionflow's store: run by `regionflow.store.migrate` (and so by ``regionflow
migrate-store`` and Airflow's ``db migrate`` through `regionflow.store.db_manager`), never by the store itself.

The caller passes the connection to migrate in ``config.attributes["connection"]``, usually inside its own
transaction, which the migrations then join (one transaction for the whole upgrade where the database has
transactional DDL). Without one, the URL in the ``sqlalchemy.url`` option is opened. Versions are recorded in
the store's own version table (`regionflow.store.models.VERSION_TABLE`), so the store can share a database
with Airflow, whose ``alembic_version`` it never touches; autogenerate only compares the store's tables.
"""
from __future__ import annotations

from typing import Any

from alembic import context
from sqlalchemy import Connection

from regionflow.store.engine import WRITE_OPTION, build_engine, parse_url
from regionflow.store.models import VERSION_TABLE, Base

config = context.config
target_metadata = Base.metadata


def include_object(_object: Any, name: str | None, type_: str, _reflected: bool, _compare_to: Any) -> bool:
    """Only the store's own tables: the database may also hold Airflow's."""
    return type_ != "table" or name in target_metadata.tables


def run(connection: Connection) -> None:
    context.configure(connection=connection, target_metadata=target_metadata, version_table=VERSION_TABLE,
                      include_object=include_object, render_as_batch=True, compare_type=True)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        run(connection)
        return
    engine = build_engine(parse_url(config.get_main_option("sqlalchemy.url") or ""))
    try:
        with engine.connect() as own, own.execution_options(**{WRITE_OPTION: True}).begin():
            run(own)
    finally:
        engine.dispose()


def run_migrations_offline() -> None:
    """The SQL of the upgrade, printed instead of run (``--show-sql-only``)."""
    context.configure(url=config.get_main_option("sqlalchemy.url"), target_metadata=target_metadata,
                      version_table=VERSION_TABLE, include_object=include_object, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
