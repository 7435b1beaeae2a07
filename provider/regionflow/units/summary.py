"""What `regionflow run` reports: each unit's run and the run's summary (text or JSON)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class UnitRun:
    name: str
    slots: int = 0
    host: str = ""
    attempts: int = 0
    ready: float | None = None
    start: float | None = None
    end: float | None = None

    @property
    def seconds(self) -> float | None:
        return None if self.start is None or self.end is None else self.end - self.start

    def to_dict(self) -> dict[str, Any]:
        return {"unit": self.name, "slots": self.slots, "host": self.host, "attempts": self.attempts,
                "start": _round(self.start), "end": _round(self.end), "seconds": _round(self.seconds)}


@dataclass
class RunSummary:
    job: str
    mode: str
    run_id: str
    makespan: float
    units: list[UnitRun] = field(default_factory=list)
    sinks: dict[str, dict[str, Any]] = field(default_factory=dict)
    reference: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"job": self.job, "mode": self.mode, "run_id": self.run_id, "reference": self.reference,
                "makespan_s": round(self.makespan, 2), "units": [u.to_dict() for u in self.units],
                "sinks": self.sinks}

    def to_text(self) -> str:
        lines = [f"job {self.job} ({'reference' if self.reference else self.mode}), run {self.run_id}",
                 f"makespan: {self.makespan:.1f} s", ""]
        if self.units:
            lines.append(f"{'unit':<40} {'slots':>5} {'host':<12} {'tries':>5} {'start':>7} {'seconds':>8}")
            for unit in self.units:
                lines.append(f"{unit.name:<40} {unit.slots:>5} {unit.host:<12} {unit.attempts:>5} "
                             f"{_fmt(unit.start):>7} {_fmt(unit.seconds):>8}")
            lines.append("")
        for name, figures in self.sinks.items():
            lines.append(f"sink {name}: {figures['rows']} rows, checksum {figures['checksum']:016x}"
                         + (f" at {figures['path']}" if figures.get("path") else ""))
        return "\n".join(lines)


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


__all__ = ["RunSummary", "UnitRun"]
