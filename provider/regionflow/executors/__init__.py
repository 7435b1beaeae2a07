"""Airflow executors: `RegionExecutor` (``[core] executor = regionflow.executors.RegionExecutor``)."""
from .guest import RegionflowConfigError
from .region_executor import RegionExecutor

__all__ = ["RegionExecutor", "RegionflowConfigError"]
