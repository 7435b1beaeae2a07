"""Plan: to_dict for FLIP-119, slot demand, slot sharing, resource checks, rendering, references."""
from __future__ import annotations

import json
from pathlib import Path

import core_jobs
import pytest

from regionflow.core.errors import RegionflowError, ResourceError
from regionflow.core.graph import load_job
from regionflow.core.plan import DEFAULT_SLOT_SHARING_GROUP, Plan, SlotRequest, compact_subtasks
from regionflow.core.resources import UNKNOWN, ResourceProfile

JOBS = Path(__file__).resolve().parents[2] / "examples" / "jobs"


def make_job(vertices, edges=(), name="p"):
    return core_jobs.make_job(vertices, edges, name)


def region_with(plan, subtask):
    return plan.region_set.region_of_subtask(plan.topology.subtask_id(subtask))


# ---- FLIP-119 to_dict --------------------------------------------------------------------------------

S = lambda v, n: [[f"{v}#{i}"] for i in range(n)]  # noqa: E731

FLIP119_DICT = {
    "all-blocking": dict(
        logical_regions=[["A"], ["B"], ["C"], ["D"]],
        regions=S("A", 2) + S("B", 2) + S("C", 4) + S("D", 4),
        blocking_edges=[
            {"src": "A", "dst": "B", "distribution": "FORWARD"},
            {"src": "B", "dst": "C", "distribution": "RESCALE"},
            {"src": "C", "dst": "D", "distribution": "HASH"},
        ],
        min_slots=1,
        slots={1: 12},
    ),
    "forward-pipelined-only": dict(
        logical_regions=[["A", "B"], ["C"], ["D"]],
        regions=[["A#0", "B#0"], ["A#1", "B#1"]] + S("C", 4) + S("D", 4),
        blocking_edges=[
            {"src": "B", "dst": "C", "distribution": "RESCALE"},
            {"src": "C", "dst": "D", "distribution": "HASH"},
        ],
        min_slots=1,
        slots={1: 10},
    ),
    "pointwise-pipelined-only": dict(
        logical_regions=[["A", "B", "C"], ["D"]],
        regions=[["A#0", "B#0", "C#0", "C#1"], ["A#1", "B#1", "C#2", "C#3"]] + S("D", 4),
        blocking_edges=[{"src": "C", "dst": "D", "distribution": "HASH"}],
        min_slots=2,
        slots={2: 2, 1: 4},
    ),
    "all-pipelined": dict(
        logical_regions=[["A", "B", "C", "D"]],
        regions=[["A#0", "A#1", "B#0", "B#1", "C#0", "C#1", "C#2", "C#3", "D#0", "D#1", "D#2", "D#3"]],
        blocking_edges=[],
        min_slots=4,
        slots={4: 1},
    ),
}


@pytest.mark.parametrize("mode", list(FLIP119_DICT))
def test_flip119_to_dict(mode):
    plan = Plan(load_job(str(JOBS / "flip119.json")), mode)
    data = plan.to_dict()
    expected = FLIP119_DICT[mode]
    assert {"job", "mode", "logical_regions", "regions", "region_count", "blocking_edges",
            "min_slots", "slots"} <= set(data)
    assert data["job"] == "flip119"
    assert data["mode"] == mode
    assert sorted(data["logical_regions"]) == sorted(expected["logical_regions"])
    assert sorted(map(sorted, data["regions"])) == sorted(map(sorted, expected["regions"]))
    assert data["region_count"] == len(expected["regions"]) == len(data["regions"])
    assert data["blocking_edges"] == expected["blocking_edges"]
    assert data["min_slots"] == expected["min_slots"] == plan.min_slots
    assert len(data["slots"]) == data["region_count"]
    assert {k: data["slots"].count(k) for k in set(data["slots"])} == expected["slots"]
    for names, slots in zip(data["regions"], data["slots"], strict=True):
        # pointwise-pipelined-only: the two A+B+C regions need 2 slots (C has 2 subtasks in each)
        assert slots == max(sum(1 for n in names if n.startswith(v + "#")) for v in "ABCD")
    assert json.loads(json.dumps(data)) == data
    assert "inputs" not in data


