"""The transform-executor contract (`regionflow.contract`): what a task carries in its executor_config,
versioned and checked on read, with errors that name the task and the fix."""
from __future__ import annotations

import json

import pytest

from regionflow.contract import (
    KEY,
    VERSION,
    ContractError,
    NoSlots,
    RegionNeed,
    RegionSlots,
    from_executor_config,
    to_executor_config,
)
from regionflow.core.resources import UNKNOWN, ResourceProfile

SLOTS = RegionSlots(requests=((ResourceProfile(cpu=1.0, heap_mib=512),), (UNKNOWN, UNKNOWN)),
                    labels=("a[0]", "a[shard 1: 2 regions]"), plan={"job": {"name": "j"}, "mode": "all-blocking"})


def test_a_region_task_and_a_slotless_task_round_trip_through_json():
    for contract in (SLOTS, NoSlots(), RegionSlots(((UNKNOWN,),), ("x",))):
        config = json.loads(json.dumps(to_executor_config(contract)))  # what serialization keeps
        assert config[KEY]["version"] == VERSION
        assert from_executor_config(config, "d.t") == contract


def test_a_runs_declaration_round_trips_with_repeated_profiles_written_once():
    big = ResourceProfile(cpu=2.0, heap_mib=1024)
    needs = (RegionNeed("a", "a[0]", 0, (big,) * 64 + (UNKNOWN,) * 2), RegionNeed("b", "b[1]", 1, (UNKNOWN,)))
    contract = RegionSlots(((UNKNOWN,),), ("a[0]",), run_needs=needs)
    body = json.loads(json.dumps(to_executor_config(contract)))
    assert body[KEY]["run_needs"][0]["requests"] == [[big.to_dict(), 64], [UNKNOWN.to_dict(), 2]]
    assert from_executor_config(body, "d.a") == contract
    assert "run_needs" not in to_executor_config(RegionSlots(((UNKNOWN,),), ("x",)))[KEY]  # later regions: none


def test_smaller_requests_round_trip_per_shard_and_a_fixed_task_has_none():
    big = ResourceProfile(cpu=1.0, heap_mib=512)
    smaller = (((big,) * 4, (big,) * 2), ())
    contract = RegionSlots(((big,) * 8, (UNKNOWN,)), ("a[0]", "b[0]"), smaller=smaller)
    body = json.loads(json.dumps(to_executor_config(contract)))
    assert body[KEY]["smaller"][0] == [[[big.to_dict(), 4]], [[big.to_dict(), 2]]]
    assert from_executor_config(body, "d.a") == contract
    assert contract.smaller_of(-1) == ((big,) * 4, (big,) * 2) and contract.smaller_of(1) == ()
    assert RegionSlots(((UNKNOWN,),), ("x",)).smaller_of(0) == ()
    with pytest.raises(ContractError, match="smaller requests lists them per shard; got 1 lists for 2 shards"):
        RegionSlots(((big,), (big,)), ("a", "b"), smaller=(((big,),),))


def test_a_task_without_the_key_is_not_regionflows():
    assert from_executor_config(None, "d.t") is None
    assert from_executor_config({"KubernetesExecutor": {}}, "d.t") is None


def test_a_shard_gives_its_requests_and_label_and_a_shard_beyond_them_is_named():
    assert SLOTS.shard(-1) == ((ResourceProfile(cpu=1.0, heap_mib=512),), "a[0]")
    assert SLOTS.shard(1) == ((UNKNOWN, UNKNOWN), "a[shard 1: 2 regions]")
    with pytest.raises(ContractError, match="map index 2 is beyond the task's 2 shard"):
        SLOTS.shard(2)


def test_a_dag_serialized_before_the_version_field_is_read_as_version_1():
    legacy = {KEY: {"requests": [[{"unknown": True}]], "labels": ["t"]}}
    assert from_executor_config(legacy, "d.t") == RegionSlots(((UNKNOWN,),), ("t",))
    assert from_executor_config({KEY: {"no_slots": True}}, "d.s") == NoSlots()


@pytest.mark.parametrize("body, message", [
    ({"version": 2, "requests": [], "labels": []}, "task d.t was serialized by a regionflow whose task contract is "
                                                   "version 2; this one reads version 1"),
    ({"requests": "x", "labels": ["t"]}, "task d.t: executor_config['regionflow'] is malformed"),
    ({"labels": ["t"]}, "task d.t: executor_config['regionflow'] is malformed (KeyError"),
    ({"requests": [[{}], [{}]], "labels": ["t"]}, "task d.t: a region task needs one slot request list and one "
                                                  "label per shard; got 2 request lists and 1 labels"),
    ({"requests": [[]], "labels": ["t"]}, "task d.t: every shard of a region task asks for at least one slot"),
    ("oops", "task d.t: executor_config['regionflow'] is str, not a mapping"),
])
def test_a_body_this_release_cannot_read_names_the_task_and_the_fix(body, message):
    with pytest.raises(ContractError) as error:
        from_executor_config({KEY: body}, "d.t")
    assert str(error.value).startswith(message)
