"""The Gantt chart of one DAG run, as a JSON-able dict read from the store (read-only).

One row per slot of the cluster; on it, bars: a grant's wait in the FIFO queue (placed on the slot it was
finally given; a grant never given one goes to the chart's queue row, host and slot None) and each Spark
attempt of a region, one bar per slot of the grant it ran in, with speculative copies marked and linked to
the attempt they were started against. Blocklist entries of the run, of its copies and for every job are spans on
their host. No Airflow import here: the caller passes the store and the cluster.
"""
from __future__ import annotations

import time
from typing import Any

from ..scheduling.hosts import Cluster
from ..store import RegionflowStore, job_id_for
from ..store.grant_ledger import grant_end
from ..store.records import AttemptRecord, GrantRecord, GrantState


def run_timeline(store: RegionflowStore | None, cluster: Cluster, dag_id: str, run_id: str,
                 now: float | None = None) -> dict[str, Any]:
    """The chart data of one DAG run: ``rows`` (each slot of the cluster, cluster order), ``bars`` (waits
    and attempts, by start then id; ``end`` None: still open) and ``blocks`` (the run's blocklist spans,
    expired ones included). No store yet (None): no bars, no blocks."""
    now = time.time() if now is None else now
    rows = [{"host": host.name, "slot": index} for host in cluster for index in range(host.slots)]
    if store is None:
        return {"dag_id": dag_id, "run_id": run_id, "generated_at": now, "rows": rows, "bars": [], "blocks": []}
    grants = store.grants(dag_id=dag_id, run_id=run_id)
    by_bulk = {grant.bulk_id: grant for grant in grants}
    winners = {commit.unit_key: commit.winner_attempt for commit in store.commits(dag_id, run_id)}
    originals = {copy.attempt_id: copy.slow_attempt for copy in store.copy_requests(dag_id, run_id)
                 if copy.attempt_id is not None}
    bars = [_wait_bar(grant) for grant in grants]
    for attempt in store.attempts(dag_id, run_id):
        grant = by_bulk.get(attempt.bulk_id) if attempt.bulk_id is not None else None
        bars.extend(_attempt_bars(attempt, grant, winner=winners.get(attempt.unit_key) == attempt.attempt_id,
                                  original=originals.get(attempt.attempt_id)))
    bars.sort(key=lambda bar: (bar["start"], bar["id"]))
    blocks = [{"host": block.host, "start": block.added_at, "end": block.expires_at, "reason": block.reason}
              for block in store.blocks(job_id_for(dag_id, run_id))]
    return {"dag_id": dag_id, "run_id": run_id, "generated_at": now, "rows": rows, "bars": bars, "blocks": blocks}


def _wait_bar(grant: GrantRecord) -> dict[str, Any]:
    """The grant's time in the queue: submitted until granted (else until it ended; None: still waiting)."""
    end = grant.granted_at if grant.granted_at is not None else grant_end(grant)
    host, slot = grant.slots[0] if grant.slots else (None, None)
    state = GrantState.WAITING.value if end is None else grant.state.value
    return {**_common(grant.task_id, grant.map_index, grant.label, len(grant.slots) or len(grant.requests)),
            "id": f"wait:{grant.bulk_id}", "kind": "wait", "host": host, "slot": slot,
            "start": grant.submitted_at, "end": end, "state": state, "speculative": False, "winner": False,
            "original": None, "attempt": None, "try_number": grant.try_number, "input_bytes": None,
            "message": grant.message}


def _attempt_bars(attempt: AttemptRecord, grant: GrantRecord | None, *, winner: bool,
                  original: str | None) -> list[dict[str, Any]]:
    """One bar per slot of the attempt's grant; without a known grant, one bar on its host, slot None."""
    places: list[tuple[str, int | None]] = list(grant.slots) if grant is not None and grant.slots \
        else [(attempt.host, None)]
    fields = {**_common(attempt.task_id, attempt.map_index, grant.label if grant is not None else None,
                        len(places) if grant is not None else 1),
              "kind": "attempt", "start": attempt.started_at, "end": attempt.ended_at,
              "state": attempt.state.value, "speculative": attempt.speculative, "winner": winner,
              "original": original, "attempt": attempt.attempt_id,
              "try_number": grant.try_number if grant is not None else None,
              "input_bytes": attempt.input_bytes, "message": attempt.message}
    return [{**fields, "id": f"{attempt.attempt_id}@{host}/{slot}",
             "host": host, "slot": slot} for host, slot in places]


def _common(task_id: str, map_index: int, label: str | None, slots: int) -> dict[str, Any]:
    return {"task_id": task_id, "shard": max(map_index, 0), "label": label or task_id, "slots": slots}


__all__ = ["run_timeline"]
