"""Error types of regionflow's store.

Like the other layers' errors, each message names the record at fault (bulk, attempt, URL) and
says what would fix it. A store URL in a message always has its password masked.
"""
from __future__ import annotations

from ..core.errors import RegionflowError


class StoreError(RegionflowError):
    """regionflow's store cannot be opened or was asked something it cannot do."""


class UnknownRecordError(StoreError, KeyError):
    """An operation names a grant or attempt the store has never seen."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


class StateTransitionError(StoreError):
    """A grant or attempt was asked to move to a state its current state does not allow."""


class SlotConflictError(StoreError):
    """A grant names a slot that another live grant already holds (a slot granted twice)."""


class StalePoolError(StoreError):
    """A grant decision was made on a pool version that another write has since replaced."""


__all__ = ["StalePoolError", "SlotConflictError", "StateTransitionError", "StoreError", "UnknownRecordError"]
