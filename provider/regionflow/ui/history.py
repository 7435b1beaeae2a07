"""The slot pool over the last hours, as a JSON-able dict read from the store (read-only): slots used per
host and the length of the FIFO queue, as step series for the UI's charts. No Airflow import here: the
caller passes the store and the cluster.
"""
from __future__ import annotations

import time
from collections import Counter, defaultdict
from collections.abc import Iterable
from typing import Any

from ..scheduling.hosts import Cluster
from ..store import RegionflowStore
from ..store.grant_ledger import grant_end

MAX_HOURS = 168.0  # a week: the most history one request reads

Point = list[float]  # [t, value]; JSON has no tuples


def cluster_history(store: RegionflowStore | None, cluster: Cluster, *, hours: float = 3.0,
                    now: float | None = None, max_points: int = 2000) -> dict[str, Any]:
    """Slots used per host (``occupancy``) and grants waiting in the FIFO queue (``queue``) from `hours`
    before `now` until `now`, as step series: each ``[t, value]`` holds from t until the next point, the
    first point is at ``since``, the last at ``until``, and a point is written only where the value changes.

    A grant holds its slots (counted per host) over [granted_at, released_at) and waits over [submitted_at,
    granted_at or released_at); one still granted or waiting runs past ``until``. Rejected and lost grants
    without released_at end at granted_at or submitted_at (`store.grant_ledger.grant_end`). Only the
    cluster's hosts are charted. A series longer than `max_points` is downsampled to equal time buckets,
    each showing the highest value over the bucket, so a short peak is never lost.
    No store yet (None): every series is 0 throughout."""
    if isinstance(hours, bool) or not isinstance(hours, (int, float)) or not 0 < hours <= MAX_HOURS:
        raise ValueError(f"hours must be more than 0 and at most {MAX_HOURS:g} (a week), got {hours!r}")
    if max_points < 2:
        raise ValueError(f"max_points must be at least 2 (the first and last point), got {max_points!r}")
    until = time.time() if now is None else float(now)
    since = until - float(hours) * 3600.0
    grants = store.grants_active_between(since, until) if store is not None else []
    held: dict[str, list[tuple[float, int]]] = defaultdict(list)  # host -> (t, +/- slots) events
    waiting: list[tuple[float, int]] = []
    for grant in grants:
        end = grant_end(grant)
        if grant.granted_at is not None:
            for host, count in Counter(host for host, _ in grant.slots).items():
                _span(held[host], grant.granted_at, end, count)
        _span(waiting, grant.submitted_at, grant.granted_at if grant.granted_at is not None else end, 1)
    names = [host.name for host in cluster]
    return {
        "since": since, "until": until,
        "hosts": [{"name": host.name, "slots": host.slots} for host in cluster],
        "occupancy": {name: _downsampled(_series(held.get(name, ()), since, until), since, until, max_points)
                      for name in names},
        "queue": _downsampled(_series(waiting, since, until), since, until, max_points),
        "grants": len(grants),
    }


def _span(events: list[tuple[float, int]], start: float, end: float | None, amount: int) -> None:
    """`amount` over [start, end); None: still going. An empty span adds nothing."""
    if end is not None and end <= start:
        return
    events.append((start, amount))
    if end is not None:
        events.append((end, -amount))


def _series(events: Iterable[tuple[float, int]], since: float, until: float) -> list[Point]:
    """The step series of `events` clipped to [since, until]: a change at each distinct time (equal times
    coalesced), none where the value stays; first point at `since`, last at `until`."""
    changes: dict[float, int] = defaultdict(int)
    for moment, amount in events:
        if moment <= until:
            changes[max(moment, since)] += amount
    points: list[Point] = [[since, 0]]
    value = 0
    for moment in sorted(changes):
        value += changes[moment]
        if moment == since:  # the earliest time there can be: what was going on when the window opens
            points[0][1] = value
        elif value != points[-1][1]:
            points.append([moment, value])
    if points[-1][0] != until:
        points.append([until, points[-1][1]])
    return points


def _downsampled(points: list[Point], since: float, until: float, max_points: int) -> list[Point]:
    """`points` if few enough; else one point per equal time bucket (max_points - 1 of them) holding the
    series' highest value over the bucket, equal neighbours merged, then the value at `until`."""
    if len(points) <= max_points:
        return points
    buckets = max_points - 1
    width = (until - since) / buckets
    out: list[Point] = []
    index, current = 0, points[0][1]
    for bucket in range(buckets):
        start = since + bucket * width
        end = until if bucket == buckets - 1 else since + (bucket + 1) * width
        while index < len(points) and points[index][0] <= start:
            current = points[index][1]
            index += 1
        peak = current
        while index < len(points) and points[index][0] < end:
            current = points[index][1]
            peak = max(peak, current)
            index += 1
        if not out or out[-1][1] != peak:
            out.append([start, peak])
    out.append([until, points[-1][1]])
    return out


__all__ = ["MAX_HOURS", "cluster_history"]
