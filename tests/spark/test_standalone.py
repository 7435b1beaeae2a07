"""Tests of regionflow.spark.servers.standalone: a real master + worker on 127.0.0.1 and real submissions to
it through RegionSubmission, one of them losing its host mid-job (HostWatcher). Every cluster
authenticates (``spark.authenticate``, a secret per start): applications present the secret from the
cluster's properties file, one without it (or with another) is refused, and the secret is on no
command line and in no log."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import time

import pytest
from stopping import pause_group, resume_group

from regionflow.core.graph import load_job
from regionflow.core.plan import Plan
from regionflow.core.resources import ResourceProfile
from regionflow.examples.orders import CUSTOMERS, ORDER_COUNT
from regionflow.processes import (
    ProcessInfo,
    descendants,
    live_processes,
    process_group_members,
    signal_pids,
    start_ticks,
    wait_until,
)
from regionflow.scheduling.hosts import Cluster
from regionflow.spark.launch.submit import RegionSubmission
from regionflow.spark.launch.submit_args import build_submit_kwargs
from regionflow.spark.launch.watch import HostWatcher, explain, standalone_masters
from regionflow.spark.servers.auth import authenticate_properties, new_secret, write_properties
from regionflow.spark.servers.connect import ConnectServer
from regionflow.spark.servers.health import SparkHostProbe
from regionflow.spark.servers.reachability import answers, any_speaks_spark_rpc, speaks_spark_rpc
from regionflow.spark.servers.session_servers import free_port
from regionflow.spark.servers.standalone import StandaloneCluster, StandaloneClusterError, listening_sockets
from regionflow.units.runner import LocalRunner, RunOptions

# Two 512 MiB executors fit one of the fixture's 1 GiB workers.
HALF_GIB_SLOT = ResourceProfile.of(cpu=1, heap_mib=512)


@pytest.mark.parametrize("options, fragment", [
    ({"workers": 0}, "workers"),
    ({"cores_per_worker": True}, "cores_per_worker"),
    ({"memory_per_worker": "lots"}, "memory_per_worker"),
])
def test_bad_cluster_sizes_are_errors(options, fragment):
    with pytest.raises(StandaloneClusterError, match=fragment):
        StandaloneCluster(**options)


def test_an_unstarted_cluster_has_no_master_url(tmp_path):
    with pytest.raises(StandaloneClusterError, match="not started"):
        _ = StandaloneCluster(work_dir=str(tmp_path)).master_url


def _secret(cluster: StandaloneCluster) -> str:
    with open(cluster.app_properties_path, encoding="utf-8") as handle:
        return handle.read().split("spark.authenticate.secret=", 1)[1].strip()


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().replace(b"\0", b" ").decode("utf-8", "replace")
    except OSError:
        return ""


def _files_holding(text: str, folder: str) -> list[str]:
    """Files under `folder` (logs, executors' stdout and stderr) that contain `text`."""
    found = []
    for directory, _, names in os.walk(folder):
        for name in names:
            path = os.path.join(directory, name)
            with open(path, "rb") as handle:
                if text.encode() in handle.read():
                    found.append(path)
    return found


def _ss_listeners(pids: set[int]) -> list[str]:
    """Local addresses `ss -ltnp` shows for `pids` (cross-check of the /proc reading)."""
    done = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True)
    return [line.split()[3] for line in done.stdout.splitlines() if any(f"pid={pid}," in line for pid in pids)]


