"""regionflow's store: its own state in its own database (grants, attempts, commits, blocklist, metrics).

Airflow task processes cannot use Airflow's ORM, so the executor, the task processes and the UI
plugin share this store instead. Import-safe everywhere: no Airflow and no PySpark imports.

    store = RegionflowStore.from_config(url=None, airflow_home="/path/to/airflow_home")
    store.record_waiting(bulk_id, dag_id=..., run_id=..., task_id=..., try_number=1, label=..., requests=[...])
"""
from __future__ import annotations

from .engine import DEFAULT_BUSY_TIMEOUT_S, default_url, mask_url, store_exists
from .errors import SlotConflictError, StateTransitionError, StoreError, UnknownRecordError
from .ledger import RegionflowStore
from .models import SCHEMA_VERSION
from .records import (
    ATTEMPT_END_STATES,
    COPY_OPEN_STATES,
    COPY_TRANSITIONS,
    GRANT_TRANSITIONS,
    AttemptRecord,
    AttemptState,
    BlockRecord,
    CommitRecord,
    CopyRequestRecord,
    CopyState,
    GrantRecord,
    GrantState,
    MetricRecord,
    admission_of,
    bulk_id_for,
    dag_id_of_job,
    job_id_for,
)

__all__ = [
    "ATTEMPT_END_STATES", "COPY_OPEN_STATES", "COPY_TRANSITIONS", "CopyRequestRecord", "CopyState",
    "DEFAULT_BUSY_TIMEOUT_S", "GRANT_TRANSITIONS", "SCHEMA_VERSION", "AttemptRecord",
    "AttemptState", "BlockRecord", "CommitRecord", "GrantRecord", "GrantState", "MetricRecord",
    "RegionflowStore", "SlotConflictError", "StateTransitionError", "StoreError", "UnknownRecordError",
    "admission_of", "bulk_id_for", "dag_id_of_job", "default_url", "job_id_for", "mask_url", "store_exists",
]
