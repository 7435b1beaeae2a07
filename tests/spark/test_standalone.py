"""Tests of regionflow.spark.standalone: a real master + worker on 127.0.0.1 and one real
submission to it through RegionSubmission."""
from __future__ import annotations

import json
import os
import subprocess

import pytest

from regionflow.core.resources import ResourceProfile
from regionflow.spark.standalone import StandaloneCluster, StandaloneClusterError, listening_sockets
from regionflow.spark.submit import RegionSubmission, build_submit_kwargs, process_group_members

# Two 512 MiB executors fit the fixture's 1 GiB worker.
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
        StandaloneCluster(work_dir=str(tmp_path)).master_url


def _ss_listeners(pids: set[int]) -> list[str]:
    """Local addresses `ss -ltnp` shows for `pids` (cross-check of the /proc reading)."""
    done = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True)
    return [line.split()[3] for line in done.stdout.splitlines() if any(f"pid={pid}," in line for pid in pids)]


@pytest.mark.timeout(420)
def test_a_region_runs_on_the_standalone_cluster_on_loopback_only(standalone_cluster, tiny_app, tmp_path):
    status = standalone_cluster.status()
    assert status["status"] == "ALIVE" and standalone_cluster.alive_workers() == 1
    assert status["url"] == standalone_cluster.master_url
    assert os.path.isdir(os.path.join(standalone_cluster.work_dir, "logs"))

    out, release = tmp_path / "out.json", tmp_path / "release"
    seen: dict[str, list] = {}

    def snapshot_while_running(line: str) -> None:
        # The app holds after its count (executors up) until `release` exists.
        if "tiny-app: counted" in line:
            pids = {pid for leader in standalone_cluster.pids + [submission.pid]
                    for pid in process_group_members(leader)}
            seen["sockets"] = listening_sockets(pids)
            seen["ss"] = _ss_listeners(pids)
            seen["apps"] = standalone_cluster.status()["activeapps"]
            release.touch()

    kwargs = build_submit_kwargs(application=tiny_app, application_args=[str(out), f"hold:{release}"],
                                 master=standalone_cluster.master_url, slots=2, slot_profile=HALF_GIB_SLOT,
                                 job_conf=None, py_files=[], name="standalone test")
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


@pytest.mark.timeout(180)
def test_a_cluster_that_does_not_come_up_in_time_is_stopped_with_an_error(tmp_path):
    cluster = StandaloneCluster(workers=1, work_dir=str(tmp_path), start_timeout=0.5)
    with pytest.raises(StandaloneClusterError, match="did not come up within") as error:
        cluster.start()
    assert "master" in str(error.value) and cluster.pids == []
    leaders = [int((tmp_path / "pids" / name).read_text()) for name in os.listdir(tmp_path / "pids")]
    assert len(leaders) == 2 and all(process_group_members(pid) == [] for pid in leaders)
