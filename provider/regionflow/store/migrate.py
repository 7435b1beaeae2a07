"""The store's schema version, checked on every open, and its migrations (Alembic, `migrations/`).

Schema version N is Alembic revision ``f"{N:04d}"`` (`models.revision_of`), recorded in the store's own
version table (`models.VERSION_TABLE`), so the store may share a database with Airflow. A new store is
created from the models and stamped at the head revision. A store written by an older regionflow is not
opened as it is (its rows would be read wrongly): the error says to run ``regionflow migrate-store``, which
upgrades the versions listed in `models.MIGRATABLE_FROM` in one transaction (`migrate`), like ``airflow db
migrate`` does for Airflow's own tables, and so does ``airflow db migrate`` itself where the store lives in
Airflow's database (`db_manager.RegionflowDBManager`). A store from before Alembic has no version table:
it is recognised by its schema_version row and stamped at the revision of that version (on open, when it
is the current version; else by the migration).

Only migrations and first opens import Alembic: the check on open reads the version table with SQLAlchemy.
"""
from __future__ import annotations

import functools
import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import Connection, column, insert, inspect, select, table

from .engine import WRITE_OPTION, build_engine, mask_url, parse_url
from .errors import StoreError
from .models import MIGRATABLE_FROM, SCHEMA_VERSION, VERSION_TABLE, Base, PoolState, SchemaVersion, revision_of

if TYPE_CHECKING:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

MIGRATIONS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "migrations")
HEAD = revision_of(SCHEMA_VERSION)
BASE = "base"  # Alembic's revision before the first: no store tables
VERSIONS = {revision_of(version): version for version in (*MIGRATABLE_FROM, SCHEMA_VERSION)}
_VERSION_ROWS = table(VERSION_TABLE, column("version_num"))


@dataclass(frozen=True)
class FoundSchema:
    """What a database holds of a regionflow store."""

    revision: str | None  # the version table's revision; None: no version table (or an empty one)
    legacy: int | None  # without a revision: the schema_version row's version (a store from before Alembic)
    tables: frozenset[str]  # the store's tables that exist (read only when there is no revision)

    @property
    def empty(self) -> bool:
        return self.revision is None and self.legacy is None and not self.tables

    def describe(self) -> str:
        if self.revision is None:
            return f"schema version {self.legacy}"
        version = VERSIONS.get(self.revision)
        if version is None and self.revision.isdigit():
            version = int(self.revision)
        return f"schema version {version}" if version is not None else f"schema revision {self.revision!r}"


def read_schema(connection: Connection) -> FoundSchema:
    """The store's revision, or what tells a store from before Alembic or an empty database."""
    inspector = inspect(connection)
    if inspector.has_table(VERSION_TABLE):
        revisions = sorted(connection.scalars(select(_VERSION_ROWS.c.version_num)))
        if revisions:
            return FoundSchema(",".join(revisions), None, frozenset())
    tables = frozenset(set(inspector.get_table_names()) & set(Base.metadata.tables))
    legacy = (connection.scalar(select(SchemaVersion.version).where(SchemaVersion.id == 1))
              if SchemaVersion.__tablename__ in tables else None)
    return FoundSchema(None, legacy, tables)


def check_schema(found: FoundSchema, url: str, *, migrating: bool = False) -> int | None:
    """The store's schema version; None for an empty database. Raises a `StoreError` saying what to do for a
    store this regionflow cannot open as it is (unless `migrating`, an older one) or cannot migrate."""
    if found.empty:
        return None
    if found.revision is None and found.legacy is None:
        raise StoreError(f"regionflow's store at {url!r} has its tables but no schema version; it was not "
                         f"created by regionflow: point regionflow at a new store URL")
    version = VERSIONS.get(found.revision) if found.revision is not None else found.legacy
    if version is None or version not in VERSIONS.values():
        if migrating:
            raise StoreError(f"regionflow's store at {url!r} has {found.describe()}, which this regionflow cannot "
                             f"migrate (it migrates {list(MIGRATABLE_FROM)}); install the regionflow that wrote "
                             f"it or point regionflow at a new store URL")
        raise StoreError(f"regionflow's store at {url!r} has {found.describe()}, but this regionflow uses version "
                         f"{SCHEMA_VERSION}; install the matching regionflow or point it at a new store URL")
    if version != SCHEMA_VERSION and not migrating:
        raise StoreError(f"regionflow's store at {url!r} has {found.describe()}, written by an older regionflow; "
                         f"this one uses version {SCHEMA_VERSION}: stop the Airflow schedulers and run "
                         f"`regionflow migrate-store` (it upgrades the store in place, keeping its rows)")
    return version