@pytest.mark.timeout(420)
def test_a_region_runs_on_the_standalone_cluster_on_loopback_only(standalone_cluster, tiny_app, tmp_path):
    status = standalone_cluster.status()
    assert status["status"] == "ALIVE" and standalone_cluster.alive_workers() == 2
    assert status["url"] == standalone_cluster.master_url
    assert os.path.isdir(os.path.join(standalone_cluster.work_dir, "logs"))

    out, release = tmp_path / "out.json", tmp_path / "release"
    seen: dict[str, list] = {"lines": []}

    def snapshot_while_running(line: str) -> None:
        seen["lines"].append(line)
        # The app holds after its count (executors up) until `release` exists.
        if "tiny-app: counted" in line:
            pids = {pid for leader in standalone_cluster.pids + [submission.pid]
                    for pid in process_group_members(leader)}
            seen["sockets"] = listening_sockets(pids)
            seen["ss"] = _ss_listeners(pids)
            seen["apps"] = standalone_cluster.status()["activeapps"]
            # master, workers, executors, spark-submit's JVM, the Python driver and every Python worker
            every = {pid for leader in standalone_cluster.pids + [submission.pid] for pid in _process_tree(leader)}
            seen["cmdlines"] = [_cmdline(pid) for pid in every]
            release.touch()

    kwargs = build_submit_kwargs(application=tiny_app, application_args=[str(out), f"hold:{release}"],
                                 master=standalone_cluster.master_url, slots=2, slot_profile=HALF_GIB_SLOT,
                                 job_conf=None, py_files=[], name="standalone test",
                                 properties_file=standalone_cluster.app_properties_path)
    submission = RegionSubmission(tiny_app, kwargs, on_line=snapshot_while_running)
    result = submission.run()

    assert result.ok, result.describe() + "\n" + standalone_cluster.log_tails()
    written = json.loads(out.read_text())
    assert written["count"] == 1000 and written["master"] == standalone_cluster.master_url
    (app,) = seen["apps"]
    assert app["name"] == "regionflow standalone test" and app["cores"] == 2
    assert len(seen["sockets"]) >= 4  # master, worker, driver, executors
    assert all(sock.is_loopback for sock in seen["sockets"]), seen["sockets"]
    assert seen["ss"] and all(address.startswith(("127.", "[::ffff:127.", "[::1]")) for address in seen["ss"])

    # the secret: in two 0600 files, on no command line (the app's names the file), in no output or log
    secret = _secret(standalone_cluster)
    daemon_conf = os.path.join(standalone_cluster.work_dir, "conf", "spark-defaults.conf")
    for path in (standalone_cluster.app_properties_path, daemon_conf):
        assert os.stat(path).st_mode & 0o777 == 0o600 and secret in open(path, encoding="utf-8").read(), path
    assert len(seen["cmdlines"]) >= 6, seen["cmdlines"]  # master, 2 workers, 2 executors, driver JVM and Python
    assert not [line for line in seen["cmdlines"] if secret in line]
    assert any(f"--properties-file {standalone_cluster.app_properties_path}" in line for line in seen["cmdlines"])
    assert not [line for line in seen["lines"] if secret in line]
    assert _files_holding(secret, os.path.join(standalone_cluster.work_dir, "logs")) == []
    assert _files_holding(secret, os.path.join(standalone_cluster.work_dir, "work")) == []


@pytest.mark.timeout(300)
def test_an_application_without_the_secret_or_with_another_is_refused(standalone_cluster, tiny_app, tmp_path):
    """The master registers no application that does not present this start's secret. Spark's driver
    tries a refused registration three times, 20 s apart (fixed in its StandaloneAppClient), before it
    gives up; the test ends each application at its first refusal, which comes within seconds of its
    start, and the master never lists it."""
    other = write_properties(str(tmp_path / "other.properties"), authenticate_properties(new_secret()))
    for label, properties_file, cause in (
        ("no secret", None, "Expected SaslMessage, received something else"),
        ("another secret", other, "DIGEST-MD5: digest response format violation. Mismatched response."),
    ):
        out = tmp_path / f"{label}.json"
        kwargs = build_submit_kwargs(application=tiny_app, application_args=[str(out), "count"],
                                     master=standalone_cluster.master_url, slots=1, slot_profile=HALF_GIB_SLOT,
                                     job_conf=None, py_files=[], name=f"refused {label}",
                                     properties_file=properties_file)
        result, lines, waited = _run_until(tiny_app, kwargs, cause)
        assert not result.ok and not out.exists(), result.describe()
        refusal = "\n".join(lines)
        assert "Failed to connect to master" in refusal and cause in refusal, refusal[-4000:]
        assert waited < 60, f"{label}: ended after {waited:.0f} s, not at the first refusal"  # Spark gives up at ~70 s
    status = standalone_cluster.status()
    names = [app["name"] for app in status["activeapps"] + status["completedapps"]]
    assert not [name for name in names if name.startswith("regionflow refused")], names


