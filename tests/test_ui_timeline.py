"""The React UI's read-only views of a real (SQLite) store: one DAG run's Gantt chart (`run_timeline`) and the
pool's recent history (`cluster_history`), with the store queries they read."""
from __future__ import annotations

import json
import math

import pytest
from clock_doubles import FakeClock

from regionflow.scheduling.blocklist import EVERY_JOB
from regionflow.scheduling.hosts import Cluster
from regionflow.store import RegionflowStore
from regionflow.ui.history import cluster_history
from regionflow.ui.timeline import run_timeline

CLUSTER = Cluster.parse("a:slots=2;b:slots=2")


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def store(tmp_path, clock) -> RegionflowStore:
    return RegionflowStore(f"sqlite:///{tmp_path / 'store.db'}", clock=clock)


def wait(store, bulk_id, *, at, clock, slots=2, dag="d", run="r", task="region", shard=0, try_number=1):
    clock.now = at
    return store.record_waiting(bulk_id, dag_id=dag, run_id=run, task_id=task, try_number=try_number,
                                label=f"{task}[{shard}]", requests=[{"cpu": 1.0}] * slots, map_index=shard)


def at(clock, moment, action, *args, **kwargs):
    clock.now = moment
    return action(*args, **kwargs)


# ------------------------------------------------------------------------------- store queries


def test_a_jobs_blocks_include_expired_ones_and_those_for_every_job_oldest_first(store, clock):
    at(clock, 1020.0, store.block, EVERY_JOB, "b", 1500.0, "host lost")
    at(clock, 1000.0, store.block, "d/r", "a", 1010.0, "slow attempt x")  # expired long ago
    at(clock, 1030.0, store.block, "other/r", "a", 1500.0, "not this run")
    at(clock, 1040.0, store.block, "d/r#copy:7", "a", 1500.0, "a copy avoids the slow host")
    at(clock, 1050.0, store.block, "d/rr#copy:8", "a", 1500.0, "a copy of another run")
    blocks = store.blocks("d/r")
    assert [(b.job_id, b.host, b.added_at, b.expires_at) for b in blocks] == [
        ("d/r", "a", 1000.0, 1010.0), (EVERY_JOB, "b", 1020.0, 1500.0), ("d/r#copy:7", "a", 1040.0, 1500.0)]


def test_grants_active_between_overlap_the_window_and_rejected_ones_do_not_wait_forever(store, clock):
    wait(store, "old", at=100.0, clock=clock)
    at(clock, 110.0, store.record_granted, "old", [("a", 0)])
    at(clock, 200.0, store.record_released, "old")  # ended before the window
    wait(store, "refused", at=150.0, clock=clock, slots=9)
    at(clock, 151.0, store.record_rejected, "refused", "unfulfillable")  # never stamped released_at
    wait(store, "queued", at=160.0, clock=clock)  # still waiting: open-ended
    wait(store, "held", at=170.0, clock=clock)
    at(clock, 180.0, store.record_granted, "held", [("b", 0)])  # still granted: open-ended
    wait(store, "ends-at-since", at=300.0, clock=clock)
    at(clock, 1000.0, store.record_released, "ends-at-since")
    wait(store, "later", at=2001.0, clock=clock)  # submitted after the window
    found = store.grants_active_between(1000.0, 2000.0)
    assert [g.bulk_id for g in found] == ["queued", "held", "ends-at-since"]
    assert [g.bulk_id for g in store.grants_active_between(0.0, 150.0)] == ["old", "refused"]


# ------------------------------------------------------------------------------- the run's Gantt chart


