"""A unit's partitions as the Airflow path sees them, decided from the store alone: the bytes it reads
(which the speculation sensor weights its long-tail check by) and the producer datasets it may release
once every consumer committed (pure: files written by hand in the partition store's layout)."""
import os

from regionflow.core.plan import Plan
from regionflow.examples import orders
from regionflow.spark.data.store import PartitionStore
from regionflow.units.layout import UnitLayout


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
    own = layout.shards[enrich].index  # a directory names its consumer unit by its shard index in its region
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
                write(os.path.join(dataset, f"_rf_unit={own}", "part-00000.parquet"), 100)
                write(os.path.join(dataset, f"_rf_unit={own + 1}", "part-00000.parquet"), 5000)  # another unit's
                write(os.path.join(dataset, f"_rf_unit={enrich}", "part-00000.parquet"), 9000)  # its plan position's
                sizes[dataset] = 100
    assert {plan.topology.edges[plan.topology.groups[g].edge].edge.src for g in consumed} == {"clean", "products"}
    assert layout.input_bytes(enrich, store) == sum(sizes.values()) > 700
    orders_unit = layout.units_of_logical(0)[0]  # a source: it reads no partition
    assert layout.consumed_groups[orders_unit] == [] and layout.input_bytes(orders_unit, store) == 0


def commit(store: PartitionStore, layout: UnitLayout, unit: int, plan: Plan) -> None:
    """Commit `unit` with one small file per blocking edge it writes (one per consumer unit directory)."""
    attempt = store.attempt_dir(layout.keys[unit], "a1")
    for edge in {plan.topology.groups[g].edge for groups in layout.consumed_groups for g in groups}:
        if layout._groups_written(unit, edge):
            write(os.path.join(attempt, f"e{edge}", "_rf_unit=0", "part-00000.parquet"), 10)
    store.commit(layout.keys[unit], "a1", {})


def test_a_producers_partitions_are_releasable_once_every_consumer_committed(tmp_path):
    """Flink's release rule over the store's commits (one Airflow task per unit decides it alone)."""
    plan = Plan(orders.build_job(), "all-blocking")
    layout = UnitLayout(plan, 2)  # at most 2 shards per logical region
    store = PartitionStore(str(tmp_path), "run")
    logical = {name: layout.units_of_logical(i) for i, name in
               enumerate(plan.logical_region_name(r.index) for r in plan.region_set.logical)}
    producers = logical["products"] + logical["orders"] + logical["clean"]
    for unit in producers:
        commit(store, layout, unit, plan)
    first, second = logical["enrich"]
    commit(store, layout, first, plan)
    released = layout.releasable(first, store)
    # products' and clean's datasets are read by both enrich shards: only what enrich[0] alone reads goes
    assert all(layout.keys[first] not in path for path in released)
    shared = {path for path in released}
    commit(store, layout, second, plan)
    released_after = set(layout.releasable(second, store))
    products_dataset = store.partition_path(layout.keys[logical["products"][0]],
                                            next(g.edge for g in plan.topology.groups
                                                 if plan.topology.vertex_names[plan.topology.edges[g.edge].src]
                                                 == "products"))
    assert products_dataset not in shared and products_dataset in released_after
    assert products_dataset in layout.producer_datasets(second, store)
    assert not store.released(products_dataset)
    freed = store.release(sorted(released_after))
    assert freed > 0 and not os.path.exists(products_dataset)
    assert store.released(products_dataset)  # a consumer cleared and run again is told why its input is gone
    assert os.path.exists(store.unit_path(layout.keys[second]))  # the consumers' own units stay
