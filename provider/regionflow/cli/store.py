"""``regionflow migrate-store``: upgrade regionflow's store to this version's schema, in place.

Like ``airflow db migrate`` for Airflow's own tables: run it once after upgrading regionflow, with the
Airflow schedulers stopped; rows are kept. A store that is already current is left as it is.
"""
from __future__ import annotations

import argparse
from typing import Any

from .common import add_store_url_option, store_url_from_args


def register(commands: Any) -> None:
    """Register ``migrate-store`` on the CLI's subcommands."""
    migrate = commands.add_parser("migrate-store", help="upgrade regionflow's store to this version's schema "
                                                        "(stop the Airflow schedulers first)")
    add_store_url_option(migrate)
    migrate.set_defaults(handler=run_migrate_store)


def run_migrate_store(args: argparse.Namespace) -> int:
    """Migrate the store named by ``--store-url``, the environment, or the default; print what was done."""
    from ..store import mask_url, migrate

    url = store_url_from_args(args)
    before, after = migrate(url)
    if before == after:
        print(f"regionflow's store at {mask_url(url)} is already at schema version {after}")
    else:
        print(f"migrated regionflow's store at {mask_url(url)} from schema version {before} to {after}")
    return 0


__all__ = ["register", "run_migrate_store"]
