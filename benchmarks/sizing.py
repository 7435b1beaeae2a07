"""Fine-grained resources on a mixed cluster: what a declared request buys over "every slot is the host's".

Six runs of a job whose vertices ask different sizes share a mixed cluster: two standard hosts (4 slots
of 1 core / 2 GiB), one high-memory host (2 slots of 8 GiB) and one GPU host (2 slots of 4 GiB and a
GPU). The real strategy and slot pool run against simulated time (`regionflow simulate`'s engine), in
two worlds:

- declared: every vertex declares its resources; the pool grants only slots that fit, and each Spark
  application is sized to its request (`regionflow.spark.launch.sizing`);
- host profile: no vertex declares anything (as before FLIP-53/56); a region takes any slot, and its
  application is sized to that slot's profile.

Figures per world: makespan, Spark memory reserved (GiB x s, what the applications' executors hold),
memory utilisation (requested / reserved), and misplaced regions: a region on a slot with less memory
than it needs (it spills or dies of OOM) or GPU work on a host without a GPU (it fails). The simulated
durations are the same in both worlds, which flatters the host-profile world: its misplaced regions
would really run slower or fail.

    python benchmarks/sizing.py [--runs 6]
"""
from __future__ import annotations

import argparse
import json

from regionflow.core.graph import JobGraph
from regionflow.core.plan import Plan
from regionflow.core.resources import UNKNOWN, ResourceProfile
from regionflow.scheduling.hosts import Cluster
from regionflow.scheduling.simulate import simulate
from regionflow.spark.launch.sizing import slot_size

CLUSTER = "std1:4,mem=8g;std2:4,mem=8g;himem:2,mem=16g;gpu:2,gpu=2,mem=8g"
VERTICES = {  # name: (parallelism, request per subtask, simulated seconds)
    "ingest": (4, ResourceProfile.of(cpu=1, heap_mib=512), 2.0),
    "join": (2, ResourceProfile.of(cpu=1, heap_mib=6144), 4.0),
    "train": (1, ResourceProfile.of(cpu=1, heap_mib=2048, gpu=1), 3.0),
    "report": (2, ResourceProfile.of(cpu=1, heap_mib=1024), 1.0),
}
DURATIONS = {name: seconds for name, (_, _, seconds) in VERTICES.items()}


def job(index: int, declared: bool) -> JobGraph:
    graph = JobGraph(f"run{index}")
    for name, (parallelism, request, _) in VERTICES.items():
        graph.add_vertex(name, parallelism, request if declared else UNKNOWN, fn="m:f")
    graph.connect("ingest", "join", "hash", keys=["k"])
    graph.connect("join", "train", "rebalance")
    graph.connect("train", "report", "rebalance")
    return graph.validate()


def world(runs: int, declared: bool) -> dict[str, float]:
    cluster = Cluster.parse(CLUSTER)
    plans = [Plan(job(i, declared), "all-blocking") for i in range(runs)]
    result = simulate(plans, cluster, DURATIONS)
    assert result.completed, result.reason
    need = {name: request for name, (_, request, _) in VERTICES.items()}
    reserved = requested = 0.0
    misplaced = 0
    for run in result.runs:
        (host_name,) = run.hosts  # every region here is one subtask: one slot on one host
        host = cluster.host(host_name)
        vertex = run.region.split("#")[0].split("[")[0]
        wanted = need[vertex]
        size = slot_size([wanted] if declared else [UNKNOWN], host.slot_profile)
        seconds = (run.end or 0.0) - (run.start or 0.0)
        reserved += run.slots * size.heap_mib / 1024 * seconds
        requested += run.slots * wanted.heap_mib / 1024 * seconds
        misplaced += int(not wanted.fits_in(host.slot_profile))
    return {"makespan_s": result.makespan, "reserved_gib_s": round(reserved, 1),
            "requested_gib_s": round(requested, 1), "memory_utilisation": round(requested / reserved, 3),
            "misplaced_regions": misplaced, "regions": len(result.runs)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=6)
    args = parser.parse_args()
    declared, host_profile = world(args.runs, True), world(args.runs, False)
    print(json.dumps({"cluster": CLUSTER, "runs": args.runs, "declared": declared, "host_profile": host_profile,
                      "reserved_ratio_host_profile_over_declared":
                          round(host_profile["reserved_gib_s"] / declared["reserved_gib_s"], 2)}, indent=2))


if __name__ == "__main__":
    main()
