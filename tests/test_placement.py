"""regionflow.spark.launch.placement: the checks that the options fit hosts on other machines (pure; no Spark,
no Airflow)."""
from __future__ import annotations

import os
import socket
from collections import namedtuple

import psutil
import pytest

from regionflow.spark.launch import placement
from regionflow.spark.launch.placement import (
    DATA_DIR_SHARED_CHOICES,
    NETWORK_FILESYSTEMS,
    bind_address_problem,
    data_dir_problem,
    driver_address_problem,
    filesystem_type,
    runs_elsewhere,
)
from regionflow.spark.launch.targets import parse_cluster

Partition = namedtuple("Partition", "device mountpoint fstype opts")
Address = namedtuple("Address", "family address netmask broadcast ptp")

LOCAL = "a:slots=2"
LOCAL_K = "a:slots=2,master=local[2]"
LOOPBACK = "lo:slots=2,master=spark://127.0.0.1:7077"
LOCALHOST = "lh:slots=2,master=spark://localhost:7077"
REMOTE = "m2:slots=2,master=spark://10.0.0.2:7077"
CONNECT = "ext:slots=2,conn_id=team_runtime"
YARN = "y:slots=2,master=yarn"
K8S = "k:slots=2,master=k8s://https://10.0.0.9:6443"
HA = '[{"name": "ha", "slots": 1, "master": "spark://127.0.0.1:7077,10.0.0.3:7077"}]'  # a standby elsewhere


def _host(spec: str):
    return next(iter(parse_cluster(spec)))


def _fake_partitions(monkeypatch: pytest.MonkeyPatch, *parts: tuple[str, str]) -> None:
    """psutil.disk_partitions answers `parts` (mount point, fstype); a mount point must exist, as a path is
    looked up through its nearest existing ancestor."""
    records = [Partition(f"dev{i}", mountpoint, fstype, "rw") for i, (mountpoint, fstype) in enumerate(parts)]
    monkeypatch.setattr(placement.psutil, "disk_partitions", lambda all=False: records)


# --- runs_elsewhere ----------------------------------------------------------------------------

@pytest.mark.parametrize("spec", [LOCAL, LOCAL_K, LOOPBACK, LOCALHOST])
def test_local_and_loopback_hosts_run_here(spec: str) -> None:
    assert runs_elsewhere(_host(spec)) is False


@pytest.mark.parametrize("spec", [REMOTE, CONNECT, YARN, K8S, HA])
def test_remote_masters_and_connect_servers_run_elsewhere(spec: str) -> None:
    assert runs_elsewhere(_host(spec)) is True


# --- bind_address_problem ----------------------------------------------------------------------

@pytest.mark.parametrize("address", ["127.0.0.1", "127.0.0.2", "::1"])
def test_loopback_bind_addresses_are_fine(address: str) -> None:
    assert bind_address_problem(address) is None


def test_an_address_of_this_machine_is_fine() -> None:
    own = [entry.address for entries in psutil.net_if_addrs().values() for entry in entries
           if entry.family == socket.AF_INET and not entry.address.startswith("127.")]
    if not own:
        pytest.skip("this machine has no IPv4 address but loopback")
    assert bind_address_problem(own[0]) is None


def test_a_host_name_is_refused() -> None:
    problem = bind_address_problem("scheduler.example.com")
    assert problem is not None
    assert problem.startswith("[regionflow] bind_address = 'scheduler.example.com' is not an IP address")
    assert "give the IP address of one interface of this machine" in problem


@pytest.mark.parametrize("address", ["0.0.0.0", "::"])
def test_the_unspecified_address_is_refused(address: str) -> None:
    assert bind_address_problem(address) == (
        f"[regionflow] bind_address = '{address}' binds every interface; give the address of one interface of "
        f"this machine, e.g. 10.0.0.5")