def test_flip119_to_dict_inputs():
    plan = Plan(load_job(str(JOBS / "flip119.json")))
    inputs = plan.to_dict(inputs=True)["inputs"]
    assert inputs["A#0"] == {}
    assert inputs["B#1"] == {"A->B": ["A#1"]}
    assert inputs["C#1"] == {"B->C": ["B#0"]}
    assert inputs["C#2"] == {"B->C": ["B#1"]}
    assert inputs["D#3"] == {"C->D": ["C#0", "C#1", "C#2", "C#3"]}
    assert len(inputs) == 12


def test_inputs_dict_disambiguates_parallel_edges():
    plan = Plan(make_job({"A": 3, "B": 3}, [("A", "B", "forward", "pipelined"), ("A", "B", "hash", "blocking")]))
    assert plan.inputs_dict()["B#1"] == {
        "A->B (edge 0, FORWARD)": ["A#1"],
        "A->B (edge 1, HASH)": ["A#0", "A#1", "A#2"],
    }


def test_region_names():
    plan = Plan(load_job(str(JOBS / "flip119.json")), "pointwise-pipelined-only")
    data = plan.to_dict()
    assert sorted(data["region_names"]) == ["A+B+C[0]", "A+B+C[1]", "D[0]", "D[1]", "D[2]", "D[3]"]
    assert plan.logical_region_name(region_with(plan, "C#0").logical) == "A+B+C"


# ---- slot demand -----------------------------------------------------------------------------------------


def test_slots_default_group_is_largest_vertex_count():
    plan = Plan(make_job({"A": 4, "B": 2}, [("A", "B", "hash", "pipelined")]))
    (region,) = plan.regions
    assert plan.slots(region) == 4
    assert plan.slot_requests(region) == (SlotRequest(DEFAULT_SLOT_SHARING_GROUP, 4, UNKNOWN),)
    assert plan.min_slots == 4


def test_slots_named_groups_add_up():
    plan = Plan(make_job({"A": (4, UNKNOWN, None), "B": (2, UNKNOWN, "side"), "C": (3, UNKNOWN, "side")},
                         [("A", "B", "hash", "pipelined"), ("B", "C", "rebalance", "pipelined")]))
    (region,) = plan.regions
    requests = {r.slot_sharing_group: r.count for r in plan.slot_requests(region)}
    assert requests == {DEFAULT_SLOT_SHARING_GROUP: 4, "side": 3}
    assert plan.slots(region) == 7
    assert plan.min_slots == 7


def test_min_slots_is_largest_region_demand():
    # region 1: A(5) alone (blocking out); region 2: B(2)+C(3) pipelined hash; slots 1 vs 3
    plan = Plan(make_job({"A": 5, "B": 2, "C": 3}, [("A", "B", "hash", "blocking"), ("B", "C", "hash", "pipelined")]))
    slots = sorted(plan.slots(r) for r in plan.regions)
    assert slots == [1, 1, 1, 1, 1, 3]
    assert plan.min_slots == 3


def test_single_subtask_region_needs_one_slot_even_in_own_group():
    plan = Plan(make_job({"A": (3, UNKNOWN, "g")}))
    assert [plan.slots(r) for r in plan.regions] == [1, 1, 1]
    assert plan.slot_requests(plan.regions[0]) == (SlotRequest("g", 1, UNKNOWN),)


def test_slot_request_profile_is_sum_of_group_vertex_resources():
    a = ResourceProfile.of(cpu=1, heap_mib=100, managed_mib=100)
    b = ResourceProfile.of(cpu=2, heap_mib=50, managed_mib=300, gpu=1)
    c = ResourceProfile.of(cpu=0.5, off_heap_mib=10)
    plan = Plan(make_job({"A": (2, a, None), "B": (2, b, None), "C": (4, c, "io")},
                         [("A", "B", "hash", "pipelined"), ("B", "C", "broadcast", "pipelined")]))
    (region,) = plan.regions
    requests = {r.slot_sharing_group: r for r in plan.slot_requests(region)}
    assert requests["default"] == SlotRequest("default", 2, a + b)
    assert requests["default"].profile == ResourceProfile.of(cpu=3, heap_mib=150, managed_mib=400, gpu=1)
    assert requests["io"] == SlotRequest("io", 4, c)
    assert plan.slots(region) == 6
    assert requests["io"].expand() == (c, c, c, c)
    data = plan.to_dict()
    assert {r["slot_sharing_group"]: r["count"] for r in data["slot_requests"][0]} == {"default": 2, "io": 4}
    default = next(r for r in data["slot_requests"][0] if r["slot_sharing_group"] == "default")
    assert default["profile"] == {"cpu": 3, "heap_mib": 150, "off_heap_mib": 0, "managed_mib": 400, "gpu": 1}


