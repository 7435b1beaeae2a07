"""Schema version 2, the oldest a regionflow with Alembic migrates: the grants, attempts, commits, blocklist,
metrics and speculative copy requests tables, and schema_version's row.

A store created before Alembic has no version table; `regionflow.store.migrate` recognises it by its
schema_version row and stamps the matching revision. This revision creates the tables only on an empty
database (Airflow's ``db migrate`` with use_migration_files, the tests). Frozen: later changes are later
revisions, never edits here.

Revision ID: 0002
Revises: (none)
"""
from __future__ import annotations

import time

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision: str | None = None
branch_labels: str | None = None
depends_on: str | None = None

ID = 250  # Airflow's limit for dag, task and run ids
_TABLES = ("copy_requests", "metrics", "block_entries", "commits", "attempts", "grants", "schema_version")


def _ids(*names: str) -> list[sa.Column[str]]:
    return [sa.Column(name, sa.String(ID), nullable=False) for name in names]


def upgrade() -> None:
    version = op.create_table(
        "schema_version",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("created_at", sa.Double, nullable=False),
    )
    op.create_table(
        "grants",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("bulk_id", sa.String(300), nullable=False, unique=True),
        *_ids("dag_id", "run_id", "task_id"),
        sa.Column("map_index", sa.Integer, nullable=False),
        sa.Column("try_number", sa.Integer, nullable=False),
        sa.Column("job_id", sa.String(2 * ID + 1), nullable=False),
        sa.Column("label", sa.String(ID), nullable=False),
        sa.Column("requests", sa.JSON, nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("host", sa.String(ID)),
        sa.Column("slots", sa.JSON, nullable=False),
        sa.Column("message", sa.Text),
        sa.Column("submitted_at", sa.Double, nullable=False),
        sa.Column("granted_at", sa.Double),
        sa.Column("released_at", sa.Double),
    )
    op.create_index("ix_grants_state", "grants", ["state"])
    op.create_index("ix_grants_run", "grants", ["dag_id", "run_id"])
    op.create_table(
        "attempts",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("attempt_id", sa.String(ID), nullable=False, unique=True),
        sa.Column("bulk_id", sa.String(300)),
        *_ids("dag_id", "run_id", "task_id"),
        sa.Column("map_index", sa.Integer, nullable=False),
        *_ids("unit_key", "host"),
        sa.Column("speculative", sa.Boolean, nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("started_at", sa.Double, nullable=False),
        sa.Column("ended_at", sa.Double),
        sa.Column("input_bytes", sa.BigInteger),
        sa.Column("message", sa.Text),
    )
    op.create_index("ix_attempts_task", "attempts", ["dag_id", "run_id", "task_id"])
    op.create_index("ix_attempts_unit", "attempts", ["unit_key", "state"])
    op.create_table(
        "commits",
        *_ids("dag_id", "run_id", "unit_key", "winner_attempt"),
        sa.Column("committed_at", sa.Double, nullable=False),
        sa.PrimaryKeyConstraint("dag_id", "run_id", "unit_key"),
    )
    op.create_table(
        "block_entries",
        sa.Column("job_id", sa.String(2 * ID + 1), primary_key=True),
        sa.Column("host", sa.String(ID), primary_key=True),
        sa.Column("expires_at", sa.Double, nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("added_at", sa.Double, nullable=False),
    )
    op.create_index("ix_block_entries_expiry", "block_entries", ["expires_at"])
    op.create_table(
        "metrics",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        *_ids("dag_id", "run_id", "task_id", "name"),
        sa.Column("value", sa.Double, nullable=False),
        sa.Column("recorded_at", sa.Double, nullable=False),
        sa.Column("labels", sa.JSON),
    )
    op.create_index("ix_metrics_series", "metrics", ["dag_id", "run_id", "task_id", "name"])
    op.create_table(
        "copy_requests",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        *_ids("dag_id", "run_id", "task_id"),
        sa.Column("map_index", sa.Integer, nullable=False),
        sa.Column("unit_key", sa.String(ID), nullable=False),
        sa.Column("job_id", sa.String(2 * ID + 1), nullable=False),
        sa.Column("label", sa.String(ID), nullable=False),
        sa.Column("requests", sa.JSON, nullable=False),
        sa.Column("template_path", sa.Text, nullable=False),
        sa.Column("py_files", sa.JSON, nullable=False),
        sa.Column("spark_conf", sa.JSON, nullable=False),
        sa.Column("excluded_hosts", sa.JSON, nullable=False),
        sa.Column("slow_attempt", sa.String(ID)),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("attempt_id", sa.String(ID)),
        sa.Column("host", sa.String(ID)),
        sa.Column("message", sa.Text),
        sa.Column("requested_at", sa.Double, nullable=False),
        sa.Column("granted_at", sa.Double),
        sa.Column("started_at", sa.Double),
        sa.Column("ended_at", sa.Double),
    )
    op.create_index("ix_copy_requests_state", "copy_requests", ["state"])
    op.create_index("ix_copy_requests_task", "copy_requests", ["dag_id", "run_id", "task_id", "map_index"])
    op.bulk_insert(version, [{"id": 1, "version": 2, "created_at": time.time()}])


def downgrade() -> None:
    for table in _TABLES:
        op.drop_table(table)
