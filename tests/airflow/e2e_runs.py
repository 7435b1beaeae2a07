"""What the end-to-end tests on a real Airflow stack share (test_e2e.py, test_e2e_session.py,
test_e2e_session_faults.py): the DAGs and modes, triggering a run, its task instances' times and a try's
log file."""
import os
from datetime import datetime

DAGS = os.path.join(os.path.dirname(__file__), "dags_e2e")
MODES = ("all-blocking", "forward-pipelined-only", "pointwise-pipelined-only", "all-pipelined")


def run(stack, dag_id, timeout=900):
    stack.wait_for_dag(dag_id)
    stack.unpause(dag_id)
    return stack.trigger(dag_id)


def times(stack, dag_id, run_id):
    return {(ti["task_id"], ti["map_index"]): (_at(ti["start_date"]), _at(ti["end_date"]), ti["state"])
            for ti in stack.task_instances(dag_id, run_id)}


def _at(value):
    return datetime.fromisoformat(value.replace("Z", "+00:00")) if value else None


def task_log_file(stack, dag_id, run_id, task_id, try_number, map_index=-1):
    """The try's log file as written (the exception's text is in its structured error detail)."""
    path = os.path.join(stack.logs_dir, f"dag_id={dag_id}", f"run_id={run_id}", f"task_id={task_id}",
                        *([f"map_index={map_index}"] if map_index >= 0 else []), f"attempt={try_number}.log")
    with open(path, encoding="utf-8") as handle:
        return handle.read()
