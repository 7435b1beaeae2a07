"""Two attempts on one host's Spark Connect server: do they get their grants, and how fast does a
cancelled attempt give its cores back?

Starts a 2-core server (``local[2]``, one host of two slots, each attempt granted one) twice in the
same invocation: as regionflow starts it (FAIR scheduling inside Spark's default pool, from the
allocation file regionflow writes; a 0.1 s Python task kill timeout) and with Spark's defaults (FIFO,
2 s) as the baseline. On each it runs, per
repeat (see `rfbench.core_sharing`):

- attempt a fills both cores with 8 one-second tasks; attempt b (4 tasks) comes 0.5 s later. Printed:
  b's wait for its first core and the most tasks each attempt ran at once while both had work (its
  grant is 1);
- an attempt holding both cores with long tasks (sleeping in Python, or spinning in the JVM) is
  interrupted by its tag; printed: seconds until a new job had both of its tasks running.

Usage: .venv/bin/python benchmarks/session_sharing.py [--repeats 3]
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import tempfile
import time

from regionflow.scheduling.hosts import Host
from regionflow.spark.servers.client_env import CONNECT_CLIENT_VARIABLES
from regionflow.spark.servers.connect import ConnectServer
from rfbench.core_sharing import free_cores_after_cancel, share_cores

SPARK_DEFAULTS = {"spark.scheduler.mode": "FIFO", "spark.python.task.killTimeout": "2s"}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def measure(conf: dict[str, str], repeats: int) -> dict:
    server = ConnectServer(Host.of("h", 2, master="local[2]"), free_port(), tempfile.mkdtemp(prefix="rf-share-"),
                           conf)
    began = time.monotonic()
    server.start()
    figures: dict = {"server_start_s": round(time.monotonic() - began, 1)}
    try:
        runs = [share_cores(server.url, token=server.token) for _ in range(repeats)]
        cancels = [free_cores_after_cancel(server.url, token=server.token) for _ in range(repeats)]
        jvm_cancels = [free_cores_after_cancel(server.url, python=False, token=server.token) for _ in range(repeats)]
    finally:
        server.stop()
    figures.update({
        "b_wait_for_first_core_s": [round(r.b_wait_s, 2) for r in runs],
        "b_wait_median_s": round(statistics.median(r.b_wait_s for r in runs), 2),
        "a_most_tasks_at_once_while_b_runs": [r.a_most_at_once for r in runs],
        "b_most_tasks_at_once": [r.b_most_at_once for r in runs],
        "cores_free_after_cancel_s": [round(c, 2) for c in cancels],
        "cores_free_after_cancel_median_s": round(statistics.median(cancels), 2),
        "jvm_tasks_cores_free_after_cancel_s": [round(c, 2) for c in jvm_cancels],
    })
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    result = {"regionflow_fair_default_pool": measure({}, args.repeats)}
    print(json.dumps(result), flush=True)
    result["spark_default_fifo"] = measure(SPARK_DEFAULTS, args.repeats)
    print(json.dumps({"spark_default_fifo": result["spark_default_fifo"]}), flush=True)
    for variable in CONNECT_CLIENT_VARIABLES:
        os.environ.pop(variable, None)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
