"""Per-partition-group readiness in the Airflow path, without a stack: which region tasks wait shard by
shard (`UnitLayout.reads_part_of_upstream`), which producer shards a shard waits for, the trigger's
decision (`regionflow.triggers.inputs.readiness`) and its run against a real partition store, the
contract flag, and the admission gate running a waiting try's first run without slots."""
from __future__ import annotations

import asyncio
import json
import os

import pytest
from gate_doubles import Counts, NoCopies, NoRecovery, RecordingWorkers, end

from regionflow.contract import INPUTS_GATE_NOTE, RegionSlots, from_executor_config, is_inputs_gate, to_executor_config
from regionflow.core.plan import Plan
from regionflow.core.resources import UNKNOWN
from regionflow.examples import orders
from regionflow.executors.admission import AdmissionGate, Try
from regionflow.scheduling.hosts import Cluster
from regionflow.scheduling.pool import SlotPool
from regionflow.spark.data.store import PartitionStore
from regionflow.store import RegionflowStore
from regionflow.triggers.inputs import InputsCommittedTrigger, ProducerShard, failure_message, readiness
from regionflow.units.layout import UnitLayout


def layout_of(mode: str, max_shards: int = 4) -> UnitLayout:
    return UnitLayout(Plan(orders.build_job(), mode), max_shards)


def logical_named(layout: UnitLayout, task_id: str) -> int:
    return next(lr.index for lr in layout.plan.region_set.logical if layout.plan.region_task_id(lr.index) == task_id)


def test_only_shards_that_read_part_of_an_upstream_region_task_wait_shard_by_shard():
    blocking = layout_of("all-blocking")
    waiting = {blocking.plan.region_task_id(lr.index) for lr in blocking.plan.region_set.logical
               if blocking.reads_part_of_upstream(lr.index)}
    # clean[i] reads orders[i] (FORWARD), enrich[j] reads clean[2j], clean[2j+1] (RESCALE);
    # totals reads every enrich shard (HASH) and the sources read nothing
    assert waiting == {"clean", "enrich"}
    assert not any(layout_of("pointwise-pipelined-only").reads_part_of_upstream(lr.index)
                   for lr in layout_of("pointwise-pipelined-only").plan.region_set.logical)
    one_shard = layout_of("all-blocking", max_shards=1)
    assert not any(one_shard.reads_part_of_upstream(lr.index) for lr in one_shard.plan.region_set.logical)


def test_a_shard_waits_for_exactly_the_producer_shards_it_reads():
    layout = layout_of("all-blocking")
    enrich = layout.units_of_logical(logical_named(layout, "enrich"))
    read = [[layout.task_instance_of(p) for p in layout.producer_units(unit)] for unit in enrich]
    assert read == [[("products", -1), ("clean", 0), ("clean", 1)], [("products", -1), ("clean", 2), ("clean", 3)]]
    totals = layout.units_of_logical(logical_named(layout, "totals"))
    assert {layout.task_instance_of(p) for p in layout.producer_units(totals[0])} == {("enrich", 0), ("enrich", 1)}


A = ProducerShard("clean", 0, "k0")
B = ProducerShard("clean", 1, "k1")
P = ProducerShard("products", -1, "kp")


def test_readiness_waits_for_every_commit_and_fails_only_on_a_final_state_without_one():
    assert readiness([A, B, P], {"k0", "k1", "kp"}, {}).ready
    waiting = readiness([A, B, P], {"k0"}, {"clean_1": "running", "products": "up_for_retry"})
    assert not waiting.ready and not waiting.failed and waiting.pending == (B, P)
    failed = readiness([A, B, P], {"k0", "kp"}, {"clean_1": "failed", "clean_0": "failed", "products": "failed"})
    assert failed.failed == ((B, "failed"),)  # a committed producer's later state does not matter
    assert readiness([P], set(), {"products": "upstream_failed"}).failed == ((P, "upstream_failed"),)
    message = failure_message("enrich[0]", [["clean[1]", "failed"]])
    assert "enrich[0]" in message and "clean[1] (failed)" in message and "clear" in message


def commit_unit(store: PartitionStore, key: str) -> None:
    attempt = store.attempt_dir(key, "a1")
    os.makedirs(attempt, exist_ok=True)
    store.commit(key, "a1", {"host": "h"})


