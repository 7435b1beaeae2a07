"""How fast the interpreter runs right now, so that a core benchmark's absolute figure (decisions per
second, wall seconds) can be read on a box that is slower than usual (a shared 2-core VM here runs
the same pure-Python work 1x to 3.5x slower from hour to hour).

A *CPU unit* is ``sum(range(2_000_000))``: about 24 ms on a quiet 2-core box of the kind the targets
were set on (`QUIET_CPU_UNIT_MS`). `MachineSpeed.slowdown` is the measured unit over that figure, and
`quiet_rate` / `quiet_seconds` scale a figure by it. That scaling is an estimate: a unit of simple
integer work stands in for the benchmark's own mix of allocation and dict work. The benchmarks print
it next to the measured figure, never instead of it.

The test suite's progress lines use the same probe (tests/conftest.py).
"""
from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

QUIET_CPU_UNIT_MS = 24.0


def cpu_unit_times(units: int = 10) -> list[float]:
    """Milliseconds of each of `units` CPU units, run back to back."""
    times = []
    for _ in range(units):
        started = time.perf_counter()
        sum(range(2_000_000))
        times.append((time.perf_counter() - started) * 1000)
    return times


@dataclass(frozen=True)
class MachineSpeed:
    """The median CPU unit of a probe (or of probes before and after a benchmark)."""

    cpu_unit_ms: float

    @classmethod
    def probe(cls, units: int = 10, earlier: MachineSpeed | None = None) -> MachineSpeed:
        """Measure `units` CPU units now; with an `earlier` probe, the mean of its median and this
        one's (a benchmark probes before and after it runs, since the box's speed drifts)."""
        now = statistics.median(cpu_unit_times(units))
        return cls(now if earlier is None else (now + earlier.cpu_unit_ms) / 2)

    @property
    def slowdown(self) -> float:
        """How many times slower than the quiet box the interpreter runs now."""
        return self.cpu_unit_ms / QUIET_CPU_UNIT_MS

    def quiet_rate(self, per_second: float) -> float:
        """A rate measured now, estimated for the quiet box."""
        return per_second * self.slowdown

    def quiet_seconds(self, seconds: float) -> float:
        """A duration measured now, estimated for the quiet box."""
        return seconds / self.slowdown

    def to_dict(self) -> dict[str, float]:
        return {"cpu_unit_ms": round(self.cpu_unit_ms, 1), "quiet_cpu_unit_ms": QUIET_CPU_UNIT_MS,
                "slowdown": round(self.slowdown, 2)}


def with_machine_speed(run: Callable[[], dict[str, Any]], rates: tuple[str, ...] = (),
                       durations: tuple[str, ...] = ()) -> dict[str, Any]:
    """`run()`'s figures, plus ``machine`` (the probe's median CPU unit before and after the run, and
    the slowdown against the quiet box) and ``quiet_estimate``: the figures named in `rates` (per
    second) and `durations` (seconds or milliseconds) scaled to the quiet box."""
    before = MachineSpeed.probe()
    result = run()
    speed = MachineSpeed.probe(earlier=before)
    estimate: dict[str, float] = {name: round(speed.quiet_rate(result[name])) for name in rates}
    estimate.update({name: round(speed.quiet_seconds(result[name]), 3) for name in durations})
    return {**result, "machine": speed.to_dict(), "quiet_estimate": estimate}


__all__ = ["MachineSpeed", "QUIET_CPU_UNIT_MS", "cpu_unit_times", "with_machine_speed"]
