"""A small client of Airflow's public REST API v2, as the embedded stack's admin user.

Token (POST /auth/token, renewed after a 401), DAGs, import errors, pools, DAG runs (trigger, wait),
task instances (list, mark, clear) and task logs. `AirflowRestClient` is a base class of
`regionflow.testing.EmbeddedAirflow`; it needs from it the api-server's URL, the admin password file,
the DAGs folder and the components' logs (quoted in its errors).
"""
from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

import httpx

from .airflow_config import ADMIN_USER, read_json
from .errors import ApiError, EmbeddedAirflowError, WaitTimeout

TERMINAL_RUN_STATES = frozenset({"success", "failed"})
API_TIMEOUT_S = 120.0
POLL_SECONDS = 0.5
# A call that may be repeated is made up to REQUEST_TRIES times in all, RETRY_PAUSE_S x the try number
# apart: every GET answered with a 5xx (a read is safe to repeat; a busy api-server on SQLite answers 500
# when its database connection pool runs dry, SQLAlchemy's 30 s checkout timeout, while task processes
# hold its connections), a trigger (its run id is chosen here, so a repeat cannot run the DAG twice), and
# a write that sets an absolute value (pause, a task's state: a repeat changes nothing more). The last
# case is needed on SQLite: Airflow's audit log of a user action (`action_logging`, an async dependency
# that runs before the endpoint) commits on the api-server's event loop; when a task's execution-API write
# holds SQLite's write lock at that moment, its commit waits for the same loop, and the two wait for each
# other until the 30 s lock timeout fails the user action with 500 "Database error", before its endpoint
# ran (seen twice in CI: `INSERT INTO log` failing as `PUT /execution/.../rtif` took 30.1 s).
REQUEST_TRIES = 3
RETRY_PAUSE_S = 2.0
_PAGE = 100


