"""`guarded`: the one way regionflow's executor code calls something that may fail inside Airflow's
scheduler loop, and `Every`: the one way a sync step runs only every so many seconds (no Airflow
import here, so the admission gate can use them without Airflow)."""
from __future__ import annotations

import logging
import time
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


class Every:
    """A sync step's pace: `due()` is True at most once per `seconds` (monotonic clock)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._last = float("-inf")

    def due(self, now: float | None = None) -> bool:
        """True when `seconds` have passed since the last True (or never was); then counts from `now`."""
        moment = time.monotonic() if now is None else now
        if moment - self._last < self.seconds:
            return False
        self._last = moment
        return True


__all__ = ["Every", "guarded"]