def test_the_trigger_fires_once_the_producers_commit_and_round_trips(tmp_path, monkeypatch):
    store = PartitionStore(str(tmp_path), "run-key")
    trigger = InputsCommittedTrigger(data_dir=str(tmp_path), run_key="run-key", dag_id="d", run_id="r",
                                     producers=[A.to_list(), B.to_list()], poll_interval=0.05)
    path, kwargs = trigger.serialize()
    assert path == "regionflow.triggers.inputs.InputsCommittedTrigger"
    assert InputsCommittedTrigger(**json.loads(json.dumps(kwargs))).producers == [A, B]
    monkeypatch.setattr(InputsCommittedTrigger, "_states", lambda self: {"clean_1": "running"})

    async def first_event(commit_later: bool):
        async def later():
            await asyncio.sleep(0.3)
            commit_unit(store, "k1")
        task = asyncio.create_task(later()) if commit_later else None
        event = await asyncio.wait_for(trigger.run().__anext__(), timeout=10)
        if task:
            await task
        return event.payload

    commit_unit(store, "k0")
    assert asyncio.run(first_event(commit_later=True)) == {"ready": True}
    monkeypatch.setattr(InputsCommittedTrigger, "_states", lambda self: {"clean_1": "failed"})
    hopeless = InputsCommittedTrigger(data_dir=str(tmp_path), run_key="run-key", dag_id="d", run_id="r",
                                      producers=[A.to_list(), ProducerShard("clean", 1, "never").to_list()],
                                      poll_interval=0.05)
    event = asyncio.run(asyncio.wait_for(hopeless.run().__anext__(), timeout=10))
    assert event.payload == {"ready": False, "failed": [["clean[1]", "failed"]]}


def test_the_contract_carries_each_shards_inputs_and_refuses_a_malformed_list():
    waiting = RegionSlots(((UNKNOWN,), (UNKNOWN,)), ("a[0]", "a[1]"), inputs=(("k0", "kp"), ("k1", "kp")))
    config = json.loads(json.dumps(to_executor_config(waiting)))
    assert from_executor_config(config, "d.a") == waiting and waiting.waits_for_inputs
    assert waiting.inputs_of(1) == ("k1", "kp")
    plain = RegionSlots(((UNKNOWN,),), ("x",))
    assert not plain.waits_for_inputs and "waits_for_inputs" not in to_executor_config(plain)["regionflow"]
    config["regionflow"]["waits_for_inputs"] = "yes"
    with pytest.raises(ValueError, match=r"task d\.a: .*malformed .*expected a list, got str"):
        from_executor_config(config, "d.a")
    with pytest.raises(ValueError, match="2 shards"):
        RegionSlots(((UNKNOWN,), (UNKNOWN,)), ("a[0]", "a[1]"), inputs=(("k0",),))


@pytest.fixture
def gate(tmp_path):
    pool = SlotPool(Cluster.parse("a:slots=2"))
    store = RegionflowStore(f"sqlite:///{tmp_path / 'store.db'}")
    return AdmissionGate(pool, store, RecordingWorkers(), copies=NoCopies(), recovery=NoRecovery(), metrics=Counts())


def waiting_try(name: str, try_number: int = 1) -> Try:
    contract = RegionSlots(((UNKNOWN, UNKNOWN),), (name,), inputs=(("source-0",),))
    return Try(key=(name, try_number), ti_id=f"ti-{name}", try_number=try_number, dag_id="d", run_id="r",
               task_id=name, map_index=-1, contract=contract)


def test_a_waiting_try_runs_first_without_slots_and_its_resume_asks_for_them(gate):
    holder = Try(key=("holder", 1), ti_id="ti-holder", try_number=1, dag_id="d", run_id="r", task_id="holder",
                 map_index=-1, contract=RegionSlots(((UNKNOWN, UNKNOWN),), ("holder",)))
    gate.admit("workload:holder", holder)
    shard = waiting_try("enrich")
    gate.admit("workload:enrich (gate)", shard)  # the pool is full, yet the first run starts: it holds nothing
    assert gate.operations.handed() == ["workload:holder", "workload:enrich (gate)"]
    [gate_row] = gate.store.admissions("ti-enrich", 1)
    assert gate_row.state.value == "released" and gate_row.message == INPUTS_GATE_NOTE and not gate_row.slots
    assert is_inputs_gate(gate_row.message) and not is_inputs_gate(None)
    end(gate, shard, "deferred")
    gate.admit("workload:enrich (resumed)", shard)  # the resume waits for its slots, FIFO
    assert gate.operations.handed() == ["workload:holder", "workload:enrich (gate)"]
    end(gate, holder)
    assert gate.operations.handed()[-1] == "workload:enrich (resumed)"
    assert [row.state.value for row in gate.store.admissions("ti-enrich", 1)] == ["released", "granted"]
    end(gate, shard, "failed")
    retry = waiting_try("enrich", try_number=2)
    gate.admit("workload:enrich try 2 (gate)", retry)  # still no commit of its input: it waits first again
    assert gate.operations.handed()[-1] == "workload:enrich try 2 (gate)" and gate.pool.free_slots() == 2
    end(gate, retry, "failed")
    gate.store.record_commit("d", "r", "source-0", "a1")
    third = waiting_try("enrich", try_number=3)
    gate.admit("workload:enrich try 3", third)  # its input is committed: it queues for its slots at once
    assert gate.operations.handed()[-1] == "workload:enrich try 3" and gate.pool.free_slots() == 0
    assert [row.state.value for row in gate.store.admissions("ti-enrich", 3)] == ["granted"]
