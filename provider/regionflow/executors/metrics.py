"""The slot pool's metrics through Airflow's `Stats` (so StatsD and OpenTelemetry users get them):

- gauges, every executor sync: ``regionflow.pool.slots_free``, ``.slots_used``, ``.queue_length``,
  ``.blocklisted_hosts`` (distinct hosts with a live entry);
- per host, as Airflow does for its pools: ``regionflow.pool.host_slots_free`` and
  ``.host_slots_used`` tagged ``host=<name>`` (a backend with tags: ``[metrics]
  statsd_influxdb_enabled``, Datadog, OpenTelemetry), and the same with the host in the name,
  ``regionflow.pool.host_slots_free.<name>``, for plain StatsD, which drops tags;
- counters: ``regionflow.pool.grants``, ``.rejections``, ``.resource_notices`` (FLIP-138's
  not-enough-resources notice, counted each time one is told: once per run and per change of what it
  waits for);
- gauge ``regionflow.pool.starving_runs``: DAG runs waiting past ``resource_wait_timeout`` now;
- timer: ``regionflow.pool.queue_wait`` (a grant's wait in the FIFO queue; StatsD sends it in milliseconds,
  as Airflow's own timers).

The speculation sensor keeps its six ``regionflow.speculation.*`` figures.
"""
from __future__ import annotations

from datetime import timedelta
from typing import Any, Protocol

PREFIX = "regionflow.pool."


class PoolReading(Protocol):
    """What the gauges read from the slot pool."""

    def free_slots(self) -> int: ...

    def used_slots(self) -> int: ...

    def waiting_bulks(self) -> list[Any]: ...

    def host_usage(self) -> list[Any]: ...

    @property
    def blocklist(self) -> Any: ...


class PoolMetrics:
    """Emits the pool's metrics through `stats` (Airflow's ``Stats`` by default)."""

    def __init__(self, stats: Any = None) -> None:
        if stats is None:
            from airflow.stats import Stats

            stats = Stats
        self.stats = stats

    def gauges(self, pool: PoolReading) -> None:
        """The pool's current figures."""
        self.stats.gauge(PREFIX + "slots_free", pool.free_slots())
        self.stats.gauge(PREFIX + "slots_used", pool.used_slots())
        self.stats.gauge(PREFIX + "queue_length", len(pool.waiting_bulks()))
        self.stats.gauge(PREFIX + "blocklisted_hosts", len({entry.host for entry in pool.blocklist.entries()}))
        for host in pool.host_usage():
            for figure, value in (("host_slots_free", host.free), ("host_slots_used", host.used)):
                self.stats.gauge(f"{PREFIX}{figure}.{host.name}", value)
                self.stats.gauge(PREFIX + figure, value, tags={"host": host.name})

    def granted(self, waited_s: float | None) -> None:
        """A bulk got its slots after `waited_s` seconds in the queue."""
        self.stats.incr(PREFIX + "grants")
        if waited_s is not None:
            self.stats.timing(PREFIX + "queue_wait", timedelta(seconds=max(0.0, waited_s)))

    def rejected(self) -> None:
        """A bulk no cluster state can hold was failed at once."""
        self.stats.incr(PREFIX + "rejections")

    def starving(self, runs: int, told: int) -> None:
        """`runs` DAG runs wait past resource_wait_timeout now; `told` notices were just given."""
        self.stats.gauge(PREFIX + "starving_runs", runs)
        if told:
            self.stats.incr(PREFIX + "resource_notices", told)


__all__ = ["PREFIX", "PoolMetrics"]
