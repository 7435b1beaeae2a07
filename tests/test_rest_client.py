"""The embedded stack's REST client against a stand-in api-server (a real HTTP server on 127.0.0.1):
a GET answered with a 5xx is asked again, so is a write that sets an absolute value (pause, "Mark as"),
any other write is never repeated, and a lasting error still fails with the status and the request named."""
from __future__ import annotations

import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler

import pytest
from http_standin import serving

from regionflow.testing import rest_client
from regionflow.testing.errors import ApiError
from regionflow.testing.rest_client import AirflowRestClient

RUN_PATH = "/api/v2/dags/d/dagRuns/r"


class StandIn(BaseHTTPRequestHandler):
    """Issues tokens; answers the run's GET with `failures_left` 500s first, then the run; every
    other write with a 500. Counts the calls per (method, path)."""

    failures_left = 0
    calls: dict[tuple[str, str], int] = {}

    def _answer(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _count(self) -> None:
        key = (self.command, self.path)
        StandIn.calls[key] = StandIn.calls.get(key, 0) + 1
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self._count()
        if StandIn.failures_left:
            StandIn.failures_left -= 1
            self._answer(500, {"detail": {"reason": "Database error"}})
        else:
            self._answer(200, {"state": "success"})

    def do_PATCH(self) -> None:  # noqa: N802
        self._count()
        if StandIn.failures_left:  # what SQLite's audit-log deadlock answers (see rest_client)
            StandIn.failures_left -= 1
            self._answer(500, {"detail": {"reason": "Database error"}})
        else:
            self._answer(200, {})

    def do_POST(self) -> None:  # noqa: N802
        self._count()
        if self.path == "/auth/token":
            self._answer(201, {"access_token": "token"})
        else:
            self._answer(500, {"detail": "busy"})

    def log_message(self, *args: object) -> None:
        pass


class Client(AirflowRestClient):
    def __init__(self, url: str, passwords: str) -> None:
        self._url, self._passwords = url, passwords

    @property
    def api_url(self) -> str:
        return self._url

    @property
    def passwords_path(self) -> str:
        return self._passwords

    def log_path(self, component: str) -> str:
        return f"/nowhere/{component}.log"


@pytest.fixture
def client(tmp_path, monkeypatch) -> Iterator[Client]:
    monkeypatch.setattr(rest_client, "RETRY_PAUSE_S", 0.01)
    StandIn.calls, StandIn.failures_left = {}, 0
    passwords = tmp_path / "passwords.json"
    passwords.write_text(json.dumps({"admin": "secret"}))
    with serving(StandIn) as url:
        made = Client(url, str(passwords))
        try:
            yield made
        finally:
            made.close_client()


def test_a_get_answered_with_500_is_asked_again_until_it_answers(client) -> None:
    StandIn.failures_left = rest_client.REQUEST_TRIES - 1

    assert client.dag_run("d", "r") == {"state": "success"}
    assert StandIn.calls[("GET", RUN_PATH)] == rest_client.REQUEST_TRIES


def test_a_lasting_500_fails_after_the_last_try_naming_the_request(client) -> None:
    StandIn.failures_left = rest_client.REQUEST_TRIES + 5

    with pytest.raises(ApiError, match=r"GET .*/api/v2/dags/d/dagRuns/r answered 500") as failure:
        client.dag_run("d", "r")
    assert failure.value.status == 500
    assert StandIn.calls[("GET", RUN_PATH)] == rest_client.REQUEST_TRIES


def test_a_write_answered_with_500_is_not_repeated(client) -> None:
    with pytest.raises(ApiError, match="answered 500"):
        client.create_pool("p", 1)
    assert StandIn.calls[("POST", "/api/v2/pools")] == 1


def test_a_pause_and_a_mark_as_answered_with_500_are_asked_again_until_they_answer(client) -> None:
    StandIn.failures_left = rest_client.REQUEST_TRIES - 1
    client.set_paused("d", False)
    StandIn.failures_left = rest_client.REQUEST_TRIES - 1
    client.set_task_state("d", "r", "t", "failed")

    assert StandIn.calls[("PATCH", "/api/v2/dags/d?update_mask=is_paused")] == rest_client.REQUEST_TRIES
    assert StandIn.calls[("PATCH", f"{RUN_PATH}/taskInstances/t?update_mask=new_state")] == rest_client.REQUEST_TRIES
