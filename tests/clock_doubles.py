"""A settable clock for code that takes a ``clock`` callable (the store, the lost-host watch): shared by
the store's tests and the lost-host tests."""
from __future__ import annotations


class FakeClock:
    """Returns `now` until a test moves it (`advance`, or by assigning `now`)."""

    def __init__(self, now: float = 1_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
