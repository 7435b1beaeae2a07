"""`guarded`: the one way regionflow's executor code calls something that may fail inside Airflow's
scheduler loop (no Airflow import here, so the admission gate can use it without Airflow)."""
from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def guarded(log: logging.Logger | Any, what: str, action: Callable[..., T], *args: Any) -> T | None:
    """Run `action(*args)`; an exception is logged with `what` and swallowed (returns None)."""
    try:
        return action(*args)
    except Exception:  # noqa: BLE001 - the scheduler loop must never see our exceptions
        log.exception("RegionExecutor: unexpected error while %s; the scheduler goes on", what)
        return None


__all__ = ["guarded"]
