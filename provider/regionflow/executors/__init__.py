"""Airflow executors: `RegionExecutor` (``[core] executor = regionflow.executors.RegionExecutor``).

Imported lazily, so the Airflow-free parts of this package (the admission gate, its guard) can be
imported and tested without Airflow; Airflow's executor loader resolves the name through
`__getattr__` like any attribute.
"""
from __future__ import annotations

from typing import Any

__all__ = ["RegionExecutor", "RegionflowConfigError"]


def __getattr__(name: str) -> Any:
    if name == "RegionExecutor":
        from .region_executor import RegionExecutor

        return RegionExecutor
    if name == "RegionflowConfigError":
        from .guest import RegionflowConfigError

        return RegionflowConfigError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