def speculated_run(store: RegionflowStore, clock: FakeClock) -> str:
    """Shard 0 waits, gets two slots on a, runs slowly; a copy on b wins; returns the copy's bulk id."""
    wait(store, "ti-1:1", at=1000.0, clock=clock)
    at(clock, 1010.0, store.record_granted, "ti-1:1", [("a", 0), ("a", 1)])
    at(clock, 1011.0, store.start_attempt, "att-1", dag_id="d", run_id="r", task_id="region", unit_key="u0",
       host="a", map_index=0, bulk_id="ti-1:1", input_bytes=1_000)
    copy = at(clock, 1030.0, store.request_copy, dag_id="d", run_id="r", task_id="region", map_index=0,
              unit_key="u0", label="region[0]", requests=[{"cpu": 1.0}], template_path="/tmp/u0.json",
              excluded_hosts=["a"], slow_attempt="att-1")
    at(clock, 1031.0, store.block, "d/r", "a", 1400.0, "slow attempt att-1")
    wait(store, copy.bulk_id, at=1032.0, clock=clock, slots=1, try_number=0)
    at(clock, 1035.0, store.record_granted, copy.bulk_id, [("b", 1)])
    at(clock, 1035.0, store.mark_copy, copy.request_id, "granted", host="b")
    at(clock, 1036.0, store.start_attempt, "att-2", dag_id="d", run_id="r", task_id="region", unit_key="u0",
       host="b", map_index=0, bulk_id=copy.bulk_id, speculative=True, input_bytes=1_000)
    at(clock, 1036.0, store.mark_copy, copy.request_id, "running", attempt_id="att-2")
    at(clock, 1050.0, store.record_commit, "d", "r", "u0", "att-2")
    at(clock, 1050.0, store.end_attempt, "att-2", "succeeded")
    at(clock, 1050.0, store.mark_copy, copy.request_id, "won")
    at(clock, 1051.0, store.end_attempt, "att-1", "lost_commit", "att-2 committed first")
    at(clock, 1052.0, store.record_released, "ti-1:1")
    at(clock, 1052.0, store.record_released, copy.bulk_id)
    return copy.bulk_id


def test_the_timeline_shows_the_wait_the_slow_attempt_and_the_winning_copy(store, clock):
    copy_bulk = speculated_run(store, clock)
    wait(store, "ti-2:1", at=1040.0, clock=clock, slots=3, shard=1)  # still waiting: the queue row
    wait(store, "elsewhere", at=1040.0, clock=clock, run="r2")  # another run: not shown
    at(clock, 1045.0, store.start_attempt, "att-x", dag_id="d", run_id="r", task_id="loose", unit_key="ux",
       host="b")  # no grant known: one bar on its host
    view = run_timeline(store, CLUSTER, "d", "r", now=2000.0)
    json.dumps(view)  # JSON-able as it is
    assert (view["dag_id"], view["run_id"], view["generated_at"]) == ("d", "r", 2000.0)
    assert view["rows"] == [{"host": "a", "slot": 0}, {"host": "a", "slot": 1},
                            {"host": "b", "slot": 0}, {"host": "b", "slot": 1}]
    bars = {bar["id"]: bar for bar in view["bars"]}
    assert [bar["id"] for bar in view["bars"]] == [
        "wait:ti-1:1", "att-1@a/0", "att-1@a/1", f"wait:{copy_bulk}", "att-2@b/1", "wait:ti-2:1", "att-x@b/None"]

    first_wait = bars["wait:ti-1:1"]
    assert (first_wait["kind"], first_wait["start"], first_wait["end"]) == ("wait", 1000.0, 1010.0)
    assert (first_wait["host"], first_wait["slot"], first_wait["state"], first_wait["slots"]) == ("a", 0, "released", 2)
    copy_wait = bars[f"wait:{copy_bulk}"]
    assert (copy_wait["start"], copy_wait["end"], copy_wait["host"], copy_wait["slot"]) == (1032.0, 1035.0, "b", 1)
    queued = bars["wait:ti-2:1"]
    assert (queued["start"], queued["end"], queued["state"], queued["host"], queued["slot"]) == (
        1040.0, None, "waiting", None, None)
    assert (queued["shard"], queued["slots"], queued["label"], queued["try_number"]) == (1, 3, "region[1]", 1)

    slow = [bars["att-1@a/0"], bars["att-1@a/1"]]
    assert [(bar["host"], bar["slot"]) for bar in slow] == [("a", 0), ("a", 1)]  # every slot of its grant
    for bar in slow:
        assert (bar["kind"], bar["start"], bar["end"], bar["state"]) == ("attempt", 1011.0, 1051.0, "lost_commit")
        assert (bar["speculative"], bar["winner"], bar["original"], bar["attempt"]) == (False, False, None, "att-1")
        assert (bar["slots"], bar["try_number"], bar["input_bytes"]) == (2, 1, 1_000)
        assert bar["message"] == "att-2 committed first"
    winner = bars["att-2@b/1"]
    assert (winner["start"], winner["end"], winner["state"]) == (1036.0, 1050.0, "succeeded")
    assert (winner["speculative"], winner["winner"], winner["original"], winner["slots"]) == (True, True, "att-1", 1)
    loose = bars["att-x@b/None"]
    assert (loose["host"], loose["slot"], loose["end"], loose["label"], loose["slots"]) == ("b", None, None, "loose", 1)

    assert view["blocks"] == [{"host": "a", "start": 1031.0, "end": 1400.0, "reason": "slow attempt att-1"}]


