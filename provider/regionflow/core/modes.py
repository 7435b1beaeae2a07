"""Global data exchange modes (FLIP-119) and how they decide each edge's exchange.

An edge's explicit exchange always wins; otherwise the mode decides from the edge's distribution.
"""
from __future__ import annotations

from enum import Enum

from .errors import SpecError
from .graph import Distribution, Edge, Exchange


class ExchangeMode(Enum):
    ALL_BLOCKING = "all-blocking"
    FORWARD_PIPELINED_ONLY = "forward-pipelined-only"
    POINTWISE_PIPELINED_ONLY = "pointwise-pipelined-only"
    ALL_PIPELINED = "all-pipelined"

    @classmethod
    def parse(cls, value: str | ExchangeMode | None) -> ExchangeMode:
        if value is None:
            return DEFAULT_MODE
        if isinstance(value, ExchangeMode):
            return value
        key = str(value).strip().lower().replace("_", "-")
        key = _MODE_ALIASES.get(key, key)
        for member in cls:
            if member.value == key:
                return member
        names = ", ".join(m.value for m in cls)
        raise SpecError(f"unknown exchange mode {value!r}; use one of {names} (or batch, pipelined)")

    def exchange_for(self, edge: Edge) -> Exchange:
        """The exchange `edge` gets under this mode."""
        if edge.exchange is not None:
            return edge.exchange
        return Exchange.PIPELINED if self._pipelines(edge.distribution) else Exchange.BLOCKING

    def _pipelines(self, distribution: Distribution) -> bool:
        if self is ExchangeMode.ALL_PIPELINED:
            return True
        if self is ExchangeMode.POINTWISE_PIPELINED_ONLY:
            return distribution.is_pointwise
        if self is ExchangeMode.FORWARD_PIPELINED_ONLY:
            return distribution is Distribution.FORWARD
        return False


_MODE_ALIASES = {"batch": "all-blocking", "pipelined": "all-pipelined"}
DEFAULT_MODE = ExchangeMode.FORWARD_PIPELINED_ONLY