def test_slot_request_profile_only_sums_vertices_in_the_region():
    a = ResourceProfile.of(cpu=1, heap_mib=100)
    b = ResourceProfile.of(cpu=2, heap_mib=200)
    c = ResourceProfile.of(cpu=4, heap_mib=400)
    plan = Plan(make_job({"A": (2, a, None), "B": (2, b, None), "C": (2, c, None)},
                         [("A", "B", "forward", "pipelined"), ("B", "C", "hash", "blocking")]))
    ab = region_with(plan, "A#1")
    assert plan.slot_requests(ab) == (SlotRequest("default", 1, a + b),)
    assert plan.slot_requests(region_with(plan, "C#0")) == (SlotRequest("default", 1, c),)


def test_mixing_specified_and_unknown_resources_raises():
    graph = make_job({"A": (1, ResourceProfile.of(cpu=1), None), "B": 1, "C": (1, ResourceProfile.of(cpu=2), None),
                      "D": 1}, [("A", "B", "hash"), ("B", "C", "hash"), ("C", "D", "hash")])
    with pytest.raises(ResourceError) as info:
        Plan(graph)
    assert isinstance(info.value, RegionflowError)
    message = str(info.value)
    for vertex in "ABCD":
        assert vertex in message


def test_all_specified_or_all_unknown_is_fine():
    Plan(make_job({"A": (1, ResourceProfile.of(cpu=1), None), "B": (1, ResourceProfile.of(), None)}))
    Plan(make_job({"A": 1, "B": 1}))


def test_managed_memory_fractions_specified():
    a = ResourceProfile.of(cpu=1, managed_mib=100)
    b = ResourceProfile.of(cpu=1, managed_mib=300)
    c = ResourceProfile.of(cpu=1, managed_mib=50)
    plan = Plan(make_job({"A": (2, a, None), "B": (2, b, None), "C": (2, c, "other")},
                         [("A", "B", "hash", "pipelined"), ("B", "C", "hash", "pipelined")]))
    (region,) = plan.regions
    assert plan.managed_memory_fractions(region) == pytest.approx({"A": 0.25, "B": 0.75, "C": 1.0})


def test_managed_memory_fractions_unknown_equal_share():
    plan = Plan(make_job({"A": 2, "B": 2, "C": 2, "D": (2, UNKNOWN, "g")},
                         [("A", "B", "hash", "pipelined"), ("B", "C", "hash", "pipelined"),
                          ("C", "D", "hash", "pipelined")]))
    (region,) = plan.regions
    assert plan.managed_memory_fractions(region) == pytest.approx({"A": 1 / 3, "B": 1 / 3, "C": 1 / 3, "D": 1.0})


def test_managed_memory_fractions_zero_total_equal_share():
    zero = ResourceProfile.of(cpu=1)
    plan = Plan(make_job({"A": (1, zero, None), "B": (1, zero, None)}, [("A", "B", "forward", "pipelined")]))
    assert plan.managed_memory_fractions(plan.regions[0]) == pytest.approx({"A": 0.5, "B": 0.5})


def test_managed_memory_fractions_only_region_vertices():
    a = ResourceProfile.of(managed_mib=100)
    b = ResourceProfile.of(managed_mib=300)
    plan = Plan(make_job({"A": (2, a, None), "B": (2, b, None)}, [("A", "B", "hash", "blocking")]))
    assert plan.managed_memory_fractions(region_with(plan, "A#0")) == {"A": 1.0}


def test_vertex_counts():
    plan = Plan(load_job(str(JOBS / "flip119.json")), "pointwise-pipelined-only")
    region = region_with(plan, "C#3")
    index = plan.topology.vertex_index
    assert plan.vertex_counts(region) == {index["A"]: 1, index["B"]: 1, index["C"]: 2}


