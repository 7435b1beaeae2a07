"""Airflow executors: `RegionExecutor` (``[core] executor = regionflow.executors.RegionExecutor``)."""
from .region_executor import RegionExecutor

__all__ = ["RegionExecutor"]
