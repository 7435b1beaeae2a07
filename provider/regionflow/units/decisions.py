"""The run's decision for an adaptive region cut into several shards, taken by its decision task (Airflow:
`RegionDecisionOperator`) once the region's producers have committed: the bytes it reads, the declared
ranges and the cluster, by `core.run_decision.for_run`; recorded in the run's partition store (the first
decision wins), where every later task of the run finds it (`OpenedUnit` applies the recorded decisions); and
copied into regionflow's store, where ``regionflow status`` and the UI's plan of the run show it."""
from __future__ import annotations

from typing import Any

from ..config import RegionflowConfig
from ..core.run_decision import for_run
from ..spark.data.history import DecisionHistory
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
        recorded = {**recorded, "reason": f"decided earlier in this run: {recorded['reason']}"}
    else:
        layout = UnitLayout.for_run(source.graph, mode, max_shards, decided_values(decisions))
        recorded = decide_and_record(layout, logical, partitions, config.cluster.total_slots,
                                     config.largest_host_slots)
    store.record_decision(source.dag_id, run_id, region_task_id, recorded["values"], recorded["ranges"],
                          recorded["shards"], recorded["reason"], recorded["input_bytes"])
    return recorded


def decide_and_record(layout: UnitLayout, logical: int, partitions: PartitionStore, cluster_slots: int,
                      host_slots: int) -> dict[str, Any]:
    """Decide logical region `logical` of the run laid out as `layout` from the bytes its producers committed
    (`core.run_decision.for_run`) and record it in the run's partition store under its region task id; returns
    the recorded decision (the first one, if another process was first), also as the region's last decision
    (`spark.data.history`: the next run's producers choose their layout by it). The decision task and
    ``regionflow run`` (`units.per_run`) both decide this way."""
    decision = for_run(layout.plan, logical, layout.max_shards, cluster_slots, host_slots,
                       layout.region_input_bytes(logical, partitions))
    region = layout.plan.region_task_id(logical)
    recorded = partitions.record_decision(region, decision.to_dict())
    DecisionHistory(partitions.data_dir, layout.plan.graph.name, partitions.fs).remember(
        region, recorded["shards"], partitions.run_id)
    return recorded


__all__ = ["decide_and_record", "decide_region"]
