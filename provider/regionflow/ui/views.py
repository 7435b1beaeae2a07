"""What regionflow shows about itself, as JSON-able dicts read from the store (read-only).

Shared by the Airflow UI plugin (`regionflow.ui.app`) and the command line (``regionflow status``),
so a page and a terminal show the same figures. No Airflow import here: the callers pass the store,
the cluster and, for the UI, which DAGs the user may see.
"""
from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any

from ..scheduling.blocklist import EVERY_JOB, applies_to
from ..scheduling.hosts import Cluster
from ..scheduling.speculation import METRIC_PREFIX
from ..spark.launch.targets import spark_target
from ..store import RegionflowStore, dag_id_of_job, job_id_for
from ..store.coordination import STOPPED_AFTER_S
from ..store.records import DecisionRecord, GrantRecord

DagFilter = Callable[[str], bool]


def cluster_view(store: RegionflowStore | None, cluster: Cluster, *, may_see: DagFilter = lambda dag_id: True,
                 now: float | None = None) -> dict[str, Any]:
    """The slot pool as the store records it: per host its slots used and free, the blocklist, the
    FIFO queue (oldest first) with each waiting region's request, age and why it waits, and the
    grants per DAG run. Grants and queue entries of DAGs the user may not see are counted, not shown.
    No store yet (None): nothing is granted or waiting."""
    now = time.time() if now is None else now
    live = store.live_grants() if store is not None else []
    used: dict[str, int] = defaultdict(int)
    for grant in live:
        for host, _ in grant.slots:
            used[host] += 1
    blocks = store.active_blocks(now) if store is not None else []
    hosts: list[dict[str, Any]] = [{"name": host.name, "slots": host.slots, "used": used.get(host.name, 0),
              "free": max(0, host.slots - used.get(host.name, 0)), "master": spark_target(host).master,
              "slot_profile": str(host.slot_profile)} for host in cluster]
    free_total = sum(h["free"] for h in hosts)
    waiting = store.waiting_grants() if store is not None else []  # in admission order: the FIFO order
    queue, hidden = [], 0
    for position, grant in enumerate(waiting, start=1):
        if not may_see(grant.dag_id):
            hidden += 1
            continue
        blocked = sorted({b.host for b in blocks if applies_to(b.job_id, grant.job_id)})
        queue.append({**_grant_fields(grant), "position": position, "age_s": round(now - grant.submitted_at, 1),
                      "blocked_hosts": blocked,
                      "why": _why_waiting(grant, position, cluster, free_total, blocked)})
    runs: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for grant in live:
        if may_see(grant.dag_id):
            runs[(grant.dag_id, grant.run_id)].append(
                {**_grant_fields(grant), "hosts": list(grant.hosts),
                 "held_s": round(now - (grant.granted_at or now), 1)})
    return {
        "generated_at": now,
        "hosts": hosts,
        "slots": {"total": cluster.total_slots, "used": sum(h["used"] for h in hosts), "free": free_total},
        "blocklist": [{"job_id": b.job_id, "host": b.host, "reason": b.reason,
                       "expires_in_s": round(b.remaining_s(now), 1)} for b in sorted(blocks, key=lambda b: b.added_at)
                      if b.job_id == EVERY_JOB or may_see(dag_id_of_job(b.job_id))],
        "queue": queue,
        "queue_hidden": hidden,
        "grants": [{"dag_id": dag_id, "run_id": run_id, "grants": grants}
                   for (dag_id, run_id), grants in sorted(runs.items())],
        "schedulers": _schedulers(store, now),
    }


def _schedulers(store: RegionflowStore | None, now: float) -> list[dict[str, Any]]:
    """The schedulers sharing the pool that have not ended, and whether their heartbeat is fresh."""
    found = store.schedulers() if store is not None else []
    return [{"scheduler_id": s.scheduler_id, "hostname": s.hostname, "pid": s.pid,
             "heartbeat_age_s": round(now - s.heartbeat_at, 1),
             "state": "live" if now - s.heartbeat_at <= STOPPED_AFTER_S else "silent (taken over when seen)"}
            for s in found if s.ended_at is None]


