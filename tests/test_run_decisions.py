"""The run's decision for an adaptive region cut into shards, at the service layer (no Airflow, no Spark):
`decide_region` sizes it from the bytes its producers committed and records it in the run's partition
store (and a copy in regionflow's store, for status and the UI); the first decision wins, so a cleared
decision task gets the same answer; a shard opened after it (its first try or a retry) runs in the decided
layout and reads the same key groups. The Airflow run is in
tests/airflow/test_e2e_session.py (`adaptive_per_run`)."""
import os

import pytest

from regionflow.config import RegionflowConfig
from regionflow.core.adaptive import decided_plan
from regionflow.core.graph import JobGraph
from regionflow.scheduling.strategy import UnitState
from regionflow.spark.data.store import UNIT_COLUMN, PartitionStore, run_key_for
from regionflow.store import RegionflowStore
from regionflow.units.dags import JobSource
from regionflow.units.decisions import decide_region
from regionflow.units.layout import UnitLayout
from regionflow.units.opened import OpenedUnit
from regionflow.units.per_run import RunDecisions, carried_over

KIB = 1 << 10
RUN = "manual__2026-12-07"


@pytest.fixture
def config(tmp_path):
    options = {"hosts": "h1:slots=2", "data_dir": str(tmp_path / "data")}
    return RegionflowConfig.from_values(lambda name: options.get(name, ""), airflow_home=str(tmp_path))


@pytest.fixture
def store(tmp_path):
    return RegionflowStore(f"sqlite:///{tmp_path}/regionflow.db")


def source() -> JobSource:
    graph = JobGraph("per_run")
    graph.add_vertex("scan", 2, fn="m:f")
    graph.add_vertex("agg", (1, 8), fn="m:g", target_bytes_per_subtask=64 * KIB)
    graph.connect("scan", "agg", "hash", "blocking", keys=["k"])
    return JobSource(decided_plan(graph.validate(), 2, "all-blocking").graph, "/dags/per_run.py", "per_run")


def commit_producers(config, written: int, run: str = RUN) -> tuple[PartitionStore, int]:
    """The scan units' committed partitions of the edge into agg, as a key-grouped edge stores them: one
    directory per producer unit (its rows sorted by key group), `written` bytes in all, unit u's file
    `u * 8` bytes longer than unit 0's; returns the store and the bytes written (`written`, less a rounding)."""
    partitions = PartitionStore(config.data_dir, run_key_for("per_run", run))
    layout = UnitLayout(decided_plan(source().graph, 2, "all-blocking"), 8)
    edge = next(e.index for e in layout.plan.topology.edges)
    producers = layout.units_of_logical(0)
    for number, unit in enumerate(producers):
        path = os.path.join(partitions.partition_path(layout.keys[unit], edge), f"{UNIT_COLUMN}=0")
        os.makedirs(path, exist_ok=True)
        with open(os.path.join(path, "part-0.parquet"), "wb") as handle:
            handle.write(b"x" * unit_bytes(written, number))
    return partitions, sum(unit_bytes(written, number) for number in range(len(producers)))


def unit_bytes(written: int, number: int) -> int:
    """The file of producer unit `number` (of 2) when the two hold about `written` bytes."""
    return written // 2 - 4 + 8 * number


def test_the_decision_follows_the_bytes_is_recorded_and_the_first_one_wins(config, store):
    partitions, written = commit_producers(config, 360 * KIB)
    decision = decide_region(source(), RUN, "all-blocking", 1, 8, "agg", config, store)
    assert decision["values"] == {"agg": 6} and decision["shards"] == 6 and decision["input_bytes"] == written
    assert decision["ranges"] == {"agg": [1, 8]}
    assert partitions.decisions() == {"agg": {key: decision[key] for key in ("values", "shards", "reason",
                                                                              "input_bytes", "ranges")}}
    assert partitions.decided_values() == {"agg": 6}
    kept = store.decisions("per_run", RUN)["agg"]
    assert (kept.decided, kept.ranges, kept.shards, kept.input_bytes) == ({"agg": 6}, {"agg": (1, 8)}, 6, written)
    assert kept.reason == decision["reason"] and "6 shard(s)" in kept.reason
    commit_producers(config, 90 * KIB)  # a cleared decision task meets other bytes: the run keeps its decision
    again = decide_region(source(), RUN, "all-blocking", 1, 8, "agg", config, store)
    assert again["shards"] == 6 and again["reason"].startswith("decided earlier in this run")
    assert store.decisions("per_run", RUN) == {"agg": kept}  # the store's copy is the first one too


