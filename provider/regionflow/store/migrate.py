"""The store's schema version: checked on every open, upgraded in place by `regionflow migrate-store`.

A store written by an older regionflow is not opened as it is (its rows would be read wrongly); the
error says to run ``regionflow migrate-store``, which upgrades the versions listed in
`models.MIGRATABLE_FROM` in one transaction, like ``airflow db migrate`` does for Airflow's own tables.
"""
from __future__ import annotations

import time

from sqlalchemy import inspect, text
from sqlalchemy.orm import Session

from .engine import WRITE_OPTION, build_engine, mask_url, parse_url
from .errors import StoreError
from .models import MIGRATABLE_FROM, SCHEMA_VERSION, Base, PoolState, SchemaVersion


def check_schema_version(session: Session, url: str, now: float, create: bool = True) -> None:
    """Raise a `StoreError` saying what to do unless the store's schema is this regionflow's;
    `create` writes the version row into a store being created."""
    found = session.get(SchemaVersion, 1)
    if found is None:
        if not create:
            raise StoreError(
                f"regionflow's store at {url!r} has its tables but no schema_version row; it was not "
                f"created by regionflow: point regionflow at a new store URL"
            )
        session.add(SchemaVersion(id=1, version=SCHEMA_VERSION, created_at=now))
        session.add(PoolState(id=1, version=0))
    elif found.version in MIGRATABLE_FROM:
        raise StoreError(
            f"regionflow's store at {url!r} has schema version {found.version}, written by an older "
            f"regionflow; this one uses version {SCHEMA_VERSION}: stop the Airflow schedulers and run "
            f"`regionflow migrate-store` (it upgrades the store in place, keeping its rows)"
        )
    elif found.version != SCHEMA_VERSION:
        raise StoreError(
            f"regionflow's store at {url!r} has schema version {found.version}, but this regionflow "
            f"uses version {SCHEMA_VERSION}; install the matching regionflow or point it at a new store URL"
        )


def migrate(url: str) -> tuple[int, int]:
    """Upgrade the store at `url` to this regionflow's schema in one transaction; returns (from, to).
    A store already at this version is left as it is."""
    parsed = parse_url(url)
    engine = build_engine(parsed).execution_options(**{WRITE_OPTION: True})
    try:
        with Session(engine) as session, session.begin():
            found = session.get(SchemaVersion, 1) if inspect(session.connection()).has_table("schema_version") else None
            if found is None:
                raise StoreError(f"no regionflow store at {mask_url(parsed)!r} to migrate; regionflow creates a "
                                 f"new store on first use")
            before = found.version
            if before == SCHEMA_VERSION:
                return before, before
            if before not in MIGRATABLE_FROM:
                raise StoreError(f"regionflow's store at {mask_url(parsed)!r} has schema version {before}, which "
                                 f"this regionflow cannot migrate (it migrates {list(MIGRATABLE_FROM)}); install "
                                 f"the regionflow that wrote it or point regionflow at a new store URL")
            connection = session.connection()
            columns = {column["name"] for column in inspect(connection).get_columns("grants")}
            if "owner" not in columns:  # version 2 -> 3: grant owners, pool_state, schedulers
                connection.execute(text("ALTER TABLE grants ADD COLUMN owner VARCHAR(250)"))
            Base.metadata.create_all(connection)
            if session.get(PoolState, 1) is None:
                session.add(PoolState(id=1, version=0))
            found.version = SCHEMA_VERSION
            found.created_at = found.created_at or time.time()
            return before, SCHEMA_VERSION
    finally:
        engine.dispose()


__all__ = ["check_schema_version", "migrate"]
