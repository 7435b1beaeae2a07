"""When an embedded stack is ready: heartbeats of this start, and an execution API that has answered once
(a stand-in HTTP server on 127.0.0.1 plays an api-server whose first /execution/ request is slow)."""
import threading
import time
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler

import httpx
import pytest
from http_standin import serving

from regionflow.testing.readiness import execution_api_answers, healthy_since, unhealthy_components

NOW = datetime(2026, 11, 27, 10, 0, tzinfo=UTC)


def beat(status, at):
    return {"status": status, "latest_scheduler_heartbeat": at.isoformat() if at else None}


def test_a_component_is_healthy_only_by_a_heartbeat_of_this_start():
    assert healthy_since(beat("healthy", NOW + timedelta(seconds=1)), NOW)
    assert not healthy_since(beat("healthy", NOW - timedelta(seconds=1)), NOW)  # the stopped process's beat
    assert not healthy_since(beat("unhealthy", NOW + timedelta(seconds=1)), NOW)
    assert not healthy_since(beat("healthy", None), NOW)
    naive = {"status": "healthy", "latest_dag_processor_heartbeat": (NOW + timedelta(seconds=1)).replace(tzinfo=None)
             .isoformat()}
    assert healthy_since(naive, NOW)


def test_unhealthy_components_names_the_api_server_while_it_does_not_answer():
    components = ("api-server", "scheduler", "dag-processor")
    assert unhealthy_components(None, components, NOW) == ["api-server"]
    health = {"scheduler": beat("healthy", NOW + timedelta(seconds=2)),
              "dag_processor": {"status": "healthy", "latest_dag_processor_heartbeat": None}}
    assert unhealthy_components(health, components, NOW) == ["dag-processor"]


@pytest.fixture
def lazy_api_server():
    """An HTTP server whose first /execution/ request takes 3 s (Cadwyn building its routes), later ones none."""
    state = {"built": False, "lock": threading.Lock()}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            with state["lock"]:
                if self.path.startswith("/execution/") and not state["built"]:
                    time.sleep(3)
                    state["built"] = True
            self.send_response(200 if self.path == "/execution/health" else 404)
            self.end_headers()
            self.wfile.write(b'{"status": "healthy"}')

        def log_message(self, *args):
            pass

    with serving(Handler) as url:
        yield url


def test_the_execution_api_answers_once_its_first_request_is_served(lazy_api_server):
    with httpx.Client(base_url=lazy_api_server, trust_env=False) as client:
        assert not execution_api_answers(client, 0.5)  # the first request is still being served
        started = time.monotonic()
        assert execution_api_answers(client, 10)
        assert execution_api_answers(client, 1)
    assert time.monotonic() - started < 10


def test_nothing_listening_is_not_an_answer():
    with httpx.Client(base_url="http://127.0.0.1:9", trust_env=False) as client:
        assert not execution_api_answers(client, 1)
