"""A scheduler process for the shared-pool stress test: an `AdmissionGate` with its own in-memory pool on
a shared store, admitting random region tries and ending each some time after its grant, as an Airflow
scheduler's executor would. Run with multiprocessing's spawn context (`scheduler_process`)."""
from __future__ import annotations

import random
import time

CLUSTER = "a:slots=2;b:slots=2"


def scheduler_process(store_url: str, name: str, tries: int, seed: int) -> None:
    """Admit `tries` tries of 1-4 slots, each held 10-60 ms once granted; return when all have ended."""
    from gate_doubles import Counts, NoCopies, NoRecovery, RecordingWorkers, a_try

    from regionflow.executors.admission import AdmissionGate
    from regionflow.scheduling.hosts import Cluster
    from regionflow.scheduling.pool import SlotPool
    from regionflow.store import RegionflowStore

    rng = random.Random(seed)
    gate = AdmissionGate(SlotPool(Cluster.parse(CLUSTER)), RegionflowStore(store_url), RecordingWorkers(),
                         copies=NoCopies(), recovery=NoRecovery(), metrics=Counts(), owner=name)
    attempts = {}
    ends: dict[str, float] = {}  # workload -> when its run ends
    admitted = ended = 0
    deadline = time.monotonic() + 120
    while ended < tries:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{name}: {ended}/{tries} tries ended in 120 s; waiting: {list(gate.held)}")
        if admitted < tries and rng.random() < 0.5:
            attempt = a_try(f"{name}-{admitted}", slots=rng.randint(1, 4))
            attempts[f"workload:{attempt.task_id}"] = attempt
            gate.admit(f"workload:{attempt.task_id}", attempt)
            admitted += 1
        gate.refresh()
        now = time.monotonic()
        for workload in gate.operations.handed():
            ends.setdefault(workload, now + rng.uniform(0.01, 0.06))
        for workload, at in list(ends.items()):
            if at <= now and at > 0:
                attempt = attempts[workload]
                assert gate.end_of_run(attempt.key, "success")
                gate.after_end(attempt.key, "success")
                ends[workload] = -1.0
                ended += 1
        time.sleep(0.002)
