"""How fast a region can start: a new Spark Connect client session's first job on a warm server,
against the previous backend (a spark-submit per attempt) in the same invocation.

Printed: cold start (server process to a served session) per repeat, the warm new-session-plus-first-job
latency (median of --sessions), and a tiny spark-submit application's wall time (median of --repeats),
with the ratio. This measures the session backend's building block (regionflow.spark.servers.connect); the
RegionOperator does not use it yet.

Usage: .venv/bin/python benchmarks/session_start.py [--repeats 3] [--sessions 10] [--slots 2]
"""
from __future__ import annotations

import argparse
import socket
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

from regionflow.scheduling.hosts import Host
from regionflow.spark.launch.submit import spark_submit_binary
from regionflow.spark.servers.client_env import classic_spark_env
from regionflow.spark.servers.connect import ConnectServer

TINY = textwrap.dedent("""
    from pyspark.sql import SparkSession
    spark = SparkSession.builder.getOrCreate()
    assert spark.range(1000).count() == 1000
    spark.stop()
""")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def warm_session(server: ConnectServer) -> float:
    from regionflow.spark.servers.auth import remote_session

    began = time.monotonic()
    spark = remote_session(server.url, server.token)
    spark.addTag("bench")
    assert spark.range(1000).count() == 1000
    took = time.monotonic() - began
    spark.stop()
    return took


def spark_submit_once(folder: str, slots: int) -> float:
    app = f"{folder}/tiny.py"
    with open(app, "w", encoding="utf-8") as handle:
        handle.write(TINY)
    began = time.monotonic()
    subprocess.run([spark_submit_binary(), "--master", f"local[{slots}]", "--conf", "spark.ui.enabled=false", app],
                   check=True, capture_output=True, env=classic_spark_env())
    return time.monotonic() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sessions", type=int, default=10)
    parser.add_argument("--slots", type=int, default=2)
    args = parser.parse_args()
    cold, warm, submit = [], [], []
    with tempfile.TemporaryDirectory(prefix="rf-session-") as folder:
        for repeat in range(args.repeats):
            server = ConnectServer(Host.of("bench", args.slots, master=f"local[{args.slots}]"), free_port(), folder)
            began = time.monotonic()
            server.start()
            cold.append(time.monotonic() - began)
            try:
                warm.extend(warm_session(server) for _ in range(args.sessions))
            finally:
                server.stop()
            submit.append(spark_submit_once(folder, args.slots))
            print(f"repeat {repeat + 1}: cold start {cold[-1]:.1f} s, warm session+job median "
                  f"{statistics.median(warm[-args.sessions:]):.2f} s, spark-submit {submit[-1]:.1f} s", flush=True)
    warm_median, submit_median = statistics.median(warm), statistics.median(submit)
    print(f"\ncold start (server to a served session): median {statistics.median(cold):.1f} s")
    print(f"warm: new session + first job: median {warm_median:.2f} s, p90 "
          f"{sorted(warm)[int(0.9 * (len(warm) - 1))]:.2f} s over {len(warm)} sessions (target <= 1 s)")
    print(f"spark-submit of the same job (previous backend): median {submit_median:.1f} s")
    print(f"ratio warm session / spark-submit: {warm_median / submit_median:.3f}")


if __name__ == "__main__":
    sys.exit(main())
