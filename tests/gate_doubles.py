"""Doubles for driving `regionflow.executors.admission.AdmissionGate` without Airflow: a recording
double of the executor's worker operations (like Flink's TestingSchedulerOperations), counters, and
try builders. Shared by the gate's tests and the two-scheduler tests."""
from regionflow.contract import RegionSlots
from regionflow.core.resources import UNKNOWN
from regionflow.executors.admission import Try


class RecordingWorkers:
    """Records, in order, what the gate asks of its executor."""

    def __init__(self):
        self.calls = []

    def hand_over(self, workload):
        self.calls.append(("hand_over", workload))

    def fail(self, workload, message):
        self.calls.append(("fail", workload, message))

    def note(self, workload, message):
        self.calls.append(("note", workload, message))

    def handed(self):
        return [call[1] for call in self.calls if call[0] == "hand_over"]


class Counts:
    def __init__(self):
        self.grants, self.rejections = 0, 0

    def granted(self, waited_s):
        self.grants += 1

    def rejected(self):
        self.rejections += 1


class NoCopies:
    waiting: dict = {}

    def owns(self, bulk_id):
        return False

    def launch(self, grant):
        raise AssertionError("no copies here")


class NoRecovery:
    def __init__(self):
        self.adopted = {}


def a_try(name, slots=None, try_number=1, contract=None):
    if contract is None and slots:
        contract = RegionSlots(((UNKNOWN,) * slots,), (name,))
    return Try(key=(name, try_number), ti_id=f"ti-{name}", try_number=try_number, dag_id="d", run_id="r",
               task_id=name, map_index=-1, contract=contract)


def admit(gate, name, **kwargs):
    attempt = a_try(name, **kwargs)
    gate.admit(f"workload:{name}", attempt)
    return attempt


def end(gate, attempt, state="success"):
    assert gate.end_of_run(attempt.key, state)
    gate.after_end(attempt.key, state)
