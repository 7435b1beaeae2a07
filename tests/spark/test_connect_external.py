"""A Spark Connect server regionflow does not own, reached through an Airflow connection (a host's
``conn_id``): `regionflow run` of the example job on a host ``ext:slots=2,conn_id=rf_external`` whose
connection (``AIRFLOW_CONN_RF_EXTERNAL``: host, port, the server's token as the password) names the test
session's Spark Connect server, as another team's server would be named. The run gives the reference's
rows, leaves the server running (not regionflow's to stop), and no line of it shows the token."""
from __future__ import annotations

import json

from regionflow.core.graph import load_job
from regionflow.core.plan import Plan
from regionflow.scheduling.hosts import Cluster
from regionflow.spark.servers.client_env import no_client_marks
from regionflow.spark.servers.external import ExternalServer
from regionflow.units.runner import LocalRunner, RunOptions

ORDERS = "regionflow.examples.orders:job"


def test_a_host_named_by_a_spark_connect_connection_runs_the_job_on_that_server(event_servers, orders_reference,
                                                                                tmp_path, monkeypatch):
    servers, _ = event_servers
    (owned,) = servers.servers.values()  # the session's server: started and stopped by the test session
    assert owned.token
    monkeypatch.setenv("AIRFLOW_CONN_RF_EXTERNAL", json.dumps(
        {"conn_type": "spark_connect", "host": "127.0.0.1", "port": owned.port, "password": owned.token}))
    lines: list[str] = []
    options = RunOptions(data_dir=str(tmp_path), cluster=Cluster.parse("ext:slots=2,conn_id=rf_external"),
                         progress=lines.append, backend="session")
    with no_client_marks():
        runner = LocalRunner(ORDERS, Plan(load_job(ORDERS), "all-blocking"), options)
        summary = runner.run()
    totals = summary.sinks["totals"]
    assert (totals["rows"], totals["checksum"]) == (orders_reference["rows"], orders_reference["checksum"])
    assert {unit.host for unit in summary.units} == {"ext"} and all(unit.attempts == 1 for unit in summary.units)
    server = runner.servers.server("ext")
    assert isinstance(server, ExternalServer) and server.url == f"sc://127.0.0.1:{owned.port}"
    assert owned.checked_status().state == "up"  # the run did not stop someone else's server
    logs = "\n".join(lines) + "".join(open(path, encoding="utf-8").read() for path in runner.log_paths.values())
    assert owned.token not in logs and f"127.0.0.1:{owned.port}" in logs
