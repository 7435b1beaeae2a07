"""The executor waits out a short outage of regionflow's store instead of failing tasks.

The retry policy is the store's own (`regionflow.store.retry`: a locked SQLite database tried again a few
times, a lost connection waited out for at most a bound per outage); the executor's store is one with a bound,
`OUTAGE_RETRY_S` by default, which the executor lowers to half its ``[scheduler]
scheduler_health_check_threshold``. A store without a bound (task processes, the CLI, the UI) fails at once
when the connection is lost.
"""
from __future__ import annotations

from typing import Any

from ..store import RegionflowStore
from ..store.retry import FIRST_WAIT_S, MAX_WAIT_S, OUTAGE_RETRY_S, StoreRetry, is_connection_error


class RetryingStore(RegionflowStore):
    """The executor's `RegionflowStore`: its calls wait out outages (`retry`, by default `StoreRetry()`)."""

    def __init__(self, url: str, *, retry: StoreRetry | None = None, **options: Any) -> None:
        super().__init__(url, retry=retry or StoreRetry(), **options)


__all__ = ["FIRST_WAIT_S", "MAX_WAIT_S", "OUTAGE_RETRY_S", "RetryingStore", "StoreRetry", "is_connection_error"]
