"""A Spark Connect server runs out of memory mid-attempt (a server of its own with a 512 MiB heap, real
Spark): the attempt fails as its host lost, with the cause read from the server's log, and nothing of the
server is left half alive (its JVM ends on any OutOfMemoryError, the rest of its process group is
stopped), so the host's server starts again cleanly."""
import os

import psutil
import pytest
from connect_checks import serves

from regionflow.core.graph import load_job
from regionflow.core.plan import Plan
from regionflow.spark.launch.targets import parse_cluster
from regionflow.spark.servers.client_env import no_client_marks
from regionflow.spark.servers.session_servers import SessionServers
from regionflow.units.runner import LocalRunner, RunFailed, RunOptions

pytestmark = pytest.mark.timeout(900)
JOB = "rf_test_jobs:oom_job"


def group_members(pgid: int) -> list[int]:
    members = []
    for process in psutil.process_iter(["pid"]):
        try:
            if os.getpgid(process.pid) == pgid:
                members.append(process.pid)
        except (ProcessLookupError, psutil.Error):
            continue
    return members


def test_an_attempt_that_runs_its_server_out_of_memory_fails_with_the_cause_and_the_host_starts_again(tmp_path):
    cluster = parse_cluster("a:slots=1,mem=512m")
    servers = SessionServers(cluster, str(tmp_path / "sessions"), base_port=None)
    server = servers.server("a")
    with no_client_marks():  # later classic Spark programs of this process (and their spark-submits) stay classic
        servers.start()
        try:
            run_out_of_memory(servers, server, cluster, tmp_path)
        finally:
            servers.stop()


def run_out_of_memory(servers, server, cluster, tmp_path):
    pid = server.status().pid
    assert pid is not None
    options = RunOptions(data_dir=str(tmp_path / "data"), cluster=cluster, retries=0, progress=None, servers=servers)
    with pytest.raises(RunFailed) as caught:
        LocalRunner(JOB, Plan(load_job(JOB), "all-blocking"), options).run()
    message = str(caught.value)
    assert "host a lost: its Spark Connect server" in message and "exited" in message
    assert "java.lang.OutOfMemoryError" in message and server.log_path in message
    assert server.status().state == "down" and group_members(pid) == []  # nothing of it lingers
    assert server.start().up  # the host is usable again
    assert serves(server)
