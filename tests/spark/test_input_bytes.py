"""A unit's input bytes (UnitLayout.input_bytes), which the speculation sensor weights the long-tail
check by: its own directory of each producer unit's dataset, a broadcast dataset whole (pure, files
written by hand in the partition store's layout)."""
import os

from regionflow.core.plan import Plan
from regionflow.examples import orders
from regionflow.spark.store import PartitionStore
from regionflow.spark.unit import UnitLayout


def write(path: str, size: int) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as handle:
        handle.write(b"x" * size)


def test_a_unit_counts_its_own_partitions_and_whole_broadcasts(tmp_path):
    plan = Plan(orders.build_job(), "all-blocking")
    layout = UnitLayout(plan, None)  # one unit per execution region
    store = PartitionStore(str(tmp_path), "run")
    scheduler = layout.scheduler()
    enrich = next(u for u, name in enumerate(layout.names) if name.startswith("enrich") and "0" in name)
    consumed = [group for group, _ in scheduler.consumed[enrich]]
    sizes = {}
    for group in consumed:
        group_of = plan.topology.groups[group]
        edge = plan.topology.edges[group_of.edge].edge
        for producer in group_of.producers:
            unit = layout.unit_of_region[plan.region_set.region_of[producer]]
            dataset = store.partition_path(layout.keys[unit], group_of.edge)
            if edge.distribution.name == "BROADCAST":
                write(os.path.join(dataset, "_rf_unit=-1", "part-00000.parquet"), 700)
                sizes[dataset] = 700
            else:
                write(os.path.join(dataset, f"_rf_unit={enrich}", "part-00000.parquet"), 100)
                write(os.path.join(dataset, f"_rf_unit={enrich + 1}", "part-00000.parquet"), 5000)  # another unit's
                sizes[dataset] = 100
    assert {plan.topology.edges[plan.topology.groups[g].edge].edge.src for g in consumed} == {"clean", "products"}
    assert layout.input_bytes(enrich, store, consumed) == sum(sizes.values()) > 700
    assert layout.input_bytes(enrich, store, []) == 0
