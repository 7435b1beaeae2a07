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
    from regionflow.core.resources import UNKNOWN
    from regionflow.scheduling.pool import Bulk, SlotPool

    pool = SlotPool(Cluster.parse("a:slots=2;b:slots=1"), blocklist_expiry_s=60)
    pool.block("job/1", "b")
    pool.submit(Bulk("job/1:x", "job/1", "x", (UNKNOWN,)))
    metrics = PoolMetrics()
    metrics.gauges(pool)
    metrics.granted(2.5)
    metrics.rejected()
    metrics.starving(runs=2, told=1)
""")


def test_gauges_counters_and_the_queue_wait_timer_reach_statsd(tmp_path):
    assert EXPECTED <= _packets(tmp_path, EXPECTED)


def test_per_host_gauges_carry_the_host_as_a_tag_where_statsd_takes_tags(tmp_path):
    """With ``[metrics] statsd_influxdb_enabled`` Airflow writes tags into the name (``,host=a``)."""
    assert TAGGED <= _packets(tmp_path, TAGGED, {"AIRFLOW__METRICS__STATSD_INFLUXDB_ENABLED": "True"})


def _packets(tmp_path, expected: set[str], extra_env: dict[str, str] | None = None) -> set[str]:
    """What a StatsD socket receives from `EMIT` run with Airflow's `Stats` (until `expected` came)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as server:
        server.bind(("127.0.0.1", 0))
        server.settimeout(20)
        env = {**os.environ, "AIRFLOW_HOME": str(tmp_path), "AIRFLOW__METRICS__STATSD_ON": "True",
               "AIRFLOW__METRICS__STATSD_HOST": "127.0.0.1",
               "AIRFLOW__METRICS__STATSD_PORT": str(server.getsockname()[1]),
               "AIRFLOW__METRICS__STATSD_PREFIX": "airflow", **(extra_env or {})}
        subprocess.run([sys.executable, "-c", EMIT], env=env, check=True, timeout=120)
        packets: set[str] = set()
        while not expected <= packets:  # a missing packet ends in socket.timeout after 20 s
            packets.update(line for line in server.recv(4096).decode().split("\n") if line)
    return packets


EXPECTED = {"airflow.regionflow.pool.slots_free:2|g", "airflow.regionflow.pool.slots_used:1|g",
            "airflow.regionflow.pool.host_slots_free.a:1|g", "airflow.regionflow.pool.host_slots_used.a:1|g",
            "airflow.regionflow.pool.host_slots_free.b:1|g", "airflow.regionflow.pool.host_slots_used.b:0|g",
            "airflow.regionflow.pool.queue_length:0|g", "airflow.regionflow.pool.blocklisted_hosts:1|g",
            "airflow.regionflow.pool.grants:1|c", "airflow.regionflow.pool.queue_wait:2500.000000|ms",
            "airflow.regionflow.pool.rejections:1|c", "airflow.regionflow.pool.starving_runs:2|g",
            "airflow.regionflow.pool.resource_notices:1|c"}
TAGGED = {"airflow.regionflow.pool.host_slots_free,host=a:1|g", "airflow.regionflow.pool.host_slots_used,host=a:1|g",
          "airflow.regionflow.pool.host_slots_free,host=b:1|g", "airflow.regionflow.pool.host_slots_used,host=b:0|g"}