def _run_until(application: str, kwargs: dict, text: str) -> tuple:
    """Run the submission of `kwargs`, killing it at its first output line holding `text`: (result,
    output lines, seconds it ran)."""
    lines: list[str] = []

    def end_at_the_text(line: str) -> None:
        lines.append(line)
        if text in line:
            submission.kill(wait=False)

    submission = RegionSubmission(application, kwargs, on_line=end_at_the_text)
    began = time.monotonic()
    result = submission.run()
    return result, lines, time.monotonic() - began


@pytest.mark.timeout(600)
def test_a_connect_server_of_a_host_on_the_master_presents_the_secret(standalone_cluster, tmp_path):
    """A Spark Connect server whose host is on the cluster (its `host_fields`) loads the host's properties
    file: the master registers it, its start's probe session runs a job on the cluster's executors, and the
    secret is on none of its command lines (spark-submit's names the file)."""
    (host,) = Cluster.parse(f"rf:slots=1,mem=512m,{standalone_cluster.host_fields}")
    server = ConnectServer(host, free_port(), str(tmp_path / "sessions"))
    try:
        status = server.start()  # up once a client session counted a row on the cluster
        (app,) = [app for app in standalone_cluster.status()["activeapps"] if app["name"] == "regionflow session rf"]
        cmdlines = [_cmdline(pid) for pid in _process_tree(status.pid)]
    finally:
        server.stop()
    assert status.up and app["cores"] == 1 and app["memoryperexecutor"] == 512, app
    secret = _secret(standalone_cluster)
    assert not [line for line in cmdlines if secret in line]
    assert any(f"--properties-file {standalone_cluster.app_properties_path}" in line for line in cmdlines), cmdlines


@pytest.mark.timeout(180)
def test_a_cluster_that_does_not_come_up_in_time_is_stopped_with_an_error(tmp_path):
    cluster = StandaloneCluster(workers=1, work_dir=str(tmp_path), start_timeout=0.5)
    with pytest.raises(StandaloneClusterError, match="did not come up within") as error:
        cluster.start()
    assert "master" in str(error.value) and cluster.pids == []
    leaders = [int((tmp_path / "pids" / name).read_text()) for name in os.listdir(tmp_path / "pids")]
    assert len(leaders) == 2 and all(process_group_members(pid) == [] for pid in leaders)


@pytest.mark.timeout(300)
def test_an_attempt_whose_standalone_host_is_lost_is_killed_with_the_reason(tiny_app, tmp_path):
    """Spark's driver waits forever for a lost master and worker; the HostWatcher ends the attempt."""
    out, release = tmp_path / "out.json", tmp_path / "release"
    cluster = StandaloneCluster(workers=1, cores_per_worker=2, memory_per_worker="1g",
                                work_dir=str(tmp_path / "cluster")).start()
    master_url = cluster.master_url
    lost_at: list[float] = []

    def lose_the_host_after_the_first_job(line: str) -> None:
        if "tiny-app: counted" in line and not lost_at:
            lost_at.append(time.monotonic())
            cluster.vanish()
            release.touch()

    try:
        kwargs = build_submit_kwargs(application=tiny_app, application_args=[str(out), f"twice:{release}"],
                                     master=master_url, slots=2, slot_profile=HALF_GIB_SLOT,
                                     job_conf=None, py_files=[], name="host loss test",
                                     properties_file=cluster.app_properties_path)
        submission = RegionSubmission(tiny_app, kwargs, on_line=lose_the_host_after_the_first_job)
        with HostWatcher(submission.master, submission, timeout=5, interval=0.5) as watcher:
            result = submission.run()
    finally:
        cluster.stop()
    assert lost_at, result.describe()
    assert not os.path.exists(cluster.app_properties_path)  # a stopped cluster leaves no secret behind
    assert os.listdir(tmp_path / "cluster" / "conf") == []
    assert not result.ok and result.killed and not out.exists()
    assert watcher.lost and master_url in watcher.lost and "did not answer for 5 s" in watcher.lost
    assert time.monotonic() - lost_at[0] < 60  # ended by the watcher, not by waiting
    assert explain(result, watcher).startswith("host lost: master spark://127.0.0.1:")


