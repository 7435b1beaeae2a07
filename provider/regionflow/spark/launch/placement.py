"""Which machine each part of the work is on: checks that the options fit hosts on other machines.

A host whose Spark work may run on another machine (a ``conn_id`` host, or a master that is neither
``local[k]`` nor a loopback standalone master) changes two things the options must agree with: the
executors of a driver started here connect back to it, so ``[regionflow] bind_address`` must be an address
of this machine they can reach, not loopback; and those executors read and write region partitions under
``[regionflow] data_dir``, so it must be the same directory on every machine (a shared mount, HDFS or an
object store), not a disk of this machine only. Config loading calls these pure checks (no Airflow, no
Spark; psutil when installed, else the standard library); each returns one line naming the option or host
at fault and the fix, or None.
"""
from __future__ import annotations

import ipaddress
import os
import re
import socket
from typing import Any

from ...core.errors import RegionflowError
from ...scheduling.hosts import Cluster, Host
from ..data.filesystems import is_local_uri, local_path
from .masters import Master
from .targets import spark_target

psutil: Any
try:
    import psutil  # type: ignore[import-untyped,no-redef]  # no stubs installed; Airflow brings it
except ImportError:  # pragma: no cover - psutil comes with Airflow
    psutil = None

DATA_DIR_SHARED_CHOICES = ("auto", "true")

NETWORK_FILESYSTEMS: frozenset[str] = frozenset({
    # NFS, SMB
    "nfs", "nfs4", "cifs", "smb3", "smbfs",
    # cluster and parallel file systems
    "ceph", "fuse.ceph", "fuse.ceph-fuse", "glusterfs", "fuse.glusterfs", "lustre", "gpfs", "beegfs",
    "wekafs", "panfs", "ocfs2", "gfs2", "afs", "orangefs", "quobyte", "fuse.quobyte", "fuse.mfs",
    "fuse.juicefs",
    # a host's directory shared into a VM or container
    "9p", "virtiofs",
    # remote and object stores mounted through FUSE
    "fuse.sshfs", "fuse.s3fs", "fuse.gcsfuse", "fuse.mountpoint-s3", "fuse.blobfuse", "fuse.blobfuse2",
    "fuse.rclone",
})

_SECTION = "[regionflow]"


def runs_elsewhere(host: Host) -> bool:
    """True when `host`'s Spark work may run on another machine: a ``conn_id`` host (a Spark Connect
    server someone else runs, anywhere) or a master that is neither local[k] nor loopback."""
    if host.conn_id is not None:
        return True
    master = _master(host)
    return not (master.is_local or master.loopback)


def bind_address_problem(address: str) -> str | None:
    """What is wrong with `address` as ``[regionflow] bind_address`` (an IP address of one interface of this
    machine; loopback is fine), or None."""
    head = f"{_SECTION} bind_address = {address!r}"
    try:
        ip = ipaddress.ip_address(address.strip())
    except ValueError:
        return (f"{head} is not an IP address; give the IP address of one interface of this machine "
                f"(e.g. 10.0.0.5), not a host name")
    if ip.is_unspecified:
        return f"{head} binds every interface; give the address of one interface of this machine, e.g. 10.0.0.5"
    if ip.is_loopback or _is_local_address(ip):
        return None
    listed = ", ".join(str(own) for own in _own_addresses() if not own.is_loopback) or "none but loopback"
    return (f"{head} is not an address of this machine (its interfaces have {listed}); give one of them, "
            f"or 127.0.0.1 when every host's master is on this machine")


def bind_address_problems(cluster: Cluster, address: str, *, drivers_here: bool = True) -> str | None:
    """`bind_address_problem`, then, when the drivers of `cluster`'s hosts run here (the session backend;
    `drivers_here`), `driver_address_problem`: the one check of ``[regionflow] bind_address`` and of
    ``--bind-address``."""
    return bind_address_problem(address) or (driver_address_problem(cluster, address) if drivers_here else None)


def driver_address_problem(cluster: Cluster, bind_address: str) -> str | None:
    """A host whose master is on other machines (standalone, YARN, Kubernetes) while the drivers started
    here bind a loopback `bind_address`, which those executors cannot reach; else None. ``conn_id`` hosts
    are not concerned: their driver is someone else's."""
    try:
        loopback = ipaddress.ip_address(bind_address.strip()).is_loopback
    except ValueError:
        return None  # bind_address_problem's to report
    if not loopback:
        return None
    for host in cluster:
        if _master_elsewhere(host):
            return (f"{_SECTION} hosts: host {host.name!r} has master {_master(host).url} on another machine, "
                    f"whose executors connect back to the driver on this machine, but {_SECTION} bind_address is "
                    f"{bind_address.strip()}; set bind_address to this machine's address on that network")
    return None


