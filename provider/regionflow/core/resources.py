"""Resource profiles: what a vertex declares, what a slot request asks for, what a slot offers.

A `ResourceProfile` is an immutable vector of cpu cores, task heap, task off-heap and managed
memory (MiB) plus extended resources such as ``gpu``. FLIP-53's `ResourceSpec` and FLIP-138's
`ResourceProfile` collapse into this one type: a vertex declares one, a slot request sums those of
its slot sharing group, a host's slot offers one. `UNKNOWN` is the profile of a vertex that
declares nothing; a request for it fits any slot.

Memory sizes are whole MiB (Spark's ``spark.executor.memory=1000.5m`` is refused by the JVM): `of` and
`from_dict` refuse a fractional one, naming the field and the whole number to write. An extended
resource name one or two edits away from a known one (``cpus``, ``heap_mb``) is most likely a typo:
`suspicious_resources` says which names are, and the name they are close to.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import ResourceError

_SCALAR_FIELDS = ("cpu", "heap_mib", "off_heap_mib", "managed_mib")
COMMON_EXTENDED = ("gpu", "fpga")  # Spark's usual resource names: known even where no host declares them
KNOWN_RESOURCES = _SCALAR_FIELDS + COMMON_EXTENDED
MAX_TYPO_EDITS = 2


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
        """Build a specified profile; keyword arguments beyond the four scalars are extended resources.
        A memory size must be a whole number of MiB (1024.0 is taken as 1024)."""
        return cls(cpu, _whole_mib("heap_mib", heap_mib), _whole_mib("off_heap_mib", off_heap_mib),
                   _whole_mib("managed_mib", managed_mib), _normalise_extended(extended))

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


def whole_mib_problem(value: Any) -> str | None:
    """Why `value` is not a whole number of MiB (the fix included), or None; a non-number, NaN or a
    negative value is left to the other checks."""
    if isinstance(value, float) and math.isfinite(value) and value >= 0 and not value.is_integer():
        return f"memory sizes are whole MiB: write {math.ceil(value)}"
    return None


def _whole_mib(name: str, value: Any) -> Any:
    problem = whole_mib_problem(value)
    if problem:
        raise ResourceError(f"resources.{name} is {value}; {problem}")
    return int(value) if isinstance(value, float) and value.is_integer() else value


def suspicious_resources(names: Iterable[str], declared: Iterable[str] = ()) -> dict[str, str]:
    """The extended resource names among `names` that look like typos, each with the known name it is
    closest to: not itself known (cpu, heap_mib, off_heap_mib, managed_mib, gpu, fpga, or one of
    `declared`, e.g. the names some host offers) and at most two edits (Levenshtein, ignoring case) from
    a known name. ``cpus`` -> ``cpu``, ``heap_mb`` -> ``heap_mib``; ``gpu`` is known, never flagged."""
    known = list(dict.fromkeys([*KNOWN_RESOURCES, *sorted(declared)]))
    found: dict[str, str] = {}
    for name in names:
        if name in known:
            continue
        distances = {k: edit_distance(name.lower(), k.lower()) for k in known}
        closest = min(known, key=distances.__getitem__)  # ties: the first known name (cpu before gpu)
        if distances[closest] <= MAX_TYPO_EDITS:
            found[name] = closest
    return found


def describe_suspicious(suspects: Mapping[str, str]) -> str:
    """``resource 'cpus' is not a known name (did you mean 'cpu'?)``, one clause per name; "" for none."""
    return "; ".join(f"resource {name!r} is not a known name (did you mean {closest!r}?)"
                     for name, closest in suspects.items())


def edit_distance(a: str, b: str) -> int:
    """Levenshtein distance: insertions, deletions and substitutions that turn `a` into `b`."""
    previous = list(range(len(b) + 1))
    for i, char in enumerate(a, 1):
        current = [i]
        for j, other in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (char != other)))
        previous = current
    return previous[-1]


def _normalise_extended(values: Mapping[str, float]) -> tuple[tuple[str, float], ...]:
    return tuple(sorted((k, v) for k, v in values.items() if v != 0))


def _fmt(value: float) -> str:
    return f"{value:g}"


UNKNOWN = ResourceProfile(unknown=True)
ZERO = ResourceProfile()
