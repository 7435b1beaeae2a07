"""``airflow db migrate`` creates and upgrades regionflow's store where it lives in Airflow's own database.

    [database]
    external_db_managers = regionflow.store.db_manager.RegionflowDBManager

    [regionflow]
    store_url = <the same URL as [database] sql_alchemy_conn>

Airflow then runs `RegionflowDBManager` after its own migrations (``airflow db migrate``, ``airflow db reset``
drops the store's tables too, ``airflow db check-migrations`` waits for the store's head revision), the way the
edge3 provider keeps its tables. It does what ``regionflow migrate-store`` does (`migrate.upgrade_schema`): an
empty store is created and stamped, one from before Alembic recognised and stamped, an older one upgraded
keeping its rows; versions go to the store's own version table, never to Airflow's ``alembic_version``.
``airflow db-manager downgrade`` takes the store back to an older revision (`migrate.downgrade_schema`).
A store with its own URL needs none of this: regionflow creates it on first use.

The one module of `regionflow.store` that imports Airflow: only Airflow loads it, by the name above.
"""
from __future__ import annotations

import time
from typing import TYPE_CHECKING

from airflow import settings
from airflow.utils.db_manager import BaseDBManager

from .engine import mask_url
from .migrate import HEAD, MIGRATIONS, alembic_config, downgrade_schema, upgrade_schema
from .models import VERSION_TABLE, Base

if TYPE_CHECKING:
    from alembic.config import Config

_VERSION = "0.1.0"  # regionflow's version whose head revision is HEAD (``airflow db-manager migrate --to-version``)


class RegionflowDBManager(BaseDBManager):
    """Airflow's external DB manager for regionflow's store in Airflow's database."""

    metadata = Base.metadata
    version_table_name = VERSION_TABLE
    migration_dir = MIGRATIONS
    alembic_file = ""  # no .ini: `get_alembic_config` builds the configuration
    supports_table_dropping = True  # ``airflow db reset`` drops the store's tables with Airflow's
    revision_heads_map = {_VERSION: HEAD}

    def get_alembic_config(self) -> Config:
        return alembic_config(url=settings.SQL_ALCHEMY_CONN)

    def create_db_from_orm(self) -> None:
        self.upgradedb()

    def initdb(self, use_migration_files: bool = False) -> None:
        self.upgradedb(use_migration_files=use_migration_files)

    def upgradedb(self, to_revision: str | None = None, from_revision: str | None = None,
                  show_sql_only: bool = False, use_migration_files: bool = False) -> None:
        """Bring the store to `to_revision` (the head) in the session's transaction, and commit;
        `show_sql_only` prints the SQL of the upgrade from `from_revision` instead."""
        if show_sql_only:
            from alembic import command

            target = to_revision or HEAD
            command.upgrade(self.get_alembic_config(), f"{from_revision}:{target}" if from_revision else target,
                            sql=True)
            return
        self._release_metadata_locks_if_needed()
        url = mask_url(self.session.get_bind().engine.url)
        before, after = upgrade_schema(self.session.connection(), url, time.time(), target=to_revision or HEAD,
                                       use_migration_files=use_migration_files)
        self.session.commit()
        if before is None:
            self.log.info("Created regionflow's store at %s (schema version %s)", url, after)
        elif before != after:
            self.log.info("Migrated regionflow's store at %s from schema version %s to %s", url, before, after)

    def downgrade(self, to_revision: str, from_revision: str | None = None, show_sql_only: bool = False) -> None:
        """Take the store back to `to_revision` (an older schema version's revision, or ``base``: no store
        tables) in the session's transaction, and commit (``airflow db-manager downgrade``); `show_sql_only`
        prints the SQL of the downgrade from `from_revision` (default: the head) instead."""
        if show_sql_only:
            from alembic import command

            command.downgrade(self.get_alembic_config(), f"{from_revision or HEAD}:{to_revision}", sql=True)
            return
        self._release_metadata_locks_if_needed()
        url = mask_url(self.session.get_bind().engine.url)
        before, after = downgrade_schema(self.session.connection(), url, target=to_revision)
        self.session.commit()
        if before != after:
            self.log.info("Downgraded regionflow's store at %s from schema version %s to %s", url, before,
                          "none (its tables dropped)" if after is None else after)


__all__ = ["RegionflowDBManager"]
