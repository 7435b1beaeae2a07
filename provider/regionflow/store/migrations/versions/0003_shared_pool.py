"""Schema version 3: the slot pool shared by several schedulers. Grants get their owner (the scheduler that
holds the work), pool_state holds the pool's version (one row), schedulers the executors sharing the pool.
Existing grants keep no owner. Frozen: later changes are later revisions, never edits here.

Revision ID: 0003
Revises: 0002
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision: str | None = "0002"
branch_labels: str | None = None
depends_on: str | None = None

ID = 250  # Airflow's limit for dag, task and run ids


def upgrade() -> None:
    op.add_column("grants", sa.Column("owner", sa.String(ID)))
    pool_state = op.create_table(
        "pool_state",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("version", sa.BigInteger, nullable=False),
    )
    op.bulk_insert(pool_state, [{"id": 1, "version": 0}])
    op.create_table(
        "schedulers",
        sa.Column("scheduler_id", sa.String(ID), primary_key=True),
        sa.Column("hostname", sa.String(ID), nullable=False),
        sa.Column("pid", sa.Integer, nullable=False),
        sa.Column("airflow_job_id", sa.Integer),
        sa.Column("started_at", sa.Double, nullable=False),
        sa.Column("heartbeat_at", sa.Double, nullable=False),
        sa.Column("ended_at", sa.Double),
    )
    op.execute("UPDATE schema_version SET version = 3 WHERE id = 1")


def downgrade() -> None:
    op.execute("UPDATE schema_version SET version = 2 WHERE id = 1")
    op.drop_table("schedulers")
    op.drop_table("pool_state")
    with op.batch_alter_table("grants") as grants:
        grants.drop_column("owner")
