"""Whether and how a region is speculated: the detector's settings and the per-region switch.

`SpeculationConfig` holds the detector's settings (``[regionflow] speculation_*``, or a DAG's own),
each checked with an error naming the option and its allowed range. `speculation_allowed` says
whether a region may be speculated at all: ``speculation = on|off`` per DAG and per vertex (a region
runs as one unit, so every vertex must end up on), and no output written outside regionflow's sink
committer, which a second attempt could write twice. The transformer records the answer per region
task in a `SpeculationPolicy`; the detector itself is `regionflow.scheduling.speculation`.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from ..core.errors import SpecError

_SWITCH_WORDS = {"on": True, "true": True, "yes": True, "1": True,
                 "off": False, "false": False, "no": False, "0": False}


# --------------------------------------------------------------------------------------------
# Configuration


def parse_switch(value: str | bool, option: str) -> bool:
    """Read an on/off flag (``on|off``, ``true|false``, ``yes|no``, ``1|0``, or a bool)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _SWITCH_WORDS:
        return _SWITCH_WORDS[value.strip().lower()]
    raise SpecError(f"speculation {option} is {value!r}; it must be on or off (true/false)")


def _is_real(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class _Rule:
    allowed: str
    accepts: Callable[[Any], bool]
    parse: Callable[[str], Any]

    def error(self, option: str, value: Any) -> SpecError:
        return SpecError(f"speculation {option} is {value!r}; it must be {self.allowed}")


_RULES: dict[str, _Rule] = {
    "quantile": _Rule("a number in (0, 1]", lambda v: _is_real(v) and 0 < v <= 1, float),
    "multiplier": _Rule("a number >= 1", lambda v: _is_real(v) and v >= 1, float),
    "min_runtime": _Rule("a number of seconds >= 0", lambda v: _is_real(v) and v >= 0, float),
    "interval": _Rule("a number of seconds > 0", lambda v: _is_real(v) and v > 0, float),
    "max_attempts": _Rule("an integer >= 2 (turn speculation off instead of allowing 1)",
                          lambda v: _is_int(v) and v >= 2, int),
    "weight_by_input": _Rule("on or off (true/false)", lambda v: isinstance(v, bool),
                             lambda text: parse_switch(text, "weight_by_input")),
}


@dataclass(frozen=True)
class SpeculationConfig:
    """Detector settings; invalid values raise SpecError naming the option and its allowed range."""

    quantile: float = 0.75
    multiplier: float = 1.5
    min_runtime: float = 10.0
    interval: float = 1.0
    max_attempts: int = 2
    weight_by_input: bool = True

    def __post_init__(self) -> None:
        for name, rule in _RULES.items():
            value = getattr(self, name)
            if not rule.accepts(value):
                raise rule.error(name, value)

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> SpeculationConfig:
        """Build from airflow.cfg / DAG-param style values; strings are parsed, empty means default."""
        known = [f.name for f in fields(cls)]
        unknown = sorted(set(values) - set(known))
        if unknown:
            raise SpecError(f"speculation option {unknown[0]!r} is unknown; known options: {', '.join(known)}")
        parsed = {name: _parse_option(name, value) for name, value in values.items()
                  if not _is_blank(value)}
        return cls(**parsed)


def _is_blank(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def _parse_option(name: str, value: Any) -> Any:
    rule = _RULES[name]
    if not isinstance(value, str):
        return value
    try:
        return rule.parse(value.strip())
    except (TypeError, ValueError):
        raise rule.error(name, value) from None


DEFAULT_CONFIG = SpeculationConfig()


# --------------------------------------------------------------------------------------------
# Eligibility


def speculation_allowed(vertex_flags: Mapping[str, bool | None], dag_flag: bool,
                        writes_through_committer: bool | Mapping[str, bool]) -> tuple[bool, str]:
    """May this region be speculated? Returns (allowed, why not); the reason is "" when allowed.

    `vertex_flags` maps each vertex of the region to its own ``speculation`` flag, None meaning
    "inherit the DAG's". A region runs as one unit, so every vertex must end up on.
    `writes_through_committer` is False (or maps a sink vertex to False) when some output is
    written outside regionflow's committer: a second attempt could then write it twice.
    """
    for vertex in sorted(vertex_flags):
        flag = vertex_flags[vertex]
        if flag is False:
            return False, f"vertex {vertex!r} has speculation off"
        if flag is None and not dag_flag:
            return False, f"vertex {vertex!r} inherits speculation off from its DAG"
    if not vertex_flags and not dag_flag:
        return False, "speculation is off for the DAG"
    return _committer_check(writes_through_committer)


def _committer_check(writes_through_committer: bool | Mapping[str, bool]) -> tuple[bool, str]:
    if isinstance(writes_through_committer, bool):
        if writes_through_committer:
            return True, ""
        return False, "the region writes outside regionflow's committer"
    outside = sorted(vertex for vertex, through in writes_through_committer.items() if not through)
    if outside:
        return False, f"vertex {outside[0]!r} writes outside regionflow's committer"
    return True, ""


@dataclass(frozen=True)
class SpeculationPolicy:
    """What the transformer decides for one region task: speculate it or not, why not, and how."""

    enabled: bool
    reason: str = ""
    config: SpeculationConfig = DEFAULT_CONFIG

    @classmethod
    def for_region(cls, vertex_flags: Mapping[str, bool | None], dag_flag: bool,
                   writes_through_committer: bool | Mapping[str, bool],
                   config: SpeculationConfig = DEFAULT_CONFIG) -> SpeculationPolicy:
        enabled, reason = speculation_allowed(vertex_flags, dag_flag, writes_through_committer)
        return cls(enabled, reason, config)

    @classmethod
    def off(cls, reason: str) -> SpeculationPolicy:
        return cls(False, reason)


__all__ = ["DEFAULT_CONFIG", "SpeculationConfig", "SpeculationPolicy", "parse_switch", "speculation_allowed"]
