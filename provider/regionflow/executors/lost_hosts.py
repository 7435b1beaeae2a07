"""Lost hosts: probed while they are blocklisted for every DAG run, lifted as soon as they answer.

When an attempt finds its host lost (its Spark Connect server or its standalone master silent), its
task writes a blocklist entry for `EVERY_JOB` that lasts ``[regionflow] blocklist_expiry`` seconds.
Without a probe that entry would just expire: a host back after five seconds stays blocked for the
whole expiry, and a host still down gets regions again after it, each losing an attempt there.

`LostHostWatch` probes every such host every ``[regionflow] lost_host_probe_interval`` seconds (a
`HostProbe`, see `regionflow.spark.servers.health`), in a thread of its own so that a slow connection never
holds up the scheduler's loop:

- the host answers: the entry is lifted from the store (only if nobody extended it meanwhile), and the
  executor's blocklist mirror lifts it from the slot pool at its next sync;
- the host is still silent and its entry ends before the next probe: the entry is extended by
  ``blocklist_expiry``, so regions keep off it while it is down;
- the probe cannot tell (a ``local[k]`` host, say): the entry is left to expire.

Every scheduler of an HA setup runs one; their writes are idempotent. The store is the truth.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any, Protocol

from ..scheduling.blocklist import EVERY_JOB
from ..store import BlockRecord, RegionflowStore

STILL_SILENT = " (still silent at the probe of "  # the reason of an extended entry ends with it


class HostProbe(Protocol):
    def answers(self, host: str) -> bool | None:
        """True: the host answers again; False: still silent; None: nothing tells."""
        ...


class Verdict(Enum):
    LIFTED = "lifted"  # it answers: its entry is gone
    EXTENDED = "extended"  # still silent, entry about to end: extended
    SILENT = "silent"  # still silent, entry still long enough
    UNKNOWN = "unknown"  # the probe cannot tell (or failed): left to expire


@dataclass(frozen=True)
class HostVerdict:
    """What one probe of one lost host found and did."""

    host: str
    verdict: Verdict
    expires_at: float  # the entry's expiry after the probe (epoch s); 0 when lifted
    detail: str = ""


class LostHostWatch:
    """Probes the hosts blocklisted for every run; lifts or extends their entries (see module docstring)."""

    def __init__(self, store: RegionflowStore, probe: HostProbe, expiry_s: float, log: Any, *,
                 interval_s: float, clock: Callable[[], float] = time.time) -> None:
        if interval_s <= 0 or expiry_s <= 0:
            raise ValueError(f"lost-host probes need interval_s > 0 and expiry_s > 0, not {interval_s}, {expiry_s}")
        self.store, self.probe, self.log = store, probe, log
        self.expiry_s, self.interval_s, self.clock = expiry_s, interval_s, clock
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def tick(self) -> list[HostVerdict]:
        """One round: probe every host with a live entry for every run; returns what was found."""
        now = self.clock()
        lost = [entry for entry in self.store.active_blocks(now) if entry.job_id == EVERY_JOB]
        return [self._probe(entry, now) for entry in lost]

    def start(self) -> None:
        """Probe in a daemon thread every `interval_s` seconds until `stop`."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="regionflow-lost-hosts", daemon=True)
            self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.tick()
            except Exception as error:  # noqa: BLE001 - a failed round is logged; the next one tries again
                self.log.warning("RegionExecutor: probing lost hosts failed: %s", error)

    def _probe(self, entry: BlockRecord, now: float) -> HostVerdict:
        try:
            answers = self.probe.answers(entry.host)
        except Exception as error:  # noqa: BLE001 - a probe that fails tells nothing
            return HostVerdict(entry.host, Verdict.UNKNOWN, entry.expires_at, f"probe failed: {error}")
        if answers is None:
            return HostVerdict(entry.host, Verdict.UNKNOWN, entry.expires_at)
        if answers:
            if not self.store.unblock(EVERY_JOB, entry.host, expires_at=entry.expires_at):
                return HostVerdict(entry.host, Verdict.SILENT, entry.expires_at, "its entry changed meanwhile")
            self.log.info("RegionExecutor: lost host %s answers again; its blocklist entry for every DAG run "
                          "is lifted (%s)", entry.host, entry.reason)
            return HostVerdict(entry.host, Verdict.LIFTED, 0.0)
        if entry.expires_at - now > 2 * self.interval_s:
            return HostVerdict(entry.host, Verdict.SILENT, entry.expires_at)
        expires_at = now + self.expiry_s
        probed_at = time.strftime("%H:%M:%S", time.gmtime(now))
        reason = f"{entry.reason.split(STILL_SILENT)[0]}{STILL_SILENT}{probed_at} UTC)"
        self.store.block(EVERY_JOB, entry.host, expires_at, reason=reason[:500])
        self.log.warning("RegionExecutor: lost host %s is still silent; its blocklist entry for every DAG run is "
                         "extended by %g s", entry.host, self.expiry_s)
        return HostVerdict(entry.host, Verdict.EXTENDED, expires_at)


__all__ = ["HostProbe", "HostVerdict", "LostHostWatch", "STILL_SILENT", "Verdict"]
