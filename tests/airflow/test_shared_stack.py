"""tests/airflow/shared_stack.py with a recording double of the stack: the scheduler is restarted only when a
module needs another environment than the one it runs with, or when a module restarted it itself; the stack
stops once the last module this session runs has ended."""
import os

import pytest
from shared_stack import ModuleStack, SharedStack
from suite_order import SHARED_STACK_MODULES


class RecordingStack:
    def __init__(self, home):
        self.dags_folder = os.path.join(home, "dags")
        os.makedirs(self.dags_folder)
        self.scheduler_pid = 100
        self.calls = []

    def start(self):
        self.calls.append(("start",))

    def pids_of(self, component):
        assert component == "scheduler"
        return [self.scheduler_pid]

    def restart(self, component, env):
        self.calls.append(("restart", component, env))
        self.scheduler_pid += 1

    def stop(self):
        self.calls.append(("stop",))
        self.session_servers = StoppedServers()


class StoppedServers:
    def status(self):
        return [type("Status", (), {"state": "down"})()]


@pytest.fixture
def shared(tmp_path):
    dag = tmp_path / "source.py"
    dag.write_text("# a DAG file\n")
    return SharedStack(str(tmp_path), SHARED_STACK_MODULES, make_stack=RecordingStack), str(dag)


def test_the_scheduler_restarts_only_for_another_environment_and_the_stack_stops_after_the_last_module(shared):
    shared, dag = shared
    first, second, third = SHARED_STACK_MODULES
    with shared.module(first, ModuleStack({"a.py": dag})):
        stack = shared.stack
        assert stack.calls == [("start",)]  # no restart: the environment it started with
        assert os.path.exists(os.path.join(stack.dags_folder, "a.py"))
    with shared.module(second, ModuleStack({"b.py": dag}, {"AIRFLOW__CORE__PARALLELISM": "8"})):
        assert stack.calls[1:] == [("restart", "scheduler", {"AIRFLOW__CORE__PARALLELISM": "8"})]
        stack.scheduler_pid += 1  # the module restarts the scheduler itself
    with shared.module(third, ModuleStack({"c.py": dag}, {"AIRFLOW__CORE__PARALLELISM": "8"})):
        assert stack.calls[2:] == [("restart", "scheduler", {"AIRFLOW__CORE__PARALLELISM": "8"})]
    assert stack.calls[-1] == ("stop",) and shared.stack is None


def test_a_module_not_listed_for_the_shared_worker_is_refused_with_the_fix(shared):
    shared, dag = shared
    with pytest.raises(AssertionError, match="add it to suite_order.SHARED_STACK_MODULES"):
        with shared.module("tests/airflow/test_other.py", ModuleStack({"a.py": dag})):
            pass