class AirflowRestClient:
    """REST API v2 calls as the admin user; subclasses give the stack's URL, files and logs."""

    dags_folder: str
    _token: str | None = None
    _http: httpx.Client | None = None

    @property
    def api_url(self) -> str:
        raise NotImplementedError

    @property
    def passwords_path(self) -> str:
        raise NotImplementedError

    def log_path(self, component: str) -> str:
        raise NotImplementedError

    def log_tail(self, component: str) -> str:
        raise NotImplementedError

    def close_client(self) -> None:
        """Close the HTTP connection and forget the token (before the api-server stops: uvicorn's
        graceful shutdown waits for open keep-alive connections)."""
        self._token = None
        if self._http is not None:
            self._http.close()
            self._http = None

    def admin_password(self) -> str:
        password = read_json(self.passwords_path).get(ADMIN_USER)
        if not password:
            raise EmbeddedAirflowError(f"api-server: no password for {ADMIN_USER!r} in {self.passwords_path}")
        return password

    def token(self) -> str:
        """A JWT of the admin user from POST /auth/token (cached; renewed after a 401)."""
        if self._token is None:
            body = {"username": ADMIN_USER, "password": self.admin_password()}
            response = self._client().post("/auth/token", json=body)
            self._check(response, (200, 201))
            self._token = response.json()["access_token"]
        return self._token

    def wait_for_dag(self, dag_id: str, timeout: float = 300.0) -> dict[str, Any]:
        """The DAG as GET /api/v2/dags/{dag_id} shows it, once the dag-processor has parsed it."""
        deadline = time.monotonic() + timeout
        while True:
            response = self._call("GET", f"/api/v2/dags/{_q(dag_id)}", ok=(200, 404))
            if response.status_code == 200:
                return response.json()
            if time.monotonic() >= deadline:
                raise WaitTimeout(
                    f"dag-processor: DAG {dag_id!r} not parsed within {timeout:.0f} s from {self.dags_folder}; "
                    f"import errors: {self.import_errors()}; dag-processor log "
                    f"({self.log_path('dag-processor')}) ends with:\n{self.log_tail('dag-processor')}"
                )
            time.sleep(POLL_SECONDS)

    def import_errors(self) -> list[dict[str, Any]]:
        """Every import error (filename, stack_trace, ...) from GET /api/v2/importErrors."""
        return self._paged("/api/v2/importErrors", "import_errors")

    def wait_for_import_error(self, file_name: str, timeout: float = 300.0) -> dict[str, Any]:
        """The import error of the DAG file whose path ends with `file_name`, once it is reported."""
        deadline = time.monotonic() + timeout
        while True:
            for error in self.import_errors():
                if str(error.get("filename", "")).endswith(file_name):
                    return error
            if time.monotonic() >= deadline:
                raise WaitTimeout(
                    f"dag-processor: no import error for {file_name!r} within {timeout:.0f} s; dag-processor "
                    f"log ({self.log_path('dag-processor')}) ends with:\n{self.log_tail('dag-processor')}"
                )
            time.sleep(POLL_SECONDS)

    def create_pool(self, name: str, slots: int, description: str = "") -> None:
        """An Airflow pool (the benchmarks compare Airflow pools with the slot pool)."""
        self._call("POST", "/api/v2/pools", ok=(200, 201),
                   json={"name": name, "slots": slots, "description": description, "include_deferred": False})

    def unpause(self, dag_id: str) -> None:
        self.set_paused(dag_id, False)

    def set_paused(self, dag_id: str, paused: bool) -> None:
        self._call("PATCH", f"/api/v2/dags/{_q(dag_id)}", json={"is_paused": paused},
                   params={"update_mask": "is_paused"}, repeatable=True)

    def trigger(self, dag_id: str, conf: Mapping[str, Any] | None = None, run_id: str | None = None,
                logical_date: str | None = None) -> str:
        """Create a manual DAG run (logical_date null unless given as ISO, as 3.x allows); return its run id.

        SQLite answers "database is locked" when the machine is very busy, which the api-server turns
        into a 500; the run id is fixed before the first try, so trying again cannot create a second run.
        """
        run_id = run_id or (f"manual__{datetime.now(UTC).strftime('%Y-%m-%dT%H:%M:%S.%f')}"
                            f"_{uuid.uuid4().hex[:6]}")
        body: dict[str, Any] = {"logical_date": logical_date, "conf": dict(conf or {}), "dag_run_id": run_id}
        for attempt in range(REQUEST_TRIES):
            try:
                self._call("POST", f"/api/v2/dags/{_q(dag_id)}/dagRuns", json=body)
                return run_id
            except ApiError as error:
                if error.status == 409 and attempt:  # an earlier try did create it
                    return run_id
                if error.status < 500 or attempt == REQUEST_TRIES - 1:
                    raise
            except httpx.TimeoutException:
                if attempt == REQUEST_TRIES - 1:
                    raise
            time.sleep(RETRY_PAUSE_S * (attempt + 1))
        return run_id

    def set_task_state(self, dag_id: str, run_id: str, task_id: str, state: str, map_index: int = -1) -> None:
        """Mark a task instance ``success`` or ``failed``, as the UI's "Mark as" does."""
        path = f"/api/v2/dags/{_q(dag_id)}/dagRuns/{_q(run_id)}/taskInstances/{_q(task_id)}"
        if map_index >= 0:
            path += f"/{map_index}"
        self._call("PATCH", path, json={"new_state": state}, params={"update_mask": "new_state"}, repeatable=True)

    def clear_task(self, dag_id: str, run_id: str, task_ids: Sequence[str]) -> None:
        """Clear task instances of a run (a new try each), as the UI's "Clear" does."""
        body = {"dry_run": False, "dag_run_id": run_id, "task_ids": list(task_ids), "only_failed": False,
                "reset_dag_runs": True}
        self._call("POST", f"/api/v2/dags/{_q(dag_id)}/clearTaskInstances", json=body)

    def health(self) -> dict[str, Any]:
        """GET /api/v2/monitor/health: metadatabase, scheduler, dag_processor, triggerer."""
        return self._call("GET", "/api/v2/monitor/health").json()

    def dag_runs(self, dag_id: str) -> list[dict[str, Any]]:
        return self._paged(f"/api/v2/dags/{_q(dag_id)}/dagRuns", "dag_runs")

    def dag_run(self, dag_id: str, run_id: str) -> dict[str, Any]:
        return self._call("GET", f"/api/v2/dags/{_q(dag_id)}/dagRuns/{_q(run_id)}").json()

    def wait_for_run(self, dag_id: str, run_id: str, timeout: float = 300.0) -> str:
        """Poll the DAG run until it is ``success`` or ``failed``; return that state."""
        deadline = time.monotonic() + timeout
        while True:
            state = self.dag_run(dag_id, run_id).get("state")
            if state in TERMINAL_RUN_STATES:
                return state
            if time.monotonic() >= deadline:
                states = [(ti["task_id"], ti["map_index"], ti["state"]) for ti in self.task_instances(dag_id, run_id)]
                raise WaitTimeout(
                    f"scheduler: run {run_id!r} of {dag_id!r} still {state!r} after {timeout:.0f} s; task "
                    f"instances: {states}; scheduler log ({self.log_path('scheduler')}) ends with:\n"
                    f"{self.log_tail('scheduler')}"
                )
            time.sleep(POLL_SECONDS)

    def task_instances(self, dag_id: str, run_id: str) -> list[dict[str, Any]]:
        """Every task instance of the run, mapped ones included (one entry per map_index)."""
        path = f"/api/v2/dags/{_q(dag_id)}/dagRuns/{_q(run_id)}/taskInstances"
        return self._paged(path, "task_instances", order_by="id")

    def task_log(self, dag_id: str, run_id: str, task_id: str, try_number: int, map_index: int = -1) -> str:
        """The task log of one try as text, one line per log event."""
        path = f"/api/v2/dags/{_q(dag_id)}/dagRuns/{_q(run_id)}/taskInstances/{_q(task_id)}/logs/{try_number}"
        params = {"map_index": map_index, "full_content": "true"}
        response = self._call("GET", path, params=params, headers={"Accept": "application/json"})
        return "\n".join(_log_line(event) for event in response.json().get("content", []))

    def failed_task_logs(self, dag_id: str, run_id: str, lines: int = 40) -> str:
        """The last `lines` of the last try's log of each failed task instance of the run (a failed test's
        explanation)."""
        parts = []
        for ti in self.task_instances(dag_id, run_id):
            if ti["state"] != "failed":
                continue
            try:
                text = self.task_log(dag_id, run_id, ti["task_id"], max(ti["try_number"], 1), ti["map_index"])
            except ApiError as error:
                text = f"(no log: {error})"
            tail = "\n".join(text.splitlines()[-lines:])
            parts.append(f"--- {ti['task_id']}[{ti['map_index']}] try {ti['try_number']}:\n{tail}")
        return "\n".join(parts)

    def _paged(self, path: str, key: str, **params: Any) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        while True:
            page = self._call("GET", path, params={**params, "limit": _PAGE, "offset": len(items)}).json()
            items.extend(page.get(key, []))
            if not page.get(key) or len(items) >= page.get("total_entries", 0):
                return items

    def _call(self, method: str, path: str, *, ok: Iterable[int] = (200,), repeatable: bool = False,
              **kwargs: Any) -> httpx.Response:
        """`method` `path` as the admin user (the token renewed once after a 401); a GET, or a write the
        caller calls `repeatable`, answered with a 5xx is asked up to `REQUEST_TRIES` times in all.
        `ApiError` unless the last answer's status is in `ok`."""
        tries = REQUEST_TRIES if method == "GET" or repeatable else 1
        for attempt in range(1, tries + 1):
            response = self._authorized(method, path, **kwargs)
            if response.status_code == 401:
                self._token = None
                response = self._authorized(method, path, **kwargs)
            if response.status_code < 500 or attempt == tries:
                break
            time.sleep(RETRY_PAUSE_S * attempt)
        self._check(response, tuple(ok))
        return response

    def _authorized(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        headers = {**kwargs.pop("headers", {}), "Authorization": f"Bearer {self.token()}"}
        return self._client().request(method, path, headers=headers, **kwargs)

    def _check(self, response: httpx.Response, ok: tuple[int, ...]) -> None:
        if response.status_code not in ok:
            raise ApiError(response.request.method, str(response.request.url), response.status_code,
                           response.text, self.log_path("api-server"))

    def http_client(self, username: str | None = None, password: str | None = None, *,
                    anonymous: bool = False) -> httpx.Client:
        """A new HTTP client of the api-server signed in as `username` with `password` (default: the
        admin user; `anonymous`: nobody), for calls this class has no method for (a plugin's endpoints,
        another user's view). Close it, or use it in a ``with`` block."""
        http = self._new_http()  # not used before it is returned: httpx refuses to enter a used client
        if anonymous:
            return http
        if username is None:
            token = self.token()
        else:
            response = self._client().post("/auth/token", json={"username": username, "password": password or ""})
            if response.status_code not in (200, 201):
                http.close()
                self._check(response, (200, 201))
            token = response.json()["access_token"]
        http.headers["Authorization"] = f"Bearer {token}"
        return http

    def _client(self) -> httpx.Client:
        if self._http is None:
            self._http = self._new_http()
        return self._http

    def _new_http(self) -> httpx.Client:
        # trust_env=False: an HTTP(S)_PROXY of the environment must not see loopback traffic.
        # 120 s: on SQLite, a write on the api-server's event loop (the audit log of a trigger) and
        # one of the execution API can lock each other until the 30 s busy timeout, and the one
        # worker answers nothing meanwhile; a 30 s client timeout turned that into a failed call.
        return httpx.Client(base_url=self.api_url, timeout=API_TIMEOUT_S, trust_env=False)


def _q(segment: str) -> str:
    return quote(segment, safe="")


def _log_line(event: Any) -> str:
    if not isinstance(event, dict):
        return str(event)
    parts = [str(event.get(key)) for key in ("timestamp", "level") if event.get(key)]
    return " ".join([*parts, str(event.get("event", ""))])


__all__ = ["API_TIMEOUT_S", "AirflowRestClient", "POLL_SECONDS", "TERMINAL_RUN_STATES"]
