"""Schema version 4: decisions, each DAG run's decision for an adaptive region cut into several shards (the
values its decision task gave, the declared ranges, the shard count, why, the bytes read), shown by
`regionflow status` and the UI's plan of a run. Frozen: later changes are later revisions, never edits here.

Revision ID: 0004
Revises: 0003
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision: str | None = "0003"
branch_labels: str | None = None
depends_on: str | None = None

ID = 250  # Airflow's limit for dag, task and run ids


def upgrade() -> None:
    op.create_table(
        "decisions",
        sa.Column("dag_id", sa.String(ID), primary_key=True),
        sa.Column("run_id", sa.String(ID), primary_key=True),
        sa.Column("task_id", sa.String(ID), primary_key=True),
        sa.Column("decided", sa.JSON, nullable=False),
        sa.Column("ranges", sa.JSON, nullable=False),
        sa.Column("shards", sa.Integer, nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("input_bytes", sa.BigInteger),
        sa.Column("decided_at", sa.Double, nullable=False),
    )
    op.execute("UPDATE schema_version SET version = 4 WHERE id = 1")


def downgrade() -> None:
    op.execute("UPDATE schema_version SET version = 3 WHERE id = 1")
    op.drop_table("decisions")