def test_only_standalone_masters_are_watched():
    assert standalone_masters("local[2]") == [] and standalone_masters(None) == []
    assert standalone_masters("spark://127.0.0.1:7077,[::1]:7078") == [("127.0.0.1", 7077), ("::1", 7078)]
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()  # holds the port, answers no RPC request
        port = listener.getsockname()[1]
        assert not any_speaks_spark_rpc([("127.0.0.1", port)], timeout=0.5)
    assert not any_speaks_spark_rpc([("127.0.0.1", port)])


def test_a_stopped_master_counts_as_lost_although_its_port_still_accepts(standalone_cluster):
    """The real master, which authenticates, answers the probe's stream request (a stream failure: it
    serves no such file) without an error in its log (an RPC request from a client without the secret
    would log one with a stack trace, as a failed authentication); stopped with SIGSTOP, as a hung master,
    its port still accepts connections but the probe gets no answer, so the lost-host probe (and the
    HostWatcher, which asks the same) says lost; continued, it answers again."""
    master_log = os.path.join(standalone_cluster.work_dir, "logs", "master.out")
    log_before = os.path.getsize(master_log)
    [(host, port)] = standalone_masters(standalone_cluster.master_url)
    probe = SparkHostProbe(Cluster.parse(f"a:slots=1,{standalone_cluster.host_fields}"), servers=None)
    assert speaks_spark_rpc(host, port) and probe.answers("a") is True
    master = standalone_cluster.pids[0]  # the master JVM, leader of its process group
    pause_group(master)
    try:
        assert answers(host, port)  # the kernel accepts for the stopped process
        assert not speaks_spark_rpc(host, port, timeout=2.0)
        assert probe.answers("a") is False
    finally:
        resume_group(master)
    assert wait_until(lambda: speaks_spark_rpc(host, port), 30)
    assert probe.answers("a") is True
    with open(master_log, encoding="utf-8") as log:
        log.seek(log_before)
        text = log.read()  # what the master logged during this test
    assert not [word for word in ("regionflow-liveness-probe", "Connection reset", "ERROR", "Exception")
                if word in text], text[-3000:]


@pytest.mark.timeout(420)
def test_a_vertex_asking_2_cores_and_1_gib_gets_an_executor_of_that_size(standalone_cluster, tmp_path):
    """The host's slot offers 2 cores and 2 GiB, more than the fixture's 1 GiB worker has: an application
    sized from the host would never get an executor. Sized from the request it runs, and Spark's master
    (its JSON, not regionflow's conf) reports 2 cores and 1024 MiB per executor."""
    cluster = Cluster.parse(f"big:slots=1,cpu=2,mem=2g,{standalone_cluster.host_fields}")
    job = "rf_test_jobs:sized_job"
    summary = LocalRunner(job, Plan(load_job(job)), RunOptions(data_dir=str(tmp_path), cluster=cluster,
                                                               progress=None, backend="submit")).run()
    assert summary.sinks["sized"]["rows"] == ORDER_COUNT
    apps = [app for app in standalone_cluster.status()["completedapps"] if app["name"].startswith("regionflow sized")]
    assert len(apps) == 1, standalone_cluster.status()["completedapps"]
    assert (apps[0]["cores"], apps[0]["memoryperexecutor"]) == (2, 1024), apps[0]


