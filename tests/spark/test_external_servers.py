"""A host with a ``conn_id``: its Spark Connect server is someone else's, named by an Airflow connection of the
Spark provider's ``spark_connect`` type, read through the provider's `SparkConnectHook`. Connections come from
``AIRFLOW_CONN_*`` variables here (Airflow's environment secrets backend, a real lookup); the servers are
plain sockets of this test (a Spark Connect server reached this way: tests/spark/test_connect_external.py)."""
from __future__ import annotations

import json
import socket
import threading

import pytest

from regionflow.config import RegionflowConfig
from regionflow.core.errors import SpecError
from regionflow.scheduling.hosts import Cluster, Host
from regionflow.spark.launch.attempt import HostLost
from regionflow.spark.launch.backends import SessionBackend, SubmitBackend
from regionflow.spark.servers.connect import SessionServerError
from regionflow.spark.servers.connections import (
    ConnectEndpoint,
    SparkConnectionError,
    connect_endpoint,
    endpoint_of,
)
from regionflow.spark.servers.external import ExternalServer
from regionflow.spark.servers.session_servers import SessionServers, free_port


def define(monkeypatch, conn_id, **fields):
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(fields))


@pytest.mark.parametrize("fields, url, token, use_ssl", [
    ({"host": "spark.example.org", "port": 443, "password": "s3cr;et=/x", "extra": {"use_ssl": True}},
     "sc://spark.example.org:443/;use_ssl=True", "s3cr;et=/x", True),
    ({"host": "10.0.0.7", "port": 15002, "login": "etl"}, "sc://10.0.0.7:15002/;user_id=etl", None, False),
    ({"host": "sc://10.0.0.8"}, "sc://10.0.0.8:15002", None, False),  # no port: Spark Connect's default
])
def test_every_connection_field_maps_to_the_url_and_the_token_stays_out_of_it(monkeypatch, fields, url, token,
                                                                               use_ssl):
    define(monkeypatch, "rf_ext", conn_type="spark_connect", **fields)
    endpoint = connect_endpoint("rf_ext", "ext")
    assert (endpoint.url, endpoint.token, endpoint.use_ssl) == (url, token, use_ssl)
    assert "token" not in endpoint.url and (token is None or token not in repr(endpoint))


@pytest.mark.parametrize("conn_id, fields, message", [
    ("rf_missing", None, r"host 'ext': Airflow connection 'rf_missing' is not defined; add it .*--conn-type "
                         r"spark_connect"),
    ("rf_master", {"conn_type": "spark", "host": "spark://m", "port": 7077},
     r"host 'ext': Airflow connection 'rf_master' is of type 'spark', not 'spark_connect'"),
    ("rf_no_host", {"conn_type": "spark_connect", "port": 15002}, r"Airflow connection 'rf_no_host' has no host"),
])
def test_a_bad_connection_is_one_line_naming_host_and_connection(monkeypatch, conn_id, fields, message):
    if fields is not None:
        define(monkeypatch, conn_id, **fields)
    with pytest.raises(SparkConnectionError, match=message) as caught:
        connect_endpoint(conn_id, "ext")
    assert "\n" not in str(caught.value)


def test_a_hook_url_with_a_path_is_refused():
    with pytest.raises(ValueError, match="sc://host:port"):
        endpoint_of("c", "sc:///;token=x")


def test_the_host_spec_takes_a_conn_id_alone_and_the_submit_backend_refuses_it():
    (host,) = Cluster.parse("ext:slots=2,conn_id=rf_ext")
    assert host.conn_id == "rf_ext" and Host.from_dict(host.to_dict()) == host
    with pytest.raises(SpecError, match="host 'ext': conn_id names a runtime that someone else runs, and master"):
        Cluster.parse("ext:slots=2,conn_id=rf_ext,master=spark://127.0.0.1:7077")
    with pytest.raises(SpecError, match="conn_id.*not an Airflow connection id"):
        Cluster.parse("ext:slots=2,conn_id=a b")
    values = {"hosts": "ext:slots=2,conn_id=rf_ext", "backend": "submit"}
    with pytest.raises(SpecError, match=r"\[regionflow\] hosts: host 'ext' names conn_id 'rf_ext' .* only backend "
                                        r"session uses"):
        RegionflowConfig.from_values(values.get, airflow_home="/tmp")
    assert RegionflowConfig.from_values({**values, "backend": "session"}.get, airflow_home="/tmp").cluster == \
        Cluster.parse("ext:slots=2,conn_id=rf_ext")
    with pytest.raises(SpecError, match=r"^host 'ext' names conn_id 'rf_ext' .* only backend session uses, but the "
                                        r"backend is submit"):
        SubmitBackend({}, []).prepare(None, "/nonexistent", host, 2, None)


@pytest.fixture
def listener():
    """A TCP port that accepts connections and says nothing (not a Spark Connect server)."""
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def accept():
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                connection, _ = server.accept()
                connection.close()
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join()
    server.close()


def external(port, use_ssl=False):
    (host,) = Cluster.parse("ext:slots=2,conn_id=rf_ext")
    return ExternalServer(host, lambda conn_id, name: ConnectEndpoint(conn_id, f"sc://127.0.0.1:{port}", "tok",
                                                                      use_ssl))


def test_an_external_server_is_probed_never_started_or_stopped(listener):
    silent = external(listener)
    assert silent.reachable() and not silent.serving()  # it accepts but speaks no HTTP/2
    assert silent.checked_status().state == "silent"
    with pytest.raises(SessionServerError, match=r"host ext: .*Airflow connection 'rf_ext'"):
        silent.start()
    assert not silent.stop() and not silent.stop_idle() and not silent.stopped_idle
    assert external(listener, use_ssl=True).serving()  # TLS first: a connection is all a probe can see
    down = external(free_port()).status()
    assert down.state == "down" and "not regionflow's to start" in down.cause


def test_the_session_backend_makes_a_bad_connection_a_lost_host_naming_it(monkeypatch, tmp_path):
    servers = SessionServers(Cluster.parse("ext:slots=2,conn_id=rf_gone"), str(tmp_path))
    assert isinstance(servers.server("ext"), ExternalServer)
    with pytest.raises(HostLost, match=r"host ext lost: host 'ext': Airflow connection 'rf_gone' is not defined"):
        SessionBackend(servers, {}).prepare(None, str(tmp_path / "task.json"), servers.cluster.host("ext"), 2, None)
    define(monkeypatch, "rf_gone", conn_type="spark_connect", host="127.0.0.1", port=free_port())
    servers = SessionServers(Cluster.parse("ext:slots=2,conn_id=rf_gone"), str(tmp_path))
    with pytest.raises(HostLost, match=r"host ext lost: nothing answers at the address of Airflow connection "
                                       r"'rf_gone'"):
        SessionBackend(servers, {}).prepare(None, str(tmp_path / "task.json"), servers.cluster.host("ext"), 2, None)
