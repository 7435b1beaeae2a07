"""The run's decision for an adaptive region cut into several shards, taken by its decision task (Airflow:
`RegionDecisionOperator`) once the region's producers have committed: the bytes it reads, the declared
ranges and the cluster, by `core.run_decision.for_run`; recorded in the run's partition store (the first
decision wins), where every later task of the run finds it (`OpenedUnit` applies the recorded decisions); and
copied into regionflow's store, where ``regionflow status`` and the UI's plan of the run show it."""
from __future__ import annotations

from typing import Any

from ..config import RegionflowConfig
from ..core.run_decision import for_run
from ..spark.data.store import PartitionStore, decided_values, run_key_for
from ..store import RegionflowStore
from .dags import JobSource
from .layout import UnitLayout


def decide_region(source: JobSource, run_id: str, mode: str, logical: int, max_shards: int, region_task_id: str,
                  config: RegionflowConfig, store: RegionflowStore) -> dict[str, Any]:
    """Decide logical region `logical` of the run and record it under `region_task_id`; returns the recorded
    decision (``values``, ``shards``, ``reason``, ``input_bytes``, ``ranges``), an earlier one if the run
    has one. Either way `store` then holds a copy of it (the first copy stays)."""
    partitions = PartitionStore(config.data_dir, run_key_for(source.dag_id, run_id))
    decisions = partitions.decisions()
    recorded = decisions.get(region_task_id)
    if recorded is not None:
        recorded = {**recorded, "reason": f"decided earlier in this run: {recorded.get('reason', '')}"}
    else:
        layout = UnitLayout.for_run(source.graph, mode, max_shards, decided_values(decisions))
        decision = for_run(layout.plan, logical, max_shards, config.cluster.total_slots, config.largest_host_slots,
                           layout.region_input_bytes(logical, partitions))
        recorded = partitions.record_decision(region_task_id, decision.to_dict())
    store.record_decision(source.dag_id, run_id, region_task_id, recorded["values"],
                          {name: (int(lo), int(hi)) for name, (lo, hi) in recorded.get("ranges", {}).items()},
                          int(recorded["shards"]), str(recorded.get("reason", "")), recorded.get("input_bytes"))
    return recorded


__all__ = ["decide_region"]
