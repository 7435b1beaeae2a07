"""A cache of freshly migrated SQLite metadata databases, so a test session runs ``airflow db migrate``
once rather than once per embedded stack.

``airflow db migrate`` on an empty SQLite file starts an Airflow interpreter and replays every
migration, per stack (159-168 s each on a throttled 2-core box). What it leaves in the file depends
only on Airflow's version and three configuration values: the schema and ``alembic_version``, the
``default_pool`` row (``[core] default_pool_task_slot_count``) and the ``log_template`` rows
(``[logging] log_filename_template``, ``[elasticsearch] log_id_template``). Two stacks whose values
agree get the same schema and rows (up to the rows' timestamps), so the first one's fresh file is kept
under that key and copied for the next. Nothing else is cached: secrets, ports and paths live in
``airflow.cfg``, not in the database.
"""
from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Mapping

from ..localfiles import copy_atomically, exclusive_lock

# The configuration values ``airflow db migrate`` writes into a fresh database, as (section, key).
MIGRATION_INPUTS = (
    ("core", "default_pool_task_slot_count"),
    ("logging", "log_filename_template"),
    ("elasticsearch", "log_id_template"),
)


def migration_inputs(config: Mapping[str, Mapping[str, str]]) -> dict[str, str | None]:
    """The `MIGRATION_INPUTS` values of a stack's ``airflow.cfg`` sections (None: Airflow's default)."""
    return {f"{section}.{key}": config.get(section, {}).get(key) for section, key in MIGRATION_INPUTS}


def migration_key(inputs: Mapping[str, str | None]) -> str:
    """The cache key of a fresh database: Airflow's version and the `migration_inputs` of its stack."""
    import airflow  # only where a cache is used: importing Airflow takes seconds

    text = json.dumps({"airflow": airflow.__version__, **inputs}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class MigratedDatabaseCache:
    """Fresh SQLite metadata databases kept in `directory`, one per `migration_key`."""

    def __init__(self, directory: str) -> None:
        self.directory = os.path.abspath(directory)

    def path_of(self, key: str) -> str:
        """Where the fresh database of `key` is kept."""
        return os.path.join(self.directory, f"airflow-{key}.db")

    def provide(self, database: str, key: str, migrate: Callable[[], float]) -> float:
        """Make `database` a freshly migrated database; return the seconds it took.

        A copy of the kept database of `key` when there is one; otherwise `migrate()` runs (it must
        migrate `database` in place) and its result is kept for the next call. A database that
        already exists is never replaced: it is migrated in place, as Airflow would."""
        if os.path.exists(database):
            return migrate()
        os.makedirs(self.directory, mode=0o700, exist_ok=True)
        kept = self.path_of(key)
        with exclusive_lock(os.path.join(self.directory, ".lock")):
            started = time.monotonic()
            if os.path.exists(kept):
                copy_atomically(kept, database)
                return round(time.monotonic() - started, 2)
            took = migrate()
            copy_atomically(database, kept)
            return took

