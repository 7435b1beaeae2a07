"""`RegionDecisionOperator`: the decision task of an adaptive region cut into several shards.

``regionflow.transform`` puts it between the region task and its upstream region tasks,
``<region task id>__decide``, and maps the region task over its result with Airflow's dynamic task mapping
(``RegionOperator.partial(...).expand(shard=decide.output)``): it decides the region's adaptive parallelism
for the run once its producers have committed (`regionflow.units.decisions`), records it in the run's
partition store (and a copy in regionflow's store, for ``regionflow status`` and the plan of the run), and
returns the shard indices ``[0, 1, ..., n - 1]``, so the run has as many shard task instances as the
decision gives. The decision is also pushed as the XCom ``decision`` (values, shards,
reason, bytes read), shown in the task's XCom tab, and the reason goes to the task log.
"""
from __future__ import annotations

from typing import Any

from airflow.sdk import BaseOperator

from ..config import RegionflowConfig
from ..store import RegionflowStore
from ..units.dags import JobSource
from ..units.decisions import decide_region

DECISION_SUFFIX = "__decide"


def decision_task_id(region_task_id: str) -> str:
    return f"{region_task_id}{DECISION_SUFFIX}"


class RegionDecisionOperator(BaseOperator):
    ui_color = "#e3f2d9"

    def __init__(self, *, mode: str, logical: int, max_shards: int, region_task_id: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.mode = mode
        self.logical = logical
        self.max_shards = max_shards
        self.region_task_id = region_task_id

    def execute(self, context: Any) -> list[int]:
        dag = context["dag"]
        config = RegionflowConfig.from_airflow()
        decision = decide_region(JobSource.of(dag), context["run_id"], self.mode, self.logical, self.max_shards,
                                 self.region_task_id, config, RegionflowStore.from_config(config.store_url))
        self.log.info("region %s: adaptive parallelism for this run: %s (%s bytes read)", self.region_task_id,
                      decision["reason"], decision.get("input_bytes"))
        context["ti"].xcom_push(key="decision", value=decision)
        return list(range(int(decision["shards"])))


__all__ = ["DECISION_SUFFIX", "RegionDecisionOperator", "decision_task_id"]
