"""The two jobs `benchmarks/key_groups.py` compares: the example's orders (2 subtasks) hashed by customer to a
count per customer, the consumer adaptive ``[1, 8]`` (its input stored as 8 key groups once its region is cut
into shards) or fixed at ``REGIONFLOW_BENCH_CONSUMER`` subtasks (stored per consumer shard)."""
from __future__ import annotations

import os

from regionflow.core.graph import JobGraph

CONSUMER_ENV = "REGIONFLOW_BENCH_CONSUMER"


def _job(name: str, consumer: int | tuple[int, int]) -> JobGraph:
    from regionflow.examples import orders  # reads REGIONFLOW_ORDERS_COUNT when first imported: not before main()

    graph = JobGraph(name)
    graph.add_vertex("orders", 2, fn=orders.generate_orders)
    graph.add_vertex("per_customer", consumer, fn=orders.count_per_customer, sink=f"{name}/per_customer")
    graph.connect("orders", "per_customer", "hash", keys=["customer_id"])
    return graph.validate()


def adaptive() -> JobGraph:
    return _job("keygroups_adaptive", (1, 8))


def fixed() -> JobGraph:
    return _job("keygroups_fixed", int(os.environ.get(CONSUMER_ENV, "2")))