def filesystem_type(path: str) -> str | None:
    """The file system type (``ext4``, ``nfs4``, ...) of the mount holding `path` (the longest mount point
    above the real path of its nearest existing ancestor), or None when the mounts cannot be read."""
    mount = _mount_of(path)
    return mount[1] if mount is not None else None


def data_dir_problem(cluster: Cluster, data_dir: str, shared: str) -> str | None:
    """``[regionflow] data_dir`` on a file system of this machine only while a host runs elsewhere (its
    executors read and write partitions there); else None. `shared` is ``[regionflow] data_dir_shared``:
    ``true`` (the operator vouches it is the same directory everywhere) turns the check off. A ``conn_id``
    host is not judged here: where its server runs is in an Airflow connection, read when an attempt runs
    (one on this machine, ``sc://127.0.0.1``, is common), not when the options are read."""
    if shared.strip().lower() == "true":
        return None
    remote = next((host for host in cluster if _master_elsewhere(host)), None)
    if remote is None:
        return None
    if not is_local_uri(data_dir.strip()):
        return None  # hdfs://, s3a://, ...: the same store from every machine
    try:
        path = local_path(data_dir.strip())
    except RegionflowError:
        return None  # file://otherhost/...: the partition store says what is wrong with it, when used
    mount = _mount_of(path)
    if mount is None or mount[1] in NETWORK_FILESYSTEMS:
        return None
    mountpoint, fstype = mount
    where = f"master {_master(remote).url}"
    return (f"{_SECTION} data_dir = {data_dir!r} is on a file system not known to be shared ({fstype} mounted at "
            f"{mountpoint}), but host {remote.name!r} runs elsewhere ({where}) and reads and writes partitions "
            f"there: put data_dir on a mount every machine shares (NFS, CephFS, Lustre, ...), HDFS or an object "
            f"store (hdfs://, s3a://, gs://), or set {_SECTION} data_dir_shared = true if this path is the same "
            f"directory on every machine")


# --- helpers -----------------------------------------------------------------------------------

def _master(host: Host) -> Master:
    return Master.parse(spark_target(host).master)


def _master_elsewhere(host: Host) -> bool:
    """A host whose own master (not a ``conn_id`` server) is on another machine."""
    return host.conn_id is None and runs_elsewhere(host)


def _mount_of(path: str) -> tuple[str, str] | None:
    """(mount point, file system type) of the longest mount point holding the real path of `path`'s
    nearest existing ancestor; the last mounted wins among equal mount points (it covers the others)."""
    real = os.path.realpath(_existing_ancestor(path))
    best: tuple[str, str] | None = None
    for mountpoint, fstype in _mounts():
        if _contains(mountpoint, real) and (best is None or len(mountpoint) >= len(best[0])):
            best = (mountpoint, fstype)
    return best


def _existing_ancestor(path: str) -> str:
    current = os.path.abspath(os.path.expanduser(path))
    while not os.path.exists(current) and os.path.dirname(current) != current:
        current = os.path.dirname(current)
    return current


def _contains(mountpoint: str, path: str) -> bool:
    root = mountpoint.rstrip(os.sep) or os.sep
    return path == root or path.startswith(root if root == os.sep else root + os.sep)


def _mounts() -> list[tuple[str, str]]:
    """(mount point, file system type) of every mount, in mount order: psutil's, else /proc/self/mounts."""
    if psutil is not None:
        return [(part.mountpoint, part.fstype) for part in psutil.disk_partitions(all=True)]
    try:
        with open("/proc/self/mounts", encoding="utf-8", errors="replace") as mounts:
            fields = [line.split() for line in mounts]
    except OSError:
        return []
    return [(_unescape(f[1]), f[2]) for f in fields if len(f) >= 3]


def _unescape(field: str) -> str:
    """A /proc/self/mounts field with its octal escapes (``\\040`` for a space) decoded."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def _own_addresses() -> list[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    """The IP addresses of this machine's interfaces (psutil), empty without psutil."""
    if psutil is None:
        return []
    found = []
    for addresses in psutil.net_if_addrs().values():
        for entry in addresses:
            if entry.family in (socket.AF_INET, socket.AF_INET6):
                found.append(ipaddress.ip_address(str(entry.address).split("%")[0]))
    return list(dict.fromkeys(found))  # an address on two interfaces, once


def _is_local_address(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """True when an interface of this machine has `ip`: psutil's list, else whether a socket binds it."""
    if psutil is not None:
        return ipaddress.ip_address(str(ip).split("%")[0]) in _own_addresses()
    family = socket.AF_INET6 if ip.version == 6 else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.bind((str(ip), 0))
    except OSError:
        return False
    return True


__all__ = [
    "DATA_DIR_SHARED_CHOICES",
    "NETWORK_FILESYSTEMS",
    "bind_address_problem",
    "bind_address_problems",
    "data_dir_problem",
    "driver_address_problem",
    "filesystem_type",
    "runs_elsewhere",
]