def test_a_rejected_grant_waits_until_it_was_submitted_and_no_store_gives_no_bars(store, clock):
    wait(store, "ti-9:1", at=1000.0, clock=clock, slots=9)
    at(clock, 1001.0, store.record_rejected, "ti-9:1", "unfulfillable: needs 9 slots")
    (bar,) = run_timeline(store, CLUSTER, "d", "r", now=2000.0)["bars"]
    assert (bar["start"], bar["end"], bar["state"], bar["message"]) == (
        1000.0, 1000.0, "rejected", "unfulfillable: needs 9 slots")
    empty = run_timeline(None, CLUSTER, "d", "r", now=2000.0)
    assert empty["bars"] == [] and empty["blocks"] == [] and len(empty["rows"]) == 4


# ------------------------------------------------------------------------------- the pool's history


def overlapping_grants(store: RegionflowStore, clock: FakeClock) -> None:
    wait(store, "g1", at=1000.0, clock=clock, slots=1)
    wait(store, "g2", at=1005.0, clock=clock)
    at(clock, 1010.0, store.record_granted, "g1", [("a", 0)])
    at(clock, 1050.0, store.record_granted, "g2", [("a", 1), ("b", 0)])
    at(clock, 1100.0, store.record_released, "g1")  # g2 still holds its slots
    wait(store, "refused", at=1200.0, clock=clock, slots=9)
    at(clock, 1201.0, store.record_rejected, "refused", "unfulfillable")


def test_occupancy_and_queue_step_at_the_grants_times(store, clock):
    overlapping_grants(store, clock)
    history = cluster_history(store, CLUSTER, hours=1.0, now=2000.0)
    json.dumps(history)
    since = 2000.0 - 3600.0
    assert (history["since"], history["until"], history["grants"]) == (since, 2000.0, 3)
    assert history["hosts"] == [{"name": "a", "slots": 2}, {"name": "b", "slots": 2}]
    assert history["occupancy"] == {
        "a": [[since, 0], [1010.0, 1], [1050.0, 2], [1100.0, 1], [2000.0, 1]],
        "b": [[since, 0], [1050.0, 1], [2000.0, 1]],
    }
    # g1 waits alone, g2 joins, each leaves when granted; the rejected one never counts as waiting
    assert history["queue"] == [[since, 0], [1000.0, 1], [1005.0, 2], [1010.0, 1], [1050.0, 0], [2000.0, 0]]


def test_the_window_clips_what_started_before_it(store, clock):
    overlapping_grants(store, clock)
    history = cluster_history(store, CLUSTER, hours=60 / 3600, now=1080.0)  # since 1020
    since = history["since"]
    assert math.isclose(since, 1020.0)
    assert history["occupancy"]["a"] == [[since, 1], [1050.0, 2], [1080.0, 2]]
    assert history["queue"] == [[since, 1], [1050.0, 0], [1080.0, 0]]


@pytest.mark.parametrize("hours", [0, -1.0, 168.5, float("nan"), float("inf")])
def test_hours_must_be_within_a_week(hours):
    with pytest.raises(ValueError, match=r"^hours must be more than 0 and at most 168 \(a week\), got "):
        cluster_history(None, CLUSTER, hours=hours, now=2000.0)


def test_no_store_yet_gives_zero_series():
    history = cluster_history(None, CLUSTER, hours=1.0, now=4600.0)
    assert history["occupancy"] == {"a": [[1000.0, 0], [4600.0, 0]], "b": [[1000.0, 0], [4600.0, 0]]}
    assert history["queue"] == [[1000.0, 0], [4600.0, 0]] and history["grants"] == 0


def test_downsampling_keeps_each_buckets_highest_value(store, clock):
    # since 1000, until 4600: with max_points 5, four buckets of 900 s; one-second spikes at 1100, 1110,
    # 1120 (first bucket) and 2900 (third) must all still show
    for number, moment in enumerate([1100.0, 1110.0, 1120.0, 2900.0]):
        wait(store, f"s{number}", at=moment - 0.5, clock=clock, slots=1)
        at(clock, moment, store.record_granted, f"s{number}", [("a", 0)])
        at(clock, moment + 1.0, store.record_released, f"s{number}")
    full = cluster_history(store, CLUSTER, hours=1.0, now=4600.0)
    assert len(full["occupancy"]["a"]) == 10
    history = cluster_history(store, CLUSTER, hours=1.0, now=4600.0, max_points=5)
    peaks = [[1000.0, 1], [1900.0, 0], [2800.0, 1], [3700.0, 0], [4600.0, 0]]
    assert history["occupancy"]["a"] == peaks and history["queue"] == peaks
    assert history["occupancy"]["b"] == [[1000.0, 0], [4600.0, 0]]  # short enough: as it is