# ---- reference, rendering ------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["all-blocking", "pointwise-pipelined-only", "all-pipelined"])
def test_reference_round_trip(mode):
    graph = make_job({"A": (2, ResourceProfile.of(cpu=1), "x"), "B": (3, ResourceProfile.of(heap_mib=5), None)},
                     [("A", "B", "rescale"), ("A", "B", "hash", "pipelined")], name="ref")
    plan = Plan(graph, mode)
    reference = json.loads(json.dumps(plan.reference))
    assert reference["mode"] == mode
    again = Plan.from_reference(reference)
    assert again.mode is plan.mode
    assert again.to_dict(inputs=True) == plan.to_dict(inputs=True)


def test_mode_aliases_reach_the_plan():
    graph = load_job(str(JOBS / "flip119.json"))
    assert Plan(graph, "batch").to_dict()["mode"] == "all-blocking"
    assert Plan(graph, "pipelined").to_dict()["region_count"] == 1


def test_to_text_region_table():
    plan = Plan(load_job(str(JOBS / "flip119.json")))
    text = plan.to_text()
    assert text.splitlines()[0] == (
        "job flip119: mode forward-pipelined-only, 12 subtasks, 10 regions, 2 blocking edges, min slots 1"
    )
    assert "A+B: 2 execution region(s)" in text
    assert "B -RESCALE-> C" in text and "C -HASH-> D" in text
    header = next(line for line in text.splitlines() if line.split() == ["#", "region", "slots", "subtasks"])
    rows = [line.split(None, 3) for line in text.splitlines()[text.splitlines().index(header) + 1:]]
    assert len(rows) == 10
    assert ["0", "A+B[0]", "1", "A#0, B#0"] in rows
    assert ["9", "D[3]", "1", "D#3"] in rows
    assert "inputs:" not in text
    with_inputs = plan.to_text(inputs=True)
    assert "  D#0 <- C->D: C#0, C#1, C#2, C#3" in with_inputs.splitlines()


def test_to_text_truncates_many_regions():
    plan = Plan(make_job({"A": 300}))
    text = plan.to_text(max_regions=5)
    assert "295 more regions" in text


def test_compact_subtasks():
    plan = Plan(make_job({"A": 3, "B": 5}, [("A", "B", "hash", "pipelined")]))
    topology = plan.topology
    assert compact_subtasks(topology, plan.regions[0].members) == "A#0..2, B#0..4"
    ids = [topology.subtask_id(n) for n in ("A#1", "B#1", "B#2", "B#3", "B#4")]
    assert compact_subtasks(topology, ids) == "A#1, B#1..4"
    ids = [topology.subtask_id(n) for n in ("A#0", "A#2", "B#0")]
    assert compact_subtasks(topology, ids) == "A#0, A#2, B#0"
    # the last subtask of A and the first of B are consecutive ids but different vertices
    ids = [topology.subtask_id(n) for n in ("A#2", "B#0")]
    assert compact_subtasks(topology, ids) == "A#2, B#0"


def test_plan_rejects_bad_mode():
    with pytest.raises(RegionflowError) as info:
        Plan(make_job({"A": 1}), "sometimes")
    assert "'sometimes'" in str(info.value)


def _chain(names):
    from regionflow.core.graph import JobGraph

    graph = JobGraph("chain")
    for name in names:
        graph.add_vertex(name, 1)
    for src, dst in zip(names, names[1:], strict=False):
        graph.connect(src, dst, "forward")
    return Plan(graph.validate(), "all-pipelined")


def test_a_region_task_id_is_its_vertices_joined_while_airflow_allows_it():
    assert _chain(["source", "count"]).region_task_id(0) == "source__count"
    long = _chain([f"step{i:02d}" for i in range(90)])  # 90 x 6 characters joined: more than Airflow's 250
    assert long.region_task_id(0) == "step00__88_more__step89"
    huge = [f"{'v' * 120}{i}" for i in range(3)]  # even first and last are too long together
    task_id = _chain(huge).region_task_id(0)
    assert len(task_id) <= 200 and task_id != _chain([*huge[:2], "other"]).region_task_id(0)
