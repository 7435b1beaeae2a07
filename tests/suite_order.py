"""The test modules in the order that ends a pytest-xdist run soonest, and where each worker's time went.

`make test` runs the heavy tests with ``--dist loadfile``: a module goes whole to one worker, and a free worker
takes the next module of the queue. xdist's own queue puts the modules with the most tests first, which says
nothing about their time: the multi-machine module (3 tests, about 450 s) came 21st of 35, so one worker could
still be in it long after the other had run out of work. Here the queue is longest module first (the LPT rule:
the run then ends at most one module's length after the ideal split), from the seconds each module took last
time it was measured (`tests/module_seconds.json`); a module not in it counts `UNKNOWN_S`. The Makefile turns
xdist's reordering off (``--no-loadscope-reorder``) so that this order is the queue's.

At the end of an xdist run the controller prints each worker's modules with their seconds (summed from the
tests' setup, call and teardown reports, which it receives anyway) and how long each worker idled before the
last one finished. ``REGIONFLOW_MODULE_SECONDS=update`` writes the measured seconds into the table.

The modules of `SHARED_STACK_MODULES` share one embedded Airflow stack (tests/airflow/shared_stack.py), so they go
to one worker together, as one unit of xdist's queue (`GroupedLoadFileScheduling`), queued by their sum.
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from xdist.scheduler import LoadFileScheduling

TABLE = Path(__file__).resolve().parent / "module_seconds.json"
UNKNOWN_S = 60.0  # a module without a measurement: about a stack's start and two tests
UPDATE_VARIABLE = "REGIONFLOW_MODULE_SECONDS"
SHARED_STACK_MODULES = ("tests/airflow/test_e2e_session.py", "tests/airflow/test_conformance.py",
                        "tests/airflow/test_daily_runs.py")
SHARED_STACK_UNIT = "shared Airflow stack"


def read_table(path: Path = TABLE) -> dict[str, float]:
    """``{module's node id (tests/...py): seconds}`` from `path` (empty when it is missing)."""
    try:
        return {module: float(seconds) for module, seconds in json.loads(path.read_text()).items()}
    except FileNotFoundError:
        return {}


def longest_first(items: list, table: dict[str, float] | None = None) -> None:
    """Reorder `items` (pytest items, in place) by unit of xdist's queue (`unit_of`: a module, or the modules that
    share a stack, by their sum), the longest expected unit first; a module's tests keep their order, and units of
    equal expectation keep theirs (the sort is stable; pytest collects a module's tests together)."""
    seconds = read_table() if table is None else table
    units: dict[str, float] = {}
    for module in {module_of(item.nodeid) for item in items}:
        unit = unit_of(module)
        units[unit] = units.get(unit, 0.0) + seconds.get(module, UNKNOWN_S)
    items.sort(key=lambda item: -units[unit_of(module_of(item.nodeid))])


def module_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def unit_of(module: str) -> str:
    """The unit of xdist's queue that `module` (a node id, ``tests/...py``) belongs to: itself, or
    `SHARED_STACK_UNIT` for the modules that share a stack."""
    return SHARED_STACK_UNIT if module in SHARED_STACK_MODULES else module


class GroupedLoadFileScheduling(LoadFileScheduling):
    """xdist's ``--dist loadfile`` scheduler with the shared-stack modules as one unit (`unit_of`)."""

    def _split_scope(self, nodeid: str) -> str:
        return unit_of(super()._split_scope(nodeid))


@dataclass
class ModuleSpan:
    module: str
    seconds: float = 0.0  # the sum of its tests' setup, call and teardown durations
    last_report: float = 0.0  # when its last report reached the controller (time.monotonic)


@dataclass
class WorkerTimeline:
    """What the controller learns of each worker's modules from the test reports."""

    workers: dict[str, list[ModuleSpan]] = field(default_factory=dict)

    def report(self, worker: str, nodeid: str, duration: float, now: float | None = None) -> None:
        spans = self.workers.setdefault(worker, [])
        module = module_of(nodeid)
        if not spans or spans[-1].module != module:
            spans.append(ModuleSpan(module))
        spans[-1].seconds += duration
        spans[-1].last_report = time.monotonic() if now is None else now

    def lines(self) -> list[str]:
        """A heading, then a line per worker: its busy seconds, how long it was idle before the last worker
        finished, and its modules (by path under tests/: two are test_store.py) in the order it ran them."""
        if not self.workers:
            return []
        ends = {worker: spans[-1].last_report for worker, spans in self.workers.items()}
        last = max(ends.values())
        lines = ["modules per worker (seconds, in the order run):"]
        for worker in sorted(self.workers):
            spans = self.workers[worker]
            busy = sum(span.seconds for span in spans)
            listing = ", ".join(f"{span.module.removeprefix('tests/')} {span.seconds:.0f}" for span in spans)
            lines.append(f"  {worker}: {busy:.0f} s busy, idle {last - ends[worker]:.0f} s at the end: {listing}")
        return lines

    def measured(self) -> dict[str, float]:
        """Seconds per module (a module split over workers, as in a non-loadfile run, adds up)."""
        seconds: dict[str, float] = {}
        for spans in self.workers.values():
            for span in spans:
                seconds[span.module] = seconds.get(span.module, 0.0) + span.seconds
        return seconds


def update_table(measured: dict[str, float], path: Path = TABLE) -> None:
    """Write `measured` over `path`'s entries for those modules (whole seconds, sorted by module)."""
    table = read_table(path) | measured
    table = {module: round(seconds) for module, seconds in table.items()}
    path.write_text(json.dumps(dict(sorted(table.items())), indent=1) + "\n")


def wants_update() -> bool:
    return os.environ.get(UPDATE_VARIABLE) == "update"
