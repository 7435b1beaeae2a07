"""What every part of `RegionflowStore` builds on: its clock and its three kinds of session, plus two
small query helpers. The store is one class mixed from parts (grants in `grant_ledger.py`, attempts and
commits in `attempt_ledger.py`, the shared pool in `coordination.py`, blocklist and metrics in
`signal_ledger.py`, speculative copy requests in `copy_ledger.py`); `ledger.RegionflowStore` provides
the sessions."""
from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, TypeVar

from sqlalchemy import Select
from sqlalchemy.orm import Session

from .models import Base
from .retry import StoreRetry

T = TypeVar("T")
Clock = Callable[[], float]


class LedgerBase:
    """The sessions, clock and retry policy a store part uses (implemented by `ledger.RegionflowStore`)."""

    _clock: Clock
    retry: StoreRetry  # what every public call runs through (`retry.retried`)

    def _write(self) -> AbstractContextManager[Session]:
        """A write transaction: it takes the database's write lock first (BEGIN IMMEDIATE on SQLite)."""
        raise NotImplementedError

    def _read(self) -> AbstractContextManager[Session]:
        """A read transaction."""
        raise NotImplementedError

    def _snapshot(self) -> AbstractContextManager[Session]:
        """A read transaction that sees one snapshot across its statements (repeatable read)."""
        raise NotImplementedError


def filtered(query: Select[Any], model: type[Base], **equal: Any) -> Select[Any]:
    """`query` restricted to rows whose columns equal the given values; None means any."""
    for column, value in equal.items():
        if value is not None:
            query = query.where(getattr(model, column) == value)
    return query


def once_more_on(action: Callable[[], T], errors: type[Exception] | tuple[type[Exception], ...]) -> T:
    """Run `action`; if it loses an insert race (`errors`), run it once more: the row now exists."""
    try:
        return action()
    except errors:
        return action()


__all__ = ["Clock", "LedgerBase", "filtered", "once_more_on"]
