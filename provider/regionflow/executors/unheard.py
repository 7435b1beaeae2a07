"""Granted tries whose end no worker reported, found through Airflow's database (no Airflow here).

LocalExecutor loses the report of a worker process that dies, and the try's slots would otherwise stay
taken for good. Normally a worker's report of a try's end comes within a sync or two of the end Airflow's
database shows; `UnheardEnds` remembers when each granted try first looked ended there and returns those
that have looked ended for a grace period without the report, for the gate to end them
(`AdmissionGate.end_unheard`).
"""
from __future__ import annotations

from collections.abc import Hashable, Iterator, Mapping
from typing import Any

from ..store import try_of
from .tries import now_is


def in_database(granted: Mapping[Hashable, str], states: Mapping[str, tuple[Any, int | None]]
                ) -> Iterator[tuple[Hashable, int, Any, int | None]]:
    """Each of the `granted` tries (try key -> bulk id) with its own try number and what Airflow's database
    says of its task instance, (state, try number); (None, None) when it is gone. `states` maps task
    instance ids to their (state, try number)."""
    for key, bulk_id in granted.items():
        ti_id, try_number = try_of(bulk_id)
        state, now_try = states.get(ti_id, (None, None))
        yield key, try_number, state, now_try


class UnheardEnds:
    """When each granted try first looked ended in Airflow's database, without its worker's report."""

    def __init__(self) -> None:
        self._since: dict[Hashable, float] = {}  # granted try key -> when Airflow's database first said it ended

    def found(self, granted: Mapping[Hashable, str], states: Mapping[str, tuple[Any, int | None]],
              live_states: frozenset[Any], now: float, grace_s: float) -> list[tuple[Hashable, str]]:
        """The `granted` tries (try key -> bulk id) that have looked ended for `grace_s` seconds (`now` is
        monotonic), with what Airflow's database says of them.

        `states` maps task instance ids to their (state, try number) in Airflow's database (absent: deleted).
        A granted try has ended there when its task instance is gone, is at another try, or is in none of
        `live_states` (queued, running)."""
        found = []
        for key, try_number, state, now_try in in_database(granted, states):
            if now_try == try_number and state in live_states:
                self._since.pop(key, None)
                continue
            if now - self._since.setdefault(key, now) >= grace_s:
                found.append((key, now_is(state, now_try)))
        for key in [key for key in self._since if key not in granted]:
            del self._since[key]
        return found

    def forget(self, key: Hashable) -> None:
        """Try `key` was ended (or its end was heard)."""
        self._since.pop(key, None)


__all__ = ["UnheardEnds", "in_database"]
