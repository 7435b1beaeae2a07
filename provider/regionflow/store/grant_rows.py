"""The rules over grant rows, shared by the ledger's single writes and the pool's decisions.

Every write to the grants table raises the pool version (`bump_pool_version`) first, in the same
transaction. Taking the pool_state row lock first in every such write is also the lock order that
keeps server databases free of deadlocks between schedulers.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import Select, select
from sqlalchemy.orm import Session

from .errors import SlotConflictError, StateTransitionError, StoreError
from .models import GrantRow, PoolState
from .records import GRANT_TRANSITIONS, GrantRecord, GrantState, Slot

Holders = dict[Slot, GrantRow]  # slot -> the live grant row that holds it


def bump_pool_version(session: Session) -> int:
    """Lock the pool_state row and raise the pool version; returns the new version."""
    state = session.scalar(select(PoolState).where(PoolState.id == 1).with_for_update())
    if state is None:  # a store created before the row existed: the first writer adds it
        state = PoolState(id=1, version=0)
        session.add(state)
    state.version += 1
    return state.version


def pool_version(session: Session, lock: bool = False) -> int:
    """The pool version (0 before the first write); `lock` takes the row lock for a compare-and-set."""
    query = select(PoolState).where(PoolState.id == 1)
    state = session.scalar(query.with_for_update() if lock else query)
    return 0 if state is None else int(state.version)


def live_grants_query() -> Select[tuple[GrantRow]]:
    """Granted bulks, oldest grant first."""
    return select(GrantRow).where(GrantRow.state == GrantState.GRANTED.value).order_by(GrantRow.granted_at, GrantRow.id)


def waiting_grants_query() -> Select[tuple[GrantRow]]:
    """Waiting bulks in FIFO order (the order they were first recorded)."""
    return select(GrantRow).where(GrantRow.state == GrantState.WAITING.value).order_by(GrantRow.id)


def live_holders(session: Session) -> Holders:
    """Which live grant holds each taken slot."""
    return {(host, int(index)): row for row in session.scalars(live_grants_query()) for host, index in row.slots}


def normalized_slots(bulk_id: str, slots: Iterable[Sequence[Any]]) -> list[Slot]:
    """(host, index) pairs of a grant, checked: at least one, none twice."""
    pairs = [(str(host), int(index)) for host, index in slots]
    if not pairs:
        raise StoreError(f"grant '{bulk_id}' has no slots; a grant gives a region at least one slot")
    if len(set(pairs)) != len(pairs):
        raise StoreError(f"grant '{bulk_id}' names a slot twice: {pairs}; each request needs its own slot")
    return pairs


def check_grant_transition(row: GrantRow, target: GrantState) -> None:
    """Raise `StateTransitionError` unless `row` may go to `target`."""
    current = GrantState(row.state)
    allowed = GRANT_TRANSITIONS[current]
    if target not in allowed:
        next_states = ", ".join(sorted(allowed)) or "none (final state)"
        raise StateTransitionError(
            f"grant '{row.bulk_id}' (region '{row.label}') cannot go from {current.value} to "
            f"{target.value}; from {current.value} it may go to: {next_states}"
        )


def grant_row(row: GrantRow, pairs: list[Slot], holders: Holders, now: float) -> None:
    """Make a waiting row granted on `pairs`; no slot may be held by another live grant (`holders`,
    updated here so a batch of grants is checked against itself too)."""
    check_grant_transition(row, GrantState.GRANTED)
    taken = [(slot, holders[slot]) for slot in pairs if slot in holders]
    if taken:
        described = "; ".join(f"{host}[{index}] by '{other.bulk_id}' (region '{other.label}')"
                              for (host, index), other in taken)
        raise SlotConflictError(
            f"grant '{row.bulk_id}' (region '{row.label}') names slots that live grants hold: {described}; "
            f"release those grants first (a pool decided on an old version of the store would also cause this)"
        )
    row.state = GrantState.GRANTED.value
    row.slots = [list(pair) for pair in pairs]
    row.host = pairs[0][0]
    row.granted_at = now
    holders.update(dict.fromkeys(pairs, row))


def release_row(row: GrantRow, message: str | None, now: float) -> None:
    """A row's slots go back (or a waiting row is withdrawn). A lost grant stays lost, stamped."""
    check_grant_transition(row, GrantState.RELEASED)
    if row.state != GrantState.LOST:
        row.state = GrantState.RELEASED.value
        if message:
            row.message = joined(row.message, message)
    row.released_at = now


def joined(previous: str | None, note: str) -> str:
    """A grant's message grows by notes, newest last, bounded so a busy sensor cannot bloat it."""
    text = note if not previous else f"{previous}; {note}"
    return text if len(text) <= 2000 else "..." + text[-1997:]


def grant_record(row: GrantRow, version: int | None = None) -> GrantRecord:
    """The frozen record of a row; `version` is the pool version the returning write made."""
    return GrantRecord(
        bulk_id=row.bulk_id, dag_id=row.dag_id, run_id=row.run_id, task_id=row.task_id,
        map_index=row.map_index, try_number=row.try_number, job_id=row.job_id, label=row.label,
        requests=tuple(dict(request) for request in row.requests), state=GrantState(row.state),
        host=row.host, slots=tuple((host, int(index)) for host, index in row.slots), message=row.message,
        submitted_at=row.submitted_at, granted_at=row.granted_at, released_at=row.released_at,
        owner=row.owner, pool_version=version,
    )


def plain_request(request: Any) -> dict[str, Any]:
    """A slot request as a plain dict (a `ResourceProfile` or a mapping)."""
    to_dict = getattr(request, "to_dict", None)
    return dict(to_dict() if callable(to_dict) else request)


__all__ = ["bump_pool_version", "check_grant_transition", "grant_record", "grant_row", "joined", "live_grants_query",
           "live_holders", "normalized_slots", "plain_request", "pool_version", "release_row", "waiting_grants_query"]
