"""The store's schema: SQLAlchemy 2.0 declarative models, one table per kind of row.

Only the store's own modules (`ledger.py` and its parts) touch these classes; everything else gets
frozen records. Plain column types
(strings, integers, doubles, JSON) keep the schema portable between SQLite and server databases.

Alembic migrates the schema (`migrations/`, `migrate.py`): schema version N is revision ``f"{N:04d}"``,
recorded in the table `VERSION_TABLE`. To change a table: change its model here, add a revision
``migrations/versions/NNNN_<what>.py`` (down_revision: the previous one) that makes the change and sets
schema_version's row to N, raise SCHEMA_VERSION to N and add the old version to MIGRATABLE_FROM.
"""
from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, BigInteger, Boolean, Double, Index, Integer, String, Text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

SCHEMA_VERSION = 4  # 2: copy_requests (speculative copies); 3: grant owners, pool_state, schedulers; 4: decisions
MIGRATABLE_FROM = (2, 3)  # versions `regionflow migrate-store` upgrades in place: each has its revision
VERSION_TABLE = "regionflow_alembic_version"  # the store's Alembic version table; never Airflow's alembic_version

ID = 250  # Airflow's own limit for dag, task and run ids


class Base(DeclarativeBase):
    pass


def revision_of(version: int) -> str:
    """The Alembic revision of schema version `version`."""
    return f"{version:04d}"


class SchemaVersion(Base):
    """Exactly one row (id 1): the schema version, kept in step by every revision. What regionflow read
    before Alembic: a store without a `VERSION_TABLE` is recognised by it (and stamped), and a regionflow
    from before Alembic refuses a newer store by it."""

    __tablename__ = "schema_version"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    version: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[float] = mapped_column(Double)


class GrantRow(Base):
    """One slot bulk = one Airflow task instance try, from waiting to its final state."""

    __tablename__ = "grants"
    __table_args__ = (
        Index("ix_grants_state", "state"),
        Index("ix_grants_run", "dag_id", "run_id"),
    )

    # The integer key keeps FIFO order among bulks submitted within the same clock tick.
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    bulk_id: Mapped[str] = mapped_column(String(300), unique=True)
    dag_id: Mapped[str] = mapped_column(String(ID))
    run_id: Mapped[str] = mapped_column(String(ID))
    task_id: Mapped[str] = mapped_column(String(ID))
    map_index: Mapped[int] = mapped_column(Integer)
    try_number: Mapped[int] = mapped_column(Integer)
    job_id: Mapped[str] = mapped_column(String(2 * ID + 1))
    label: Mapped[str] = mapped_column(String(ID))
    requests: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    state: Mapped[str] = mapped_column(String(16))
    host: Mapped[str | None] = mapped_column(String(ID))
    slots: Mapped[list[list[Any]]] = mapped_column(JSON)
    message: Mapped[str | None] = mapped_column(Text)
    submitted_at: Mapped[float] = mapped_column(Double)
    granted_at: Mapped[float | None] = mapped_column(Double)
    released_at: Mapped[float | None] = mapped_column(Double)
    owner: Mapped[str | None] = mapped_column(String(ID))  # the scheduler that holds its workload


class PoolState(Base):
    """Exactly one row (id 1): the pool's version, raised by every write to the grants table.

    A scheduler's in-memory pool is a cache of the grant rows at one version; a grant decision is
    recorded only if the version is still the one it was decided at (see `coordination.py`)."""

    __tablename__ = "pool_state"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    version: Mapped[int] = mapped_column(BigInteger)


class SchedulerRow(Base):
    """One RegionExecutor (one Airflow scheduler process) sharing the pool, with its heartbeat."""

    __tablename__ = "schedulers"

    scheduler_id: Mapped[str] = mapped_column(String(ID), primary_key=True)
    hostname: Mapped[str] = mapped_column(String(ID))
    pid: Mapped[int] = mapped_column(Integer)
    airflow_job_id: Mapped[int | None] = mapped_column(Integer)
    started_at: Mapped[float] = mapped_column(Double)
    heartbeat_at: Mapped[float] = mapped_column(Double)
    ended_at: Mapped[float | None] = mapped_column(Double)