def _grant_fields(grant: GrantRecord) -> dict[str, Any]:
    return {"bulk_id": grant.bulk_id, "dag_id": grant.dag_id, "run_id": grant.run_id, "task_id": grant.task_id,
            "map_index": grant.map_index, "try_number": grant.try_number, "label": grant.label,
            "slots_requested": len(grant.requests)}


def _why_waiting(grant: GrantRecord, position: int, cluster: Cluster, free_total: int,
                 blocked: Iterable[str]) -> str:
    wanted = len(grant.requests)
    blocked = set(blocked)
    if wanted > cluster.total_slots:
        return f"unfulfillable: needs {wanted} slots, the cluster has {cluster.total_slots}"
    open_slots = sum(h.slots for h in cluster if h.name not in blocked)
    if blocked and wanted > open_slots:
        return (f"blocklisted: hosts {', '.join(sorted(blocked))} are blocked for this run; the others have "
                f"{open_slots} slots, it needs {wanted}")
    if position > 1:
        return f"behind {position - 1} older request(s) in the FIFO queue; needs {wanted} slots, {free_total} free"
    return f"not enough free slots: needs {wanted}, {free_total} free"


def run_view(store: RegionflowStore | None, dag_id: str, run_id: str, task_id: str | None = None) -> dict[str, Any]:
    """Per region task of one DAG run: its speculation metrics (newest values), attempts (host, start,
    end, state, winner) and copy requests; the run's blocklist entries; and per adaptive region decided for
    the run, its decision (`decision_view`). No store yet: no tasks."""
    if store is None:
        return {"dag_id": dag_id, "run_id": run_id, "tasks": {}, "blocklist": [], "decisions": {}}
    winners = {c.unit_key: c.winner_attempt for c in store.commits(dag_id, run_id)}
    tasks: dict[str, dict[str, Any]] = {}

    def entry(name: str) -> dict[str, Any]:
        return tasks.setdefault(name, {"metrics": {}, "attempts": [], "copies": []})

    for (name, metric), record in sorted(store.latest_metrics(dag_id, run_id).items()):
        if task_id is None or name == task_id:
            short = metric[len(METRIC_PREFIX):] if metric.startswith(METRIC_PREFIX) else metric
            entry(name)["metrics"][short] = record.value
    for attempt in store.attempts(dag_id, run_id, task_id):
        entry(attempt.task_id)["attempts"].append({
            "shard": max(attempt.map_index, 0), "attempt": attempt.attempt_id, "host": attempt.host,
            "state": attempt.state.value, "speculative": attempt.speculative,
            "winner": winners.get(attempt.unit_key) == attempt.attempt_id,
            "started_at": attempt.started_at, "ended_at": attempt.ended_at,
            "duration_s": None if attempt.duration_s is None else round(attempt.duration_s, 3),
            "message": attempt.message})
    for copy in store.copy_requests(dag_id, run_id, task_id):
        entry(copy.task_id)["copies"].append({
            "request": copy.request_id, "shard": copy.map_index, "state": copy.state.value,
            "attempt": copy.attempt_id, "host": copy.host, "excluded_hosts": list(copy.excluded_hosts),
            "message": copy.message})
    blocked = [{"host": b.host, "expires_in_s": round(b.remaining_s(time.time()), 1), "reason": b.reason}
               for b in store.active_blocks(job_id=job_id_for(dag_id, run_id))]
    decisions = {name: decision_view(d) for name, d in sorted(store.decisions(dag_id, run_id, task_id).items())}
    return {"dag_id": dag_id, "run_id": run_id, "tasks": tasks, "blocklist": blocked, "decisions": decisions}


def decision_view(decision: DecisionRecord) -> dict[str, Any]:
    """A region's decision in a DAG run as the views show it: per adaptive vertex its declared range and the
    value decided for the run; the shard count, the bytes read and why."""
    return {"vertices": {name: {"range": list(decision.ranges[name]), "decided": value}
                         for name, value in sorted(decision.decided.items())},
            "shards": decision.shards, "input_bytes": decision.input_bytes, "reason": decision.reason,
            "decided_at": decision.decided_at}


__all__ = ["cluster_view", "decision_view", "run_view"]
