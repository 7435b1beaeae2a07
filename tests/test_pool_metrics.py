"""The slot pool's metrics through a recording stand-in for Airflow's Stats (what StatsD would get)."""
from __future__ import annotations

from datetime import timedelta

from regionflow.executors.metrics import PoolMetrics
from regionflow.scheduling.hosts import Cluster
from regionflow.scheduling.pool import SlotPool


class RecordingStats:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, object]] = []

    def gauge(self, name, value):
        self.calls.append(("gauge", name, value))

    def incr(self, name, count=1):
        self.calls.append(("incr", name, count))

    def timing(self, name, value):
        self.calls.append(("timing", name, value))


def test_gauges_counters_and_the_queue_wait_timer():
    pool = SlotPool(Cluster.parse("a:slots=2;b:slots=1"), blocklist_expiry_s=60)
    pool.block("job/1", "b")
    stats = RecordingStats()
    metrics = PoolMetrics(stats)
    metrics.gauges(pool)
    metrics.granted(2.5)
    metrics.rejected()
    assert stats.calls == [
        ("gauge", "regionflow.pool.slots_free", 3), ("gauge", "regionflow.pool.slots_used", 0),
        ("gauge", "regionflow.pool.queue_length", 0), ("gauge", "regionflow.pool.blocklisted_hosts", 1),
        ("incr", "regionflow.pool.grants", 1), ("timing", "regionflow.pool.queue_wait_seconds", timedelta(seconds=2.5)),
        ("incr", "regionflow.pool.rejections", 1)]


def test_the_default_is_airflows_stats():
    from airflow.stats import Stats

    assert PoolMetrics().stats is Stats
