"""Each try's runs handed to the workers whose end is not yet read (no Airflow here).

Airflow's scheduler may queue the same try again (a reschedule poke, a resumed deferral) before the
executor reads the end of its previous run: the try then has two runs out, and the earlier run's late
end must not be reported (Airflow would take it for the new run's end). A try Airflow takes for stuck
right after its latest run went to the workers is starting, not stuck. `RunLedger` keeps the count and
the time; it reads as a mapping of try keys to their `Runs`.
"""
from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator, Mapping
from typing import NamedTuple


class Runs(NamedTuple):
    """A try's runs handed to the workers whose end is not yet read, and when the latest went (monotonic)."""

    unread: int  # runs whose end is not yet read
    handed_at: float


class RunLedger(Mapping[Hashable, Runs]):
    """Try key -> its runs handed to the workers whose end is not yet read."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock  # monotonic seconds
        self._runs: dict[Hashable, Runs] = {}

    def __getitem__(self, key: Hashable) -> Runs:
        return self._runs[key]

    def __iter__(self) -> Iterator[Hashable]:
        return iter(self._runs)

    def __len__(self) -> int:
        return len(self._runs)

    def handed(self, key: Hashable) -> None:
        """A run of try `key` went to the workers now."""
        runs = self._runs.get(key)
        self._runs[key] = Runs(runs.unread + 1 if runs else 1, self.clock())

    def end_read(self, key: Hashable) -> bool:
        """The end of a run of try `key` was read: whether it is the end of the latest run (False: of an
        earlier run, whose end came after the try was queued again)."""
        runs = self._runs.get(key)
        if runs is not None and runs.unread > 1:
            self._runs[key] = runs._replace(unread=runs.unread - 1)
            return False
        self._runs.pop(key, None)
        return True

    def starting(self, key: Hashable, now: float, starting_s: float) -> bool:
        """Whether the latest run of try `key` went to the workers less than `starting_s` before `now`."""
        runs = self._runs.get(key)
        return runs is not None and now - runs.handed_at < starting_s

    def forget(self, key: Hashable) -> None:
        """Try `key` ended without its runs' ends being read (failed, revoked, its end unheard)."""
        self._runs.pop(key, None)


__all__ = ["RunLedger", "Runs"]
