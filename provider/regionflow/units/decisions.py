"""The run's decision for an adaptive region cut into several shards, taken by its decision task (Airflow:
`RegionDecisionOperator`) once the region's producers have committed: the bytes it reads, the declared
ranges and the cluster, by `core.run_decision.for_run`; recorded in the run's partition store (the first
decision wins), where every later task of the run finds it (`OpenedUnit` applies the recorded decisions)."""
from __future__ import annotations

from typing import Any

from ..config import RegionflowConfig
from ..core.run_decision import for_run
from ..spark.data.store import PartitionStore, decided_values, run_key_for
from .dags import JobSource
from .layout import UnitLayout


def decide_region(source: JobSource, run_id: str, mode: str, logical: int, max_shards: int, region_task_id: str,
                  config: RegionflowConfig) -> dict[str, Any]:
    """Decide logical region `logical` of the run and record it under `region_task_id`; returns the recorded
    decision (``values``, ``shards``, ``reason``, ``input_bytes``), an earlier one if the run has one."""
    partitions = PartitionStore(config.data_dir, run_key_for(source.dag_id, run_id))
    decisions = partitions.decisions()
    recorded = decisions.get(region_task_id)
    if recorded is not None:
        return {**recorded, "reason": f"decided earlier in this run: {recorded.get('reason', '')}"}
    layout = UnitLayout.for_run(source.graph, mode, max_shards, decided_values(decisions))
    decision = for_run(layout.plan, logical, max_shards, config.cluster.total_slots, config.largest_host_slots,
                       layout.region_input_bytes(logical, partitions))
    return partitions.record_decision(region_task_id, decision.to_dict())


__all__ = ["decide_region"]