def test_a_decision_task_that_died_before_copying_its_decision_copies_it_when_cleared(config, store, tmp_path):
    commit_producers(config, 90 * KIB)
    decision = decide_region(source(), RUN, "all-blocking", 1, 8, "agg", config,
                             RegionflowStore(f"sqlite:///{tmp_path}/elsewhere.db"))  # its copy went elsewhere
    assert store.decisions("per_run", RUN) == {}
    decide_region(source(), RUN, "all-blocking", 1, 8, "agg", config, store)
    kept = store.decisions("per_run", RUN)["agg"]
    assert (kept.decided, kept.shards) == (decision["values"], decision["shards"]) == ({"agg": 2}, 2)


def test_every_try_of_a_shard_opens_the_decided_layout_and_reads_the_same_key_groups(config, tmp_path):
    commit_producers(config, 360 * KIB)
    decide_region(source(), RUN, "all-blocking", 1, 8, "agg", config, RegionflowStore(f"sqlite:///{tmp_path}/s.db"))
    reads = []
    for _ in range(2):  # the first try and a retry open the shard the same way
        opened = OpenedUnit(source(), RUN, "all-blocking", 1, 8, 3, config)
        layout, unit = opened.layout, opened.unit
        assert len(layout.units_of_logical(1)) == 6 and opened.name == "agg[3]"
        reads.append(layout.input_bytes(unit, opened.partitions))
    # subtask 3 of 6 reads key groups [ceil(3*8/6), ceil(4*8/6)) = 4 and 5 of 8, of both producer units: its
    # share of each unit's bytes
    sizes = [unit_bytes(360 * KIB, number) for number in range(2)]
    assert reads[0] == reads[1] == sum(size * 6 // 8 - size * 4 // 8 for size in sizes)
    with pytest.raises(Exception, match="no shard 6"):
        OpenedUnit(source(), RUN, "all-blocking", 1, 8, 6, config)


def test_producers_write_their_key_groups_unsorted_after_the_region_was_last_decided_as_one_shard(config, store):
    """The sort by key group only pays when the consumer runs as several shards: the producers of a run follow
    the region's last decision (`spark.data.history`), sorted before any and after one of several shards."""
    def unsorted(run: str) -> list[int]:
        return OpenedUnit(source(), run, "all-blocking", 0, 8, 0, config).unit_task(slots=1).task.unsorted_key_groups

    [edge] = UnitLayout(decided_plan(source().graph, 2, "all-blocking"), 8).key_groups
    assert unsorted("manual__1") == []  # no run decided yet: sorted
    commit_producers(config, 40 * KIB, "manual__1")
    assert decide_region(source(), "manual__1", "all-blocking", 1, 8, "agg", config, store)["shards"] == 1
    assert unsorted("manual__2") == [edge]
    commit_producers(config, 360 * KIB, "manual__2")  # the input grew: its consumer filters the unsorted files
    assert decide_region(source(), "manual__2", "all-blocking", 1, 8, "agg", config, store)["shards"] == 6
    assert unsorted("manual__3") == []
    decide_region(source(), "manual__1", "all-blocking", 1, 8, "agg", config, store)  # a cleared decision task:
    assert unsorted("manual__3") == []  # the run's first decision stands, and the history is not rewound


def test_without_a_decision_a_shard_opens_the_parse_time_layout(config):
    opened = OpenedUnit(source(), "manual__other", "all-blocking", 1, 8, 1, config)
    assert len(opened.layout.units_of_logical(1)) == 2  # planned for the cluster's 2 slots


def test_regionflow_run_decides_the_region_once_its_producers_committed_and_carries_the_strategy_over(config):
    """`regionflow run` (`LocalRunner`) takes the same decision through `RunDecisions`, records it the same
    way, and goes on in the decided layout with the strategy brought to where the run was (`carried_over`)."""
    planned = decided_plan(source().graph, 2, "all-blocking")
    partitions, _ = commit_producers(config, 360 * KIB)
    assert RunDecisions(planned, 1, partitions, 2, 2).pending == set()  # one shard: decided at its grant
    decisions = RunDecisions(planned, 8, partitions, 2, 2)
    layout = UnitLayout(planned, 8)
    producers = layout.units_of_logical(0)
    assert decisions.pending == {1} and decisions.due(layout, producers) == []
    assert decisions.due(layout, layout.units_of_logical(1)) == [1]
    recorded = decisions.decide(layout, 1)
    assert recorded["values"] == {"agg": 6} and partitions.decisions()["agg"] == recorded
    assert decisions.pending == set()
    decided = decisions.layout()
    assert len(decided.units_of_logical(1)) == 6
    assert [decided.keys[u] for u in decided.units_of_logical(0)] == [layout.keys[u] for u in producers]
    finished = [layout.keys[u] for u in reversed(producers)]  # in the order they finished
    scheduler = carried_over(decided, finished, running=[])
    states = [scheduler.state[u] for u in range(len(decided.keys))]
    assert states == [UnitState.FINISHED] * 2 + [UnitState.READY] * 6
    assert carried_over(decided, finished[:1], running=finished[1:]).state[decided.units_of_logical(0)[0]] \
        is UnitState.RUNNING  # a producer still running stays running; agg waits for it