def open_schema(connection: Connection, url: str, now: float) -> None:
    """On a store's first open, in a write transaction: create an empty store's tables, stamp a current store
    from before Alembic; raise for a store that is not at this regionflow's version."""
    found = read_schema(connection)
    version = check_schema(found, url)
    if version is None:
        create_schema(connection, now)
    elif found.revision is None:
        stamp(connection, HEAD)


def upgrade_schema(connection: Connection, url: str, now: float, *, target: str = HEAD,
                   use_migration_files: bool = False) -> tuple[int | None, int]:
    """Bring the database on `connection` (in a transaction the caller commits) to revision `target`: an
    empty one is created (from the models, or by running every revision with `use_migration_files`), one from
    before Alembic is stamped first. Returns (the version found, None if none; the version now)."""
    found = read_schema(connection)
    before = check_schema(found, url, migrating=True)
    if before is None and not use_migration_files and target == HEAD:
        create_schema(connection, now)
        return None, SCHEMA_VERSION
    if before is not None and found.revision is None:
        stamp(connection, revision_of(before))
    if before != VERSIONS.get(target, -1):
        from alembic import command

        command.upgrade(alembic_config(connection), target)
    return before, VERSIONS.get(target, SCHEMA_VERSION)


def downgrade_schema(connection: Connection, url: str, *, target: str) -> tuple[int, int | None]:
    """Take the store on `connection` (in a transaction the caller commits) back to revision `target`, an older
    schema version's (the rows its tables hold are kept) or ``"base"`` (the store's tables dropped). One from
    before Alembic is stamped first. Returns (the version found; the version now, None at base)."""
    if target != BASE and target not in VERSIONS:
        known = ", ".join([*sorted(VERSIONS), BASE])
        raise StoreError(f"cannot downgrade regionflow's store at {url!r} to revision {target!r}; its revisions "
                         f"are {known}")
    found = read_schema(connection)
    before = check_schema(found, url, migrating=True)
    if before is None:
        raise StoreError(f"no regionflow store at {url!r} to downgrade")
    after = VERSIONS.get(target)
    if after is not None and after > before:
        raise StoreError(f"regionflow's store at {url!r} has {found.describe()}, older than revision {target!r}: "
                         f"a downgrade goes back only; upgrade it (`regionflow migrate-store`, `airflow db migrate`)")
    if found.revision is None:
        stamp(connection, revision_of(before))
    if after != before:
        from alembic import command

        command.downgrade(alembic_config(connection), target)
    return before, after


def create_schema(connection: Connection, now: float) -> None:
    """An empty store at this version: the tables, the rows that are always there, the head revision."""
    Base.metadata.create_all(connection)
    connection.execute(insert(SchemaVersion).values(id=1, version=SCHEMA_VERSION, created_at=now))
    connection.execute(insert(PoolState).values(id=1, version=0))
    stamp(connection, HEAD)


def stamp(connection: Connection, revision: str) -> None:
    """Record `revision` in the version table (created if missing), changing nothing else."""
    from alembic.runtime.migration import MigrationContext

    MigrationContext.configure(connection, opts={"version_table": VERSION_TABLE}).stamp(scripts(), revision)


def alembic_config(connection: Connection | None = None, url: str | None = None) -> Config:
    """Alembic's configuration of the store's migrations (no .ini file): they run on `connection`, else on
    `url` (the URL is not logged by Alembic)."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", MIGRATIONS.replace("%", "%%"))
    if url is not None:
        config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


@functools.cache
def scripts() -> ScriptDirectory:
    """The store's revisions (read once per process)."""
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config())


def migrate(url: str) -> tuple[int, int]:
    """Upgrade the store at `url` to this regionflow's schema in one transaction; returns (from, to).
    A store already at this version is left as it is (one from before Alembic is stamped)."""
    parsed = parse_url(url)
    engine = build_engine(parsed).execution_options(**{WRITE_OPTION: True})
    try:
        with engine.connect() as connection, connection.begin():
            if read_schema(connection).empty:
                raise StoreError(f"no regionflow store at {mask_url(parsed)!r} to migrate; regionflow creates a "
                                 f"new store on first use")
            before, after = upgrade_schema(connection, mask_url(parsed), time.time())
            return before or after, after
    finally:
        engine.dispose()


__all__ = ["BASE", "HEAD", "MIGRATIONS", "VERSIONS", "FoundSchema", "alembic_config", "check_schema", "create_schema",
           "downgrade_schema", "migrate", "open_schema", "read_schema", "scripts", "stamp", "upgrade_schema"]
