"""When an embedded Airflow stack is ready for tasks: its components report healthy heartbeats of this
start, and its execution API has answered once.

The second check exists because Airflow's execution API (the Cadwyn app under ``/execution/``, which
task processes call) builds its versioned routes on its first request, inside the api-server's event
loop: every request to the api-server waits meanwhile. That takes seconds on a quiet box and took
minutes on a throttled one, where the first task's ``run`` call timed out and was retried while its DAG
run waited. An unauthenticated ``GET /execution/health`` pays that once, before any task runs.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import httpx

# Key of each component in GET /api/v2/monitor/health.
HEALTH_KEYS = {"scheduler": "scheduler", "dag-processor": "dag_processor", "triggerer": "triggerer"}


def health_or_none(client: httpx.Client) -> dict[str, Any] | None:
    """The api-server's health answer, or None while it does not answer."""
    try:
        response = client.get("/api/v2/monitor/health", timeout=5)
    except httpx.HTTPError:
        return None
    return response.json() if response.status_code == 200 else None


def unhealthy_components(health: Mapping[str, Any] | None, components: Sequence[str], since: datetime) -> list[str]:
    """The components not yet healthy by a heartbeat at or after `since` (all of them, as the
    api-server, while it does not answer)."""
    if health is None:
        return ["api-server"]
    return [name for name in components
            if name in HEALTH_KEYS and not healthy_since(health.get(HEALTH_KEYS[name]) or {}, since)]


def healthy_since(entry: Mapping[str, Any], since: datetime) -> bool:
    """Healthy, and by a heartbeat of this start: the health endpoint reports the most recent job,
    which on a restarted home may be the previous, stopped process's for up to 30 s."""
    heartbeat = next((value for key, value in entry.items() if key.startswith("latest_") and value), None)
    if entry.get("status") != "healthy" or heartbeat is None:
        return False
    beat = datetime.fromisoformat(heartbeat)
    return (beat if beat.tzinfo else beat.replace(tzinfo=UTC)) >= since


def execution_api_answers(client: httpx.Client, timeout: float) -> bool:
    """Whether ``GET /execution/health`` answers 200 within `timeout` seconds (the first call waits for
    the execution API to build its routes)."""
    try:
        return client.get("/execution/health", timeout=max(1.0, timeout)).status_code == 200
    except httpx.HTTPError:
        return False