@pytest.mark.timeout(420)
def test_a_grant_over_two_hosts_of_one_master_gets_an_executor_on_each_worker(standalone_cluster, tmp_path):
    """Hosts w1 and w2 share the standalone master, one 1 GiB slot each. The region's 2-slot grant spans
    both: one application with two 1024 MiB executors, which only fit one per worker; Spark's workers
    (their work directories, not regionflow's records) show an executor of the application on each."""
    fields = standalone_cluster.host_fields
    cluster = Cluster.parse(f"w1:slots=1,{fields};w2:slots=1,{fields}")
    job = "rf_test_jobs:spread_job"
    summary = LocalRunner(job, Plan(load_job(job), "all-pipelined"),
                          RunOptions(data_dir=str(tmp_path), cluster=cluster, progress=None, backend="submit")).run()
    assert summary.sinks["counted"]["rows"] == CUSTOMERS
    (unit,) = summary.units
    assert (unit.host, unit.slots) == ("w1", 2)
    (app,) = [app for app in standalone_cluster.status()["completedapps"]
              if app["name"].startswith("regionflow spread") and app["cores"] == 2 and app["memoryperexecutor"] == 1024]
    work = os.path.join(standalone_cluster.work_dir, "work")
    executors = {worker: os.listdir(os.path.join(work, worker, app["id"]))
                 for worker in sorted(os.listdir(work)) if os.path.isdir(os.path.join(work, worker, app["id"]))}
    assert list(executors) == ["worker-0", "worker-1"] and all(len(ids) == 1 for ids in executors.values()), executors


def _sink_rows(path: str) -> list[tuple]:
    """Every row of the Parquet files Spark readers see under `path` (names not starting with '_' or
    '.'), sorted: a partition published twice shows up as duplicate rows."""
    import pyarrow.parquet as pq

    rows: list[tuple] = []
    for directory, subdirs, files in os.walk(path):
        subdirs[:] = [name for name in subdirs if not name.startswith(("_", "."))]
        for name in files:
            if not name.startswith(("_", ".")):
                table = pq.read_table(os.path.join(directory, name))
                rows.extend(zip(*(table.column(c).to_pylist() for c in sorted(table.column_names)), strict=True))
    return sorted(rows)


def _process_tree(root: int) -> set[int]:
    """`root` and every live process below it: a standalone worker's JVM, the executor JVMs it started
    and their PySpark daemons and Python workers (which run in process groups of their own)."""
    table = {pid: ProcessInfo(pid, parent, group, False) for pid, parent, group in live_processes()}
    return ({root} if root in table else set()) | descendants(table, {root})


def _held_tasks(hold_dir: str) -> set[int]:
    return {int(name.split("-", 1)[1]) for name in os.listdir(hold_dir) if name.startswith("task-")}