def test_an_address_no_interface_has_is_refused_and_the_interfaces_listed(monkeypatch: pytest.MonkeyPatch) -> None:
    # fake interfaces: the real ones of a CI machine may hold any address, even one of TEST-NET-1
    interfaces = {"lo": [Address(socket.AF_INET, "127.0.0.1", None, None, None)],
                  "eth0": [Address(socket.AF_INET, "10.0.0.5", None, None, None),
                           Address(socket.AF_INET6, "fe80::1%eth0", None, None, None),
                           Address(getattr(socket, "AF_PACKET", -1), "02:00:00:00:00:01", None, None, None)]}
    monkeypatch.setattr(placement.psutil, "net_if_addrs", lambda: interfaces)
    assert bind_address_problem("192.0.2.77") == (
        "[regionflow] bind_address = '192.0.2.77' is not an address of this machine (its interfaces have "
        "10.0.0.5, fe80::1); give one of them, or 127.0.0.1 when every host's master is on this machine")
    assert bind_address_problem("10.0.0.5") is None
    assert bind_address_problem("fe80::1") is None


def test_without_psutil_a_socket_bind_decides(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(placement, "psutil", None)
    problem = bind_address_problem("203.0.113.77")  # TEST-NET-3: no machine's interface
    assert problem is not None and "is not an address of this machine (its interfaces have none but" in problem
    assert bind_address_problem("127.0.0.1") is None


# --- driver_address_problem --------------------------------------------------------------------

@pytest.mark.parametrize("spec, master", [(REMOTE, "spark://10.0.0.2:7077"), (YARN, "yarn"),
                                          (K8S, "k8s://https://10.0.0.9:6443")])
def test_a_remote_master_with_a_loopback_driver_is_refused(spec: str, master: str) -> None:
    name = spec.split(":")[0]
    cluster = parse_cluster(f"{LOCAL};{CONNECT};{spec}")
    assert driver_address_problem(cluster, "127.0.0.1") == (
        f"[regionflow] hosts: host '{name}' has master {master} on another machine, whose executors connect back "
        f"to the driver on this machine, but [regionflow] bind_address is 127.0.0.1; set bind_address to this "
        f"machine's address on that network")


def test_a_remote_master_with_a_routable_driver_is_fine() -> None:
    assert driver_address_problem(parse_cluster(f"{LOCAL};{REMOTE}"), "10.0.0.5") is None


@pytest.mark.parametrize("spec", [f"{LOCAL};{LOOPBACK};{LOCALHOST}", f"{LOCAL};{CONNECT}"])
def test_local_loopback_and_connect_hosts_need_no_routable_driver(spec: str) -> None:
    assert driver_address_problem(parse_cluster(spec), "127.0.0.1") is None


def test_a_bind_address_that_is_no_ip_is_left_to_bind_address_problem() -> None:
    assert driver_address_problem(parse_cluster(REMOTE), "localhost") is None


# --- filesystem_type ---------------------------------------------------------------------------

def test_the_file_system_of_a_real_path(tmp_path) -> None:
    mounts = {part.mountpoint: part.fstype for part in psutil.disk_partitions(all=True)}
    fstype = filesystem_type(str(tmp_path / "not" / "yet"))
    assert fstype is not None and fstype in mounts.values()
    assert filesystem_type("/") == [p.fstype for p in psutil.disk_partitions(all=True) if p.mountpoint == "/"][-1]


def test_the_longest_mount_point_holding_the_path_wins(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path.resolve()
    for folder in ("data/x", "dat/a", "database", "elsewhere"):
        (root / folder).mkdir(parents=True)
    _fake_partitions(monkeypatch, ("/", "ext4"), (f"{root}/data", "nfs4"), (f"{root}/dat", "xfs"),
                     (f"{root}/data/x/deeper", "tmpfs"))
    assert filesystem_type(f"{root}/data/x") == "nfs4"
    assert filesystem_type(f"{root}/data/x/new") == "nfs4"
    assert filesystem_type(f"{root}/data") == "nfs4"
    assert filesystem_type(f"{root}/database") == "ext4"
    assert filesystem_type(f"{root}/dat/a") == "xfs"
    assert filesystem_type(f"{root}/elsewhere") == "ext4"


def test_the_last_mount_on_a_mount_point_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_partitions(monkeypatch, ("/", "rootfs"), ("/", "overlay"))
    assert filesystem_type("/anything") == "overlay"


def test_symlinks_resolve_to_the_mount_of_their_target(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "target"
    target.mkdir()
    (tmp_path / "link").symlink_to(target)
    _fake_partitions(monkeypatch, ("/", "ext4"), (str(target.resolve()), "nfs"))
    assert filesystem_type(str(tmp_path / "link" / "new" / "dir")) == "nfs"


@pytest.mark.skipif(not os.path.exists("/proc/self/mounts"), reason="reads Linux's mount table")
def test_without_psutil_the_mount_table_is_read(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    expected = filesystem_type(str(tmp_path))
    monkeypatch.setattr(placement, "psutil", None)
    assert filesystem_type(str(tmp_path)) == expected


def test_the_network_file_systems() -> None:
    assert {"nfs", "nfs4", "cifs", "smb3", "ceph", "lustre", "gpfs", "beegfs", "9p", "virtiofs",
            "fuse.sshfs", "fuse.gcsfuse", "fuse.mountpoint-s3", "ocfs2", "gfs2"} <= NETWORK_FILESYSTEMS
    assert not {"ext4", "xfs", "btrfs", "tmpfs", "overlay", "fuse", "fuse.portal"} & NETWORK_FILESYSTEMS


# --- data_dir_problem --------------------------------------------------------------------------

def test_the_options_are_read_through_both_checks(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`RegionflowConfig` applies the checks where the options are read: a remote master refuses a loopback
    bind_address, then a data_dir on this machine's disk; with this machine's address and data_dir_shared = true
    the options load; data_dir_shared takes only its choices."""
    from regionflow.config import RegionflowConfig
    from regionflow.core.errors import SpecError

    # an interface with a routable address and a root on a local disk, whatever this machine has
    monkeypatch.setattr(placement.psutil, "net_if_addrs",
                        lambda: {"eth0": [Address(socket.AF_INET, "10.0.0.5", None, None, None)]})
    _fake_partitions(monkeypatch, ("/", "ext4"))
    values = {"hosts": REMOTE, "data_dir": str(tmp_path / "data")}
    with pytest.raises(SpecError, match=r"host 'm2' has master spark://10.0.0.2:7077 on another machine.*"
                                        r"bind_address is 127.0.0.1"):
        RegionflowConfig.from_values(values.get, airflow_home=str(tmp_path))
    values["bind_address"] = "10.0.0.5"
    with pytest.raises(SpecError, match=r"data_dir = .* is on a file system not known to be shared"):
        RegionflowConfig.from_values(values.get, airflow_home=str(tmp_path))
    values["data_dir_shared"] = "true"
    config = RegionflowConfig.from_values(values.get, airflow_home=str(tmp_path))
    assert (config.bind_address, config.data_dir_shared) == ("10.0.0.5", "true")
    values["data_dir_shared"] = "yes"
    with pytest.raises(SpecError, match=r"data_dir_shared = 'yes'; use one of: "
                                        + ", ".join(DATA_DIR_SHARED_CHOICES)):
        RegionflowConfig.from_values(values.get, airflow_home=str(tmp_path))


def test_a_local_data_dir_with_a_remote_master_is_refused(tmp_path) -> None:
    data_dir = str(tmp_path / "data")
    fstype = filesystem_type(data_dir)
    if fstype in NETWORK_FILESYSTEMS:
        pytest.skip(f"the temporary directory is on {fstype}, a shared file system")
    problem = data_dir_problem(parse_cluster(f"{LOCAL};{REMOTE};{CONNECT}"), data_dir, "auto")
    assert problem is not None
    assert problem.startswith(f"[regionflow] data_dir = '{data_dir}' is on a file system not known to be shared "
                              f"({fstype} mounted at ")
    assert ("but host 'm2' runs elsewhere (master spark://10.0.0.2:7077) and reads and writes partitions there: "
            "put data_dir on a mount every machine shares (NFS, CephFS, Lustre, ...), HDFS or an object store "
            "(hdfs://, s3a://, gs://), or set [regionflow] data_dir_shared = true if this path is the same "
            "directory on every machine") in problem


def test_a_connect_host_is_not_judged_at_load_but_a_master_elsewhere_beside_it_is(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Where a conn_id host's server runs is in its Airflow connection, not in the options: only the master
    that is on another machine is named."""
    _fake_partitions(monkeypatch, ("/", "ext4"))
    assert data_dir_problem(parse_cluster(f"{LOCAL};{CONNECT}"), "file:///srv/rf", "auto") is None
    problem = data_dir_problem(parse_cluster(f"{LOCAL};{CONNECT};{REMOTE}"), "file:///srv/rf", "auto")
    assert problem is not None and "but host 'm2' runs elsewhere (master spark://10.0.0.2:7077)" in problem


def test_a_yarn_host_runs_elsewhere_too(tmp_path) -> None:
    problem = data_dir_problem(parse_cluster(YARN), f"file:{tmp_path}", "auto")
    assert problem is not None and "host 'y' runs elsewhere (master yarn)" in problem


def test_hosts_on_this_machine_need_no_shared_data_dir(tmp_path) -> None:
    assert data_dir_problem(parse_cluster(f"{LOCAL};{LOOPBACK};{LOCALHOST}"), str(tmp_path), "auto") is None


@pytest.mark.parametrize("shared", ["true", "True", " true "])
def test_the_operator_may_vouch_the_path_is_shared(tmp_path, shared: str) -> None:
    assert data_dir_problem(parse_cluster(REMOTE), str(tmp_path), shared) is None


@pytest.mark.parametrize("uri", ["hdfs://nn:8020/rf", "s3a://bucket/rf", "gs://bucket/rf", "abfs://c@a.dfs/rf",
                                 "wasbs://c@a.blob/rf", "viewfs://cluster/rf"])
def test_a_store_every_machine_reaches_is_fine(uri: str) -> None:
    assert data_dir_problem(parse_cluster(REMOTE), uri, "auto") is None


@pytest.mark.parametrize("form", ["{}", "file:{}", "file://{}"])
def test_a_data_dir_on_a_network_file_system_is_fine(tmp_path, monkeypatch: pytest.MonkeyPatch, form: str) -> None:
    # a recorded partition list with an NFS mount (here on a temporary folder): no NFS mount exists on CI
    shared = tmp_path.resolve() / "shared"
    shared.mkdir()
    data_dir = form.format(shared / "rf")
    _fake_partitions(monkeypatch, ("/", "ext4"), (str(shared), "nfs4"), ("/proc", "proc"))
    assert data_dir_problem(parse_cluster(REMOTE), data_dir, "auto") is None
    _fake_partitions(monkeypatch, ("/", "ext4"), (str(shared), "ext4"))
    assert data_dir_problem(parse_cluster(REMOTE), data_dir, "auto") is not None


def test_session_start_refuses_a_bind_address_that_cannot_serve_the_hosts_before_starting_anything(
        tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    """`regionflow session start` applies the same two checks to --bind-address (exit 2, one line, no server)."""
    from regionflow.cli import main

    state = str(tmp_path / "state")
    assert main(["session", "start", "--hosts", "m2:slots=2,master=spark://10.0.0.2:7077", "--state-dir", state,
                 "--bind-address", "0.0.0.0"]) == 2
    assert "--bind-address = '0.0.0.0' binds every interface" in capsys.readouterr().err
    assert main(["session", "start", "--hosts", "m2:slots=2,master=spark://10.0.0.2:7077", "--state-dir", state,
                 "--bind-address", "127.0.0.1"]) == 2
    err = capsys.readouterr().err
    assert "host 'm2' has master spark://10.0.0.2:7077 on another machine" in err and "set bind_address" in err
    assert not os.path.exists(state)


def test_run_refuses_a_loopback_bind_address_for_a_master_elsewhere_before_any_spark_work(
        tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    from regionflow.cli import main

    assert main(["run", "regionflow.examples.orders:job", "--hosts", "m2:slots=2,master=spark://10.0.0.2:7077",
                 "--data-dir", str(tmp_path / "data")]) == 2
    err = capsys.readouterr().err
    assert "--bind-address is 127.0.0.1; set bind_address to this machine's address on that network" in err, err
    assert not (tmp_path / "data").exists()
