"""What a Spark run cost, counted from what it leaves behind: jobs from a server's event log (the
listener bus written as JSON lines, ``spark.eventLog.compress=false``) and data files per blocking
edge in a run's committed units. Shared by `benchmarks/scale.py` and the vertex-level tests."""
from __future__ import annotations

import glob
import os

# Spark conf for a server whose event log `jobs_started` can read.
EVENT_LOG_CONF = {"spark.eventLog.enabled": "true", "spark.eventLog.compress": "false"}


def event_log_conf(events_dir: str) -> dict[str, str]:
    """Server conf writing an uncompressed event log into `events_dir`."""
    return {**EVENT_LOG_CONF, "spark.eventLog.dir": f"file://{os.path.abspath(events_dir)}"}


def jobs_started(events_dir: str) -> int:
    """Spark jobs started so far by every application logging into `events_dir`."""
    total = 0
    for path in glob.glob(os.path.join(events_dir, "**", "*"), recursive=True):
        if os.path.isdir(path):
            continue
        with open(path, encoding="utf-8", errors="replace") as handle:
            total += sum(1 for line in handle if '"Event":"SparkListenerJobStart"' in line)
    return total


def blocking_files(units_dir: str, plan) -> dict[int, int]:
    """Data files per blocking edge (edge index -> count) over the committed units in `units_dir`."""
    return {edge.index: len(glob.glob(os.path.join(units_dir, "*", f"e{edge.index}", "**", "part-*"), recursive=True))
            for edge in plan.topology.edges if edge.blocking}
