"""tests/suite_order.py: the heavy modules' queue, longest first, and the controller's per-worker record."""
import json
from types import SimpleNamespace

import suite_order


def items(*nodeids):
    return [SimpleNamespace(nodeid=nodeid) for nodeid in nodeids]


def test_modules_go_longest_first_keeping_their_tests_order_and_unknown_ones_count_a_default():
    queue = items("tests/a.py::t1", "tests/a.py::t2", "tests/b.py::t1", "tests/c.py::t1", "tests/d.py::t1",
                  "tests/b.py::t2")
    table = {"tests/a.py": 10, "tests/b.py": 450, "tests/d.py": suite_order.UNKNOWN_S + 1}
    suite_order.longest_first(queue, table)
    assert [item.nodeid for item in queue] == ["tests/b.py::t1", "tests/b.py::t2", "tests/d.py::t1",
                                               "tests/c.py::t1", "tests/a.py::t1", "tests/a.py::t2"]


def test_the_timeline_sums_each_workers_modules_and_says_who_idled_at_the_end():
    timeline = suite_order.WorkerTimeline()
    for worker, nodeid, duration, now in [("gw0", "tests/x/m.py::a", 100.0, 100.0), ("gw1", "tests/n.py::a", 5.0, 5.0),
                                          ("gw0", "tests/x/m.py::a", 0.5, 100.5), ("gw1", "tests/o.py::a", 20.0, 30.0),
                                          ("gw0", "tests/p.py::a", 9.5, 110.0)]:
        timeline.report(worker, nodeid, duration, now=now)
    assert timeline.measured() == {"tests/x/m.py": 100.5, "tests/n.py": 5.0, "tests/o.py": 20.0, "tests/p.py": 9.5}
    assert timeline.lines()[1:] == ["  gw0: 110 s busy, idle 0 s at the end: x/m.py 100, p.py 10",
                                    "  gw1: 25 s busy, idle 80 s at the end: n.py 5, o.py 20"]


def test_an_update_writes_the_measured_seconds_over_the_tables(tmp_path):
    table = tmp_path / "seconds.json"
    table.write_text(json.dumps({"tests/a.py": 10, "tests/b.py": 20}))
    suite_order.update_table({"tests/b.py": 31.6, "tests/c.py": 4.2}, table)
    assert json.loads(table.read_text()) == {"tests/a.py": 10, "tests/b.py": 32, "tests/c.py": 4}
    assert suite_order.read_table(tmp_path / "missing.json") == {}


def test_the_committed_table_names_only_modules_that_exist():
    root = suite_order.TABLE.parent.parent
    assert [module for module in suite_order.read_table() if not (root / module).is_file()] == []


def test_the_modules_sharing_a_stack_queue_as_one_unit_by_their_sum():
    first, second = suite_order.SHARED_STACK_MODULES[:2]
    queue = items("tests/a.py::t1", f"{first}::t1", "tests/b.py::t1", f"{second}::t1", f"{first}::t2")
    suite_order.longest_first(queue, {"tests/a.py": 10, first: 100, "tests/b.py": 150, second: 60})
    assert [item.nodeid for item in queue] == [f"{first}::t1", f"{second}::t1", f"{first}::t2", "tests/b.py::t1",
                                               "tests/a.py::t1"]  # 160 s together, more than b's 150


def test_xdists_loadfile_scheduler_gives_the_shared_stack_modules_one_unit_and_every_other_module_its_own():
    scheduler = object.__new__(suite_order.GroupedLoadFileScheduling)  # _split_scope reads none of its state
    units = {scheduler._split_scope(f"{module}::test_x[1]") for module in suite_order.SHARED_STACK_MODULES}
    assert units == {suite_order.SHARED_STACK_UNIT}
    assert scheduler._split_scope("tests/airflow/test_ui_plugin.py::test_y") == "tests/airflow/test_ui_plugin.py"


def test_the_modules_that_use_the_shared_stack_are_the_ones_listed():
    root = suite_order.TABLE.parent.parent
    users = sorted(str(path.relative_to(root)) for path in (root / "tests").rglob("test_*.py")
                   if path.name != "test_suite_order.py" and "shared_stack.module(" in path.read_text(encoding="utf-8"))
    assert users == sorted(suite_order.SHARED_STACK_MODULES)
