"""The states of a unit attempt and the moves between them: the one definition used by the attempt
lifecycle (`spark.attempt.Attempt`), regionflow's store and the speculation policy.

::

      CREATED ──► RUNNING ──► SUCCEEDED | LOST_COMMIT | KILLED | FAILED
         └──────────────────► LOST_COMMIT | KILLED | FAILED   (ended before it started)

SUCCEEDED: this attempt's commit is the unit's. LOST_COMMIT: another attempt of the unit committed
first. KILLED: cancelled (mark failed, a speculation loser, a restart) or its host was lost.
FAILED: the program failed. End states are final. Only RUNNING and the end states are stored.
"""
from __future__ import annotations

from enum import StrEnum

from .errors import RegionflowError


class AttemptState(StrEnum):
    CREATED = "created"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    LOST_COMMIT = "lost_commit"
    KILLED = "killed"
    FAILED = "failed"


ATTEMPT_END_STATES: frozenset[AttemptState] = frozenset(
    {AttemptState.SUCCEEDED, AttemptState.LOST_COMMIT, AttemptState.KILLED, AttemptState.FAILED})
ATTEMPT_TRANSITIONS: dict[AttemptState, frozenset[AttemptState]] = {
    AttemptState.CREATED: frozenset({AttemptState.RUNNING}) | (ATTEMPT_END_STATES - {AttemptState.SUCCEEDED}),
    AttemptState.RUNNING: ATTEMPT_END_STATES,
}


class AttemptTransitionError(RegionflowError):
    """A move the attempt state diagram does not have (a bug in the caller)."""


def check_attempt_move(attempt_id: str, unit: str, source: AttemptState, target: AttemptState) -> None:
    """Raise `AttemptTransitionError` unless `source` -> `target` is a move of the diagram."""
    if target not in ATTEMPT_TRANSITIONS.get(source, frozenset()):
        allowed = ", ".join(sorted(ATTEMPT_TRANSITIONS.get(source, frozenset()))) or "nothing (it has ended)"
        raise AttemptTransitionError(f"attempt {attempt_id} of unit {unit} cannot go from {source.value} to "
                                     f"{target.value}; from {source.value} it can go to: {allowed}")


__all__ = ["ATTEMPT_END_STATES", "ATTEMPT_TRANSITIONS", "AttemptState", "AttemptTransitionError",
           "check_attempt_move"]
