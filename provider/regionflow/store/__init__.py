"""regionflow's store: its own state in its own database (grants, attempts, commits, blocklist, metrics).

Airflow task processes cannot use Airflow's ORM, so the executor, the task processes and the UI
plugin share this store instead. Import-safe everywhere: no Airflow and no PySpark imports (but for
`db_manager`, which only Airflow loads: ``airflow db migrate`` keeps a store that lives in Airflow's
database). Its schema migrations are Alembic's (`migrate`, `migrations/`).

    store = RegionflowStore.from_config(url=None, airflow_home="/path/to/airflow_home")
    store.record_waiting(bulk_id, dag_id=..., run_id=..., task_id=..., try_number=1, label=..., requests=[...])
"""
from __future__ import annotations

from .coordination import is_stopped
from .engine import DEFAULT_BUSY_TIMEOUT_S, default_url, mask_url, store_exists
from .errors import SlotConflictError, StalePoolError, StateTransitionError, StoreError, UnknownRecordError
from .ledger import RegionflowStore
from .migrate import migrate
from .models import SCHEMA_VERSION
from .records import (
    ATTEMPT_END_STATES,
    COPY_OPEN_STATES,
    COPY_PREFIX,
    COPY_TRANSITIONS,
    GRANT_TRANSITIONS,
    AttemptRecord,
    AttemptState,
    BlockRecord,
    CommitRecord,
    CopyRequestRecord,
    CopyState,
    DecisionRecord,
    GrantRecord,
    GrantState,
    MetricRecord,
    PoolSnapshot,
    SchedulerRecord,
    TakeOver,
    admission_of,
    bulk_id_for,
    dag_id_of_job,
    job_id_for,
    try_of,
)

__all__ = [
    "ATTEMPT_END_STATES", "COPY_OPEN_STATES", "COPY_PREFIX", "COPY_TRANSITIONS", "CopyRequestRecord", "CopyState",
    "DecisionRecord", "DEFAULT_BUSY_TIMEOUT_S", "GRANT_TRANSITIONS", "SCHEMA_VERSION", "AttemptRecord",
    "AttemptState", "BlockRecord", "CommitRecord", "GrantRecord", "GrantState", "MetricRecord", "PoolSnapshot",
    "RegionflowStore", "SchedulerRecord", "SlotConflictError", "StalePoolError", "StateTransitionError",
    "StoreError", "TakeOver", "UnknownRecordError", "admission_of", "bulk_id_for", "dag_id_of_job", "default_url",
    "is_stopped", "job_id_for", "mask_url", "migrate", "store_exists", "try_of",
]
