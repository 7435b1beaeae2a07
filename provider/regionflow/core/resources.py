"""Resource profiles: what a vertex declares, what a slot request asks for, what a slot offers.

A `ResourceProfile` is an immutable vector of cpu cores, task heap, task off-heap and managed
memory (MiB) plus extended resources such as ``gpu``. FLIP-53's `ResourceSpec` and FLIP-138's
`ResourceProfile` collapse into this one type: a vertex declares one, a slot request sums those of
its slot sharing group, a host's slot offers one. `UNKNOWN` is the profile of a vertex that
declares nothing; a request for it fits any slot.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import ResourceError

_SCALAR_FIELDS = ("cpu", "heap_mib", "off_heap_mib", "managed_mib")


@dataclass(frozen=True)
class ResourceProfile:
    cpu: float = 0.0
    heap_mib: int = 0
    off_heap_mib: int = 0
    managed_mib: int = 0
    extended: tuple[tuple[str, float], ...] = ()
    unknown: bool = field(default=False, compare=True)
    _hash: int = field(default=0, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # profiles key the pool's hot dictionaries: hash once, not on every lookup
        object.__setattr__(self, "_hash", hash((self.cpu, self.heap_mib, self.off_heap_mib, self.managed_mib,
                                                self.extended, self.unknown)))
        for name in _SCALAR_FIELDS:
            value = getattr(self, name)
            if not math.isfinite(value) or value < 0:  # NaN compares false with everything
                raise ResourceError(f"resource '{name}' is {value}; resources must be finite numbers >= 0")
        for name, value in self.extended:
            if not math.isfinite(value) or value < 0:
                raise ResourceError(f"extended resource '{name}' is {value}; resources must be finite numbers >= 0")

    def __hash__(self) -> int:
        return self._hash

    @classmethod
    def of(
        cls,
        cpu: float = 0.0,
        heap_mib: int = 0,
        off_heap_mib: int = 0,
        managed_mib: int = 0,
        **extended: float,
    ) -> ResourceProfile:
        """Build a specified profile; keyword arguments beyond the four scalars are extended resources."""
        return cls(cpu, heap_mib, off_heap_mib, managed_mib, _normalise_extended(extended))

    @property
    def extended_map(self) -> dict[str, float]:
        return dict(self.extended)

    def is_zero(self) -> bool:
        return not self.unknown and all(getattr(self, f) == 0 for f in _SCALAR_FIELDS) and not self.extended

    def __add__(self, other: ResourceProfile) -> ResourceProfile:
        if self.unknown or other.unknown:
            return UNKNOWN
        merged = self.extended_map
        for name, value in other.extended:
            merged[name] = merged.get(name, 0) + value
        return ResourceProfile(
            self.cpu + other.cpu,
            self.heap_mib + other.heap_mib,
            self.off_heap_mib + other.off_heap_mib,
            self.managed_mib + other.managed_mib,
            _normalise_extended(merged),
        )

    def __sub__(self, other: ResourceProfile) -> ResourceProfile:
        """Remaining capacity after `other` is taken; raises if any dimension would go negative."""
        if other.unknown:
            return self
        remaining = self.extended_map
        for name, value in other.extended:
            remaining[name] = remaining.get(name, 0) - value
        return ResourceProfile(
            self.cpu - other.cpu,
            self.heap_mib - other.heap_mib,
            self.off_heap_mib - other.off_heap_mib,
            self.managed_mib - other.managed_mib,
            _normalise_extended(remaining),
        )

    def scaled(self, factor: float) -> ResourceProfile:
        if self.unknown:
            return UNKNOWN
        return ResourceProfile(
            self.cpu * factor,
            int(self.heap_mib * factor),
            int(self.off_heap_mib * factor),
            int(self.managed_mib * factor),
            _normalise_extended({k: v * factor for k, v in self.extended}),
        )

    def amount(self, name: str) -> float:
        """How much of resource `name` this profile has: cpu, heap_mib, off_heap_mib, managed_mib or an
        extended resource such as gpu (0 when absent)."""
        if name in _SCALAR_FIELDS:
            return float(getattr(self, name))
        return self.extended_map.get(name, 0.0)

    def covering(self, other: ResourceProfile) -> ResourceProfile:
        """The smallest profile both this one and `other` fit in (the element-wise maximum); UNKNOWN
        if either is."""
        if self.unknown or other.unknown:
            return UNKNOWN
        merged = self.extended_map
        for name, value in other.extended:
            merged[name] = max(merged.get(name, 0), value)
        return ResourceProfile(
            max(self.cpu, other.cpu),
            max(self.heap_mib, other.heap_mib),
            max(self.off_heap_mib, other.off_heap_mib),
            max(self.managed_mib, other.managed_mib),
            _normalise_extended(merged),
        )

    def exceeding(self, offer: ResourceProfile) -> list[tuple[str, float, float]]:
        """The dimensions in which this profile does not fit `offer`: (name, asked, offered), names as
        in `describe` (cpu, heap_mib, ..., or an extended resource such as gpu)."""
        if self.unknown or offer.unknown:
            return []
        short = [(name, getattr(self, name), getattr(offer, name)) for name in _SCALAR_FIELDS
                 if getattr(self, name) > getattr(offer, name) + 1e-9]
        offered = offer.extended_map
        short += [(name, value, offered.get(name, 0)) for name, value in self.extended
                  if value > offered.get(name, 0) + 1e-9]
        return short

    def fits_in(self, offer: ResourceProfile) -> bool:
        """True when `offer` has at least this much in every dimension (UNKNOWN fits anything)."""
        if self.unknown:
            return True
        if offer.unknown:
            return False
        if any(getattr(self, f) > getattr(offer, f) + 1e-9 for f in _SCALAR_FIELDS):
            return False
        offered = offer.extended_map
        return all(value <= offered.get(name, 0) + 1e-9 for name, value in self.extended)

    def describe(self) -> str:
        if self.unknown:
            return "unknown (default slot)"
        parts = [f"cpu={_fmt(self.cpu)}", f"heap={self.heap_mib}MiB"]
        if self.off_heap_mib:
            parts.append(f"off_heap={self.off_heap_mib}MiB")
        if self.managed_mib:
            parts.append(f"managed={self.managed_mib}MiB")
        parts += [f"{name}={_fmt(value)}" for name, value in self.extended]
        return ",".join(parts)

    def to_dict(self) -> dict[str, Any]:
        if self.unknown:
            return {"unknown": True}
        data = {f: getattr(self, f) for f in _SCALAR_FIELDS}
        data.update(self.extended)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, float] | None) -> ResourceProfile:
        if not data or data.get("unknown"):
            return UNKNOWN
        # Any: of() takes ints for the MiB fields and floats for the rest; all are checked to be numbers below
        scalars: dict[str, Any] = {f: data[f] for f in _SCALAR_FIELDS if f in data}
        extended: dict[str, Any] = {k: v for k, v in data.items() if k not in _SCALAR_FIELDS}
        for name, value in list(scalars.items()) + list(extended.items()):
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                raise ResourceError(f"resource '{name}' must be a number, got {value!r}")
        return cls.of(**scalars, **extended)

    def __str__(self) -> str:
        return self.describe()


def _normalise_extended(values: Mapping[str, float]) -> tuple[tuple[str, float], ...]:
    return tuple(sorted((k, v) for k, v in values.items() if v != 0))


def _fmt(value: float) -> str:
    return f"{value:g}"


UNKNOWN = ResourceProfile(unknown=True)
ZERO = ResourceProfile()