class AttemptRow(Base):
    """One Spark submission of a region unit (speculative copies are attempts too)."""

    __tablename__ = "attempts"
    __table_args__ = (
        Index("ix_attempts_task", "dag_id", "run_id", "task_id"),
        Index("ix_attempts_unit", "unit_key", "state"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    attempt_id: Mapped[str] = mapped_column(String(ID), unique=True)
    bulk_id: Mapped[str | None] = mapped_column(String(300))
    dag_id: Mapped[str] = mapped_column(String(ID))
    run_id: Mapped[str] = mapped_column(String(ID))
    task_id: Mapped[str] = mapped_column(String(ID))
    map_index: Mapped[int] = mapped_column(Integer)
    unit_key: Mapped[str] = mapped_column(String(ID))
    host: Mapped[str] = mapped_column(String(ID))
    speculative: Mapped[bool] = mapped_column(Boolean)
    state: Mapped[str] = mapped_column(String(16))
    started_at: Mapped[float] = mapped_column(Double)
    ended_at: Mapped[float | None] = mapped_column(Double)
    input_bytes: Mapped[int | None] = mapped_column(BigInteger)  # bytes overflow 32 bits
    message: Mapped[str | None] = mapped_column(Text)


class Commit(Base):
    """The winner of a unit's output: the primary key is what makes the first commit win."""

    __tablename__ = "commits"

    dag_id: Mapped[str] = mapped_column(String(ID), primary_key=True)
    run_id: Mapped[str] = mapped_column(String(ID), primary_key=True)
    unit_key: Mapped[str] = mapped_column(String(ID), primary_key=True)
    winner_attempt: Mapped[str] = mapped_column(String(ID))
    committed_at: Mapped[float] = mapped_column(Double)


class BlockRow(Base):
    """Do not place new slots of `job_id` on `host` before `expires_at`."""

    __tablename__ = "block_entries"
    __table_args__ = (Index("ix_block_entries_expiry", "expires_at"),)

    job_id: Mapped[str] = mapped_column(String(2 * ID + 1), primary_key=True)
    host: Mapped[str] = mapped_column(String(ID), primary_key=True)
    expires_at: Mapped[float] = mapped_column(Double)
    reason: Mapped[str] = mapped_column(Text)
    added_at: Mapped[float] = mapped_column(Double)


class Metric(Base):
    """One sample of a named time series of a region task."""

    __tablename__ = "metrics"
    __table_args__ = (Index("ix_metrics_series", "dag_id", "run_id", "task_id", "name"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    dag_id: Mapped[str] = mapped_column(String(ID))
    run_id: Mapped[str] = mapped_column(String(ID))
    task_id: Mapped[str] = mapped_column(String(ID))
    name: Mapped[str] = mapped_column(String(ID))
    value: Mapped[float] = mapped_column(Double)
    recorded_at: Mapped[float] = mapped_column(Double)
    labels: Mapped[dict[str, Any] | None] = mapped_column(JSON)


class CopyRequest(Base):
    """A speculative copy of one shard, asked for by the speculation sensor and run by the executor.

    `template_path` is a prepared unit task file (everything but host and attempt id); the executor
    fills those in once the copy's slot bulk is granted.
    """

    __tablename__ = "copy_requests"
    __table_args__ = (
        Index("ix_copy_requests_state", "state"),
        Index("ix_copy_requests_task", "dag_id", "run_id", "task_id", "map_index"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    dag_id: Mapped[str] = mapped_column(String(ID))
    run_id: Mapped[str] = mapped_column(String(ID))
    task_id: Mapped[str] = mapped_column(String(ID))
    map_index: Mapped[int] = mapped_column(Integer)
    unit_key: Mapped[str] = mapped_column(String(ID))
    job_id: Mapped[str] = mapped_column(String(2 * ID + 1))
    label: Mapped[str] = mapped_column(String(ID))
    requests: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    template_path: Mapped[str] = mapped_column(Text)
    py_files: Mapped[list[str]] = mapped_column(JSON)
    spark_conf: Mapped[dict[str, str]] = mapped_column(JSON)
    excluded_hosts: Mapped[list[str]] = mapped_column(JSON)
    slow_attempt: Mapped[str | None] = mapped_column(String(ID))
    state: Mapped[str] = mapped_column(String(16))
    attempt_id: Mapped[str | None] = mapped_column(String(ID))
    host: Mapped[str | None] = mapped_column(String(ID))
    message: Mapped[str | None] = mapped_column(Text)
    requested_at: Mapped[float] = mapped_column(Double)
    granted_at: Mapped[float | None] = mapped_column(Double)
    started_at: Mapped[float | None] = mapped_column(Double)
    ended_at: Mapped[float | None] = mapped_column(Double)


class DecisionRow(Base):
    """A DAG run's decision for one adaptive region cut into several shards (its decision task's result): a
    copy, for `regionflow status` and the UI, of what the run's partition store records (the first one)."""

    __tablename__ = "decisions"

    dag_id: Mapped[str] = mapped_column(String(ID), primary_key=True)
    run_id: Mapped[str] = mapped_column(String(ID), primary_key=True)
    task_id: Mapped[str] = mapped_column(String(ID), primary_key=True)
    decided: Mapped[dict[str, int]] = mapped_column(JSON)
    ranges: Mapped[dict[str, list[int]]] = mapped_column(JSON)
    shards: Mapped[int] = mapped_column(Integer)
    reason: Mapped[str] = mapped_column(Text)
    input_bytes: Mapped[int | None] = mapped_column(BigInteger)
    decided_at: Mapped[float] = mapped_column(Double)


__all__ = ["MIGRATABLE_FROM", "SCHEMA_VERSION", "VERSION_TABLE", "AttemptRow", "Base", "BlockRow", "Commit",
           "CopyRequest", "DecisionRow", "GrantRow", "Metric", "PoolState", "SchedulerRow", "SchemaVersion",
           "revision_of"]
