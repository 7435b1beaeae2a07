"""The slot pool's metrics as a StatsD server receives them: Airflow's own `Stats`, configured with
``[metrics] statsd_on``, sends UDP packets to a socket this test listens on."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap

EMIT = textwrap.dedent("""
    from regionflow.executors.metrics import PoolMetrics
    from regionflow.scheduling.hosts import Cluster
    from regionflow.scheduling.pool import SlotPool

    pool = SlotPool(Cluster.parse("a:slots=2;b:slots=1"), blocklist_expiry_s=60)
    pool.block("job/1", "b")
    metrics = PoolMetrics()
    metrics.gauges(pool)
    metrics.granted(2.5)
    metrics.rejected()
""")


def test_gauges_counters_and_the_queue_wait_timer_reach_statsd(tmp_path):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as server:
        server.bind(("127.0.0.1", 0))
        server.settimeout(20)
        env = {**os.environ, "AIRFLOW_HOME": str(tmp_path), "AIRFLOW__METRICS__STATSD_ON": "True",
               "AIRFLOW__METRICS__STATSD_HOST": "127.0.0.1",
               "AIRFLOW__METRICS__STATSD_PORT": str(server.getsockname()[1]),
               "AIRFLOW__METRICS__STATSD_PREFIX": "airflow"}
        subprocess.run([sys.executable, "-c", EMIT], env=env, check=True, timeout=120)
        packets: set[str] = set()
        while not EXPECTED <= packets:  # a missing packet ends in socket.timeout after 20 s
            packets.update(line for line in server.recv(4096).decode().split("\n") if line)
    assert EXPECTED <= packets


EXPECTED = {"airflow.regionflow.pool.slots_free:3|g", "airflow.regionflow.pool.slots_used:0|g",
            "airflow.regionflow.pool.queue_length:0|g", "airflow.regionflow.pool.blocklisted_hosts:1|g",
            "airflow.regionflow.pool.grants:1|c", "airflow.regionflow.pool.queue_wait_seconds:2500.000000|ms",
            "airflow.regionflow.pool.rejections:1|c"}
