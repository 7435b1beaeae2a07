"""Store-backed grants: what the shared pool (the store as the truth) costs next to the in-memory pool.

One workload of tries (1-4 slots each, on 4 hosts x 4 slots) goes through the RegionExecutor's real
`AdmissionGate`: each try is admitted, granted when its bulk fits (FIFO), and ended once 12 tries run,
oldest first. Every admission, grant and release is a store write, as under Airflow. Figures, median of
`--repeats` runs each:

- in memory: the same admit/end sequence on a bare `SlotPool` (no store): decisions per second;
- 1 scheduler: grants per second through the gate on SQLite and on PostgreSQL (the cache stays exact:
  no rebuild);
- 2 schedulers: two processes, each its own gate and pool on one store, each with the whole workload;
  grants per second of both together, and how many times their pools were rebuilt.

PostgreSQL is a throwaway server started here (Debian's postgresql, as in the tests). The
in-memory pool's own benchmark at scale is ``python benchmarks/micro.py pool``.

    python benchmarks/shared_pool.py [--tries 1000] [--repeats 3]
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))

CLUSTER = "a:slots=4;b:slots=4;c:slots=4;d:slots=4"
RUNNING = 12  # tries that run at once before the oldest ends


def sizes(tries: int, seed: int) -> list[int]:
    import random

    rng = random.Random(seed)
    return [rng.randint(1, 4) for _ in range(tries)]


def in_memory(tries: int, seed: int) -> float:
    """Decisions per second of the bare pool on the same admit/end sequence."""
    from regionflow.core.resources import UNKNOWN
    from regionflow.scheduling.hosts import Cluster
    from regionflow.scheduling.pool import Bulk, SlotPool

    pool = SlotPool(Cluster.parse(CLUSTER))
    running: list[str] = []
    decisions = 0
    start = time.perf_counter()
    for index, size in enumerate(sizes(tries, seed)):
        running.extend(g.bulk_id for g in pool.submit(Bulk(f"b{index}", "job", f"t{index}", (UNKNOWN,) * size)))
        decisions += 1
        while len(running) >= RUNNING or (index == tries - 1 and running):
            running.extend(g.bulk_id for g in pool.release(running.pop(0)))
            decisions += 1
    return decisions / (time.perf_counter() - start)


def through_gate(store_url: str, tries: int, seed: int, name: str = "s1") -> tuple[int, float, int]:
    """(grants, seconds, rebuilds) of one scheduler's gate on the store at `store_url`."""
    from gate_doubles import Counts, NoCopies, NoRecovery, RecordingWorkers, a_try, end

    from regionflow.executors.admission import AdmissionGate
    from regionflow.scheduling.hosts import Cluster
    from regionflow.scheduling.pool import SlotPool
    from regionflow.store import RegionflowStore

    gate = AdmissionGate(SlotPool(Cluster.parse(CLUSTER)), RegionflowStore(store_url), RecordingWorkers(),
                         copies=NoCopies(), recovery=NoRecovery(), metrics=Counts(), owner=name)
    attempts = {}
    start = time.perf_counter()
    for index, size in enumerate(sizes(tries, seed)):
        attempt = a_try(f"{name}-{index}", slots=size)
        attempts[f"workload:{attempt.task_id}"] = attempt
        gate.admit(f"workload:{attempt.task_id}", attempt)
        gate.refresh()
        while len(gate.granted) >= RUNNING or (index == tries - 1 and (gate.granted or gate.held)):
            if not gate.granted:
                time.sleep(0.001)
                gate.refresh()
                continue
            oldest = next(a for a in attempts.values() if a.key in gate.granted)
            end(gate, oldest)
            gate.refresh()
    seconds = time.perf_counter() - start
    return gate.metrics.grants, seconds, gate.shared.rebuilds


def _child(store_url: str, tries: int, seed: int, name: str, out: multiprocessing.Queue) -> None:
    out.put(through_gate(store_url, tries, seed, name))


def two_schedulers(store_url: str, tries: int, seed: int) -> tuple[float, int]:
    """Grants per second of two scheduler processes on one store, and their rebuilds."""
    context = multiprocessing.get_context("spawn")
    results: multiprocessing.Queue = context.Queue()
    processes = [context.Process(target=_child, args=(store_url, tries, seed + i, f"s{i}", results)) for i in (1, 2)]
    start = time.perf_counter()
    for process in processes:
        process.start()
    figures = [results.get(timeout=600) for _ in processes]
    seconds = time.perf_counter() - start
    for process in processes:
        process.join()
    return sum(g for g, _, _ in figures) / seconds, sum(r for _, _, r in figures)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tries", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    from postgres import PostgresServer

    directory = tempfile.mkdtemp(prefix="regionflow-bench-pg-")
    server = PostgresServer(directory)
    figures: dict[str, object] = {"tries": args.tries, "repeats": args.repeats, "cluster": CLUSTER}
    try:
        memory = [in_memory(args.tries, seed) for seed in range(args.repeats)]
        figures["in_memory_decisions_per_s"] = round(statistics.median(memory))
        for backend in ("sqlite", "postgresql"):
            one, two, rebuilds = [], [], []
            for seed in range(args.repeats):
                url = (f"sqlite:///{directory}/bench-{backend}-{seed}-{time.time_ns()}.db" if backend == "sqlite"
                       else server.new_database("bench"))
                grants, seconds, _ = through_gate(url, args.tries, seed)
                one.append(grants / seconds)
                url = (f"sqlite:///{directory}/bench2-{seed}-{time.time_ns()}.db" if backend == "sqlite"
                       else server.new_database("bench2"))
                rate, rebuilt = two_schedulers(url, args.tries, seed)
                two.append(rate)
                rebuilds.append(rebuilt)
            figures[f"{backend}_1_scheduler_grants_per_s"] = round(statistics.median(one))
            figures[f"{backend}_2_schedulers_grants_per_s"] = round(statistics.median(two))
            figures[f"{backend}_2_schedulers_rebuilds"] = int(statistics.median(rebuilds))
            figures[f"{backend}_1_scheduler_vs_in_memory"] = round(statistics.median(one) /
                                                                  figures["in_memory_decisions_per_s"], 4)
    finally:
        server.stop()
        shutil.rmtree(directory, ignore_errors=True)
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
