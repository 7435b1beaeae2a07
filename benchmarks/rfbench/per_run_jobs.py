"""The jobs `benchmarks/per_run_decision.py` compares: the example's orders (2 subtasks) hashed by customer to a
count per customer, the consumer fixed at 1 or 8 subtasks, or adaptive ``[1, 8]`` with
``REGIONFLOW_BENCH_TARGET`` bytes per subtask (its input stored as 8 key groups, its value decided per run)."""
from __future__ import annotations

import os

from regionflow.core.graph import JobGraph

TARGET_ENV = "REGIONFLOW_BENCH_TARGET"


def _job(name: str, consumer: int | tuple[int, int], target: int | None = None) -> JobGraph:
    from regionflow.examples import orders  # reads REGIONFLOW_ORDERS_COUNT when first imported: not before main()

    graph = JobGraph(name)
    graph.add_vertex("orders", 2, fn=orders.generate_orders)
    graph.add_vertex("per_customer", consumer, fn=orders.count_per_customer, sink=f"{name}/per_customer",
                     target_bytes_per_subtask=target)
    graph.connect("orders", "per_customer", "hash", keys=["customer_id"])
    return graph.validate()


def fixed_1() -> JobGraph:
    return _job("per_run_fixed_1", 1)


def fixed_8() -> JobGraph:
    return _job("per_run_fixed_8", 8)


def adaptive() -> JobGraph:
    return _job("per_run_adaptive", (1, 8), int(os.environ.get(TARGET_ENV, str(16 << 20))))