@pytest.mark.timeout(420)
def test_a_worker_killed_mid_stage_leaves_the_region_exact(tmp_path, monkeypatch, event_servers):
    """A dedicated cluster of two 1-core, 1 GiB workers; hosts w1 and w2 share its master, so the region's
    2-slot grant is one application with an executor on each worker. While both executors hold a task of
    the stage that writes the sink, kill -9 worker-1's whole process tree (the worker JVM, its executor
    JVM, that executor's PySpark daemon and Python workers). Spark sees the executor lost and finishes on
    the surviving one: the region commits in its one attempt, and the published sink holds exactly the
    rows of an uninterrupted plain PySpark run of the same job, none twice, one file per subtask, with
    nothing half-written visible and no attempt output left outside the committed unit."""
    from rf_test_jobs import HOLD_DIR_VARIABLE, HOLD_RELEASE

    from regionflow.spark.servers.client_env import no_client_marks
    from regionflow.units.reference import run_reference

    job = "rf_test_jobs:held_spread_job"
    # No adaptive execution: the 4 shuffle partitions of the count stay 4, coalesced into 2 sink-writing
    # tasks, one per executor (adaptive execution would merge the tiny partitions into one task).
    conf = {"spark.sql.adaptive.enabled": "false"}
    reference_hold = tmp_path / "reference-hold"
    reference_hold.mkdir()
    (reference_hold / HOLD_RELEASE).touch()  # the reference run does not hold
    monkeypatch.setenv(HOLD_DIR_VARIABLE, str(reference_hold))
    servers, _ = event_servers  # the plain run in a client session of the session's server (a spark-submit: ~25 s)
    with no_client_marks():
        reference = run_reference(job, Plan(load_job(job), "all-pipelined"),
                                  RunOptions(data_dir=str(tmp_path / "reference"), cluster=servers.cluster,
                                             progress=None, servers=servers))

    hold = tmp_path / "hold"
    hold.mkdir()
    monkeypatch.setenv(HOLD_DIR_VARIABLE, str(hold))
    cluster = StandaloneCluster(workers=2, cores_per_worker=1, memory_per_worker="1g",
                                work_dir=str(tmp_path / "cluster")).start()
    killed: dict[str, object] = {}

    def kill_worker_1_once_both_executors_hold_a_task() -> None:
        workers = {role: int((tmp_path / "cluster" / "pids" / f"{role}.pid").read_text())
                   for role in ("worker-0", "worker-1")}

        def holding() -> dict[str, set[int]]:
            tasks = _held_tasks(str(hold))
            return {role: tasks & _process_tree(pid) for role, pid in workers.items()}

        if not wait_until(lambda: all(holding().values()), 240):
            killed["error"] = f"no task held on each worker: {holding()}"
        else:
            victims = _process_tree(workers["worker-1"])
            killed.update(held=holding(), victims=victims)
            signal_pids(victims, signal.SIGKILL)  # no grace: the machine went away
            wait_until(lambda: all(start_ticks(pid) is None for pid in victims), 10)
            killed["survivors"] = [pid for pid in victims if start_ticks(pid) is not None]
        (hold / HOLD_RELEASE).touch()

    killer = threading.Thread(target=kill_worker_1_once_both_executors_hold_a_task, daemon=True)
    try:
        hosts = Cluster.parse(f"w1:slots=1,{cluster.host_fields};w2:slots=1,{cluster.host_fields}")
        killer.start()
        summary = LocalRunner(job, Plan(load_job(job), "all-pipelined"),
                              RunOptions(data_dir=str(tmp_path / "data"), cluster=hosts, progress=None,
                                         backend="submit", retries=1, job_conf=conf)).run()
        killer.join(30)
        workers_after = {worker["id"]: worker["state"] for worker in cluster.status()["workers"]}
    finally:
        (hold / HOLD_RELEASE).touch()
        cluster.stop()

    assert "error" not in killed, killed.get("error")
    assert len(killed["victims"]) >= 4 and killed["survivors"] == [], killed  # worker, executor, its Pythons
    assert sorted(workers_after.values()) == ["ALIVE", "DEAD"], workers_after  # the master saw worker-1 go
    (unit,) = summary.units
    assert (unit.host, unit.slots, unit.attempts) == ("w1", 2, 1)
    assert summary.sinks["counted"]["rows"] == reference.sinks["counted"]["rows"] == CUSTOMERS
    assert summary.sinks["counted"]["checksum"] == reference.sinks["counted"]["checksum"]
    published = summary.sinks["counted"]["path"]
    rows = _sink_rows(published)
    assert rows == _sink_rows(reference.sinks["counted"]["path"]) and len(set(rows)) == len(rows) == CUSTOMERS
    leftovers = [os.path.join(d, n) for d, subdirs, files in os.walk(published) for n in subdirs + files
                 if n.startswith(("_temporary", ".")) and not n.endswith(".crc")]
    assert leftovers == [], leftovers  # nothing half-written left in the published sink
    visible = [name for name in os.listdir(published) if not name.startswith(("_", "."))]
    assert len(visible) == load_job(job).vertices["counted"].parallelism, visible  # one file per subtask
    [run_dir] = [path for path in (tmp_path / "data").iterdir() if path.name.startswith("run-")]
    assert [p.name for p in (run_dir / "_attempts").glob("*/*")] == []  # no attempt output outside the unit
    [driver_log] = (run_dir / "_tasks" / "logs").glob("*.log")
    assert "Lost executor" in driver_log.read_text() and "worker lost" in driver_log.read_text()  # Spark saw it
