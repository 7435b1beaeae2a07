"""Machines made of Linux network namespaces, for the multi-machine tests and benchmark.

`Machines` turns this machine into several: the process that creates them (and everything it starts,
the embedded Airflow stack and the Spark drivers) is ``m1``, on a private subnet's first address; each
named machine is a network namespace of its own (its own loopback, its own ports, its own listening
sockets) joined to ``m1`` through a veth pair on a bridge. Only addresses of that subnet are used, only
namespaces and links this object created are touched, and all of them are removed at the end, also
after a failure (a context manager; leftovers of a killed earlier run, found by their name prefix and
dead creator pid, are removed first). The file system is shared by every namespace, which is the
shared-mount case of a partition store.

What a machine can suffer: `cut` (its link down, as a pulled cable; `restore` puts it back), `kill_all`
(SIGKILL of every process inside it, as a machine that goes away) and `slow` (a rate limit on its link:
``tc netem`` needs the kernel's sch_netem, which not every kernel has, so the limit is a token bucket,
``tbf``, that every kernel here has).

Needs root (CAP_NET_ADMIN) and iproute2; `unavailable()` says in one line why namespaces cannot be made
here, or None.
"""
from __future__ import annotations

import contextlib
import ipaddress
import os
import shutil
import signal
import subprocess
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

PREFIX = "rfm"  # names made here: rfm<creator pid in base 36>x<2 hex>..., within a link name's 15 characters
SUBNETS = "10.251.{}.0/24"  # one /24 of a private range per creating process: two test runs on one box do not meet


class MachinesError(RuntimeError):
    """A machine could not be made or changed (the ``ip`` command's message is in it)."""


@dataclass(frozen=True)
class Machine:
    """One namespace machine: its name, namespace, address and the two ends of its link."""

    name: str
    namespace: str
    address: str
    outer_link: str  # the veth end on m1's bridge
    inner_link: str  # the veth end inside the namespace

    def command(self, argv: Sequence[str]) -> list[str]:
        """`argv` run inside this machine."""
        return ["ip", "netns", "exec", self.namespace, *argv]


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if check and result.returncode != 0:
        raise MachinesError(f"ip {' '.join(args)}: {result.stderr.strip() or result.stdout.strip()}")
    return result


def unavailable() -> str | None:
    """Why network namespaces cannot be made here (one line), or None when they can."""
    if shutil.which("ip") is None:
        return "the ip command (iproute2) is not installed; apt-get install iproute2"
    if os.geteuid() != 0:
        return f"network namespaces need root (CAP_NET_ADMIN); this runs as uid {os.geteuid()}"
    probe = f"{PREFIX}{_base36(os.getpid())}xprobe"
    made = _ip("netns", "add", probe, check=False)
    if made.returncode != 0:
        return f"cannot create a network namespace: {made.stderr.strip()}"
    _ip("netns", "del", probe, check=False)
    return None


class Machines:
    """Machines `names` (e.g. ``("m2", "m3")``) as network namespaces on `subnet` (default: a /24 of
    10.251.0.0/16 chosen by this process's pid), m1 being this one."""

    def __init__(self, names: Sequence[str], subnet: str | None = None) -> None:
        network = ipaddress.ip_network(subnet or SUBNETS.format(os.getpid() % 250 + 1))
        hosts = list(network.hosts())
        if len(hosts) < len(names) + 1:
            raise MachinesError(f"subnet {subnet} has room for {len(hosts) - 1} machines, not {len(names)}")
        self.prefix_length = network.prefixlen
        self.tag = f"{PREFIX}{_base36(os.getpid())}x{uuid.uuid4().hex[:2]}"
        self.bridge = f"{self.tag}br"
        self.address = str(hosts[0])  # m1's
        self.machines = {name: Machine(name, f"{self.tag}-{name}", str(hosts[index + 1]), f"{self.tag}o{index}",
                                       f"{self.tag}i{index}") for index, name in enumerate(names)}
        self._made = False

    def __getitem__(self, name: str) -> Machine:
        return self.machines[name]

    def __enter__(self) -> Machines:
        remove_leftovers()
        try:
            self._make()
        except BaseException:
            self.remove()
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        self.remove()

    def _make(self) -> None:
        self._made = True
        _ip("link", "add", self.bridge, "type", "bridge")
        _ip("addr", "add", f"{self.address}/{self.prefix_length}", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        for machine in self.machines.values():
            _ip("netns", "add", machine.namespace)
            _ip("link", "add", machine.outer_link, "type", "veth", "peer", "name", machine.inner_link)
            _ip("link", "set", machine.inner_link, "netns", machine.namespace)
            _ip("link", "set", machine.outer_link, "master", self.bridge)
            _ip("link", "set", machine.outer_link, "up")
            inside = ("netns", "exec", machine.namespace, "ip")
            _ip(*inside, "addr", "add", f"{machine.address}/{self.prefix_length}", "dev", machine.inner_link)
            _ip(*inside, "link", "set", machine.inner_link, "up")
            _ip(*inside, "link", "set", "lo", "up")

    # -- what a machine can suffer --

    def cut(self, name: str) -> None:
        """Pull machine `name`'s cable: its link goes down, nothing reaches it or leaves it."""
        _ip("link", "set", self[name].outer_link, "down")

    def restore(self, name: str) -> None:
        """Plug machine `name`'s cable back in, at full speed (no rate limit)."""
        machine = self[name]
        for command in (["tc", "qdisc", "del", "dev", machine.outer_link, "root"],
                        machine.command(["tc", "qdisc", "del", "dev", machine.inner_link, "root"])):
            subprocess.run(command, capture_output=True, text=True, timeout=30)  # none there: nothing to lift
        _ip("link", "set", machine.outer_link, "up")

    def slow(self, name: str, rate: str = "256kbit") -> None:
        """Limit what machine `name` sends and receives to `rate` each way (a token bucket on both ends of
        its link)."""
        machine = self[name]
        # a short queue (1 s of data; TCP backs off on the drops): small packets, such as a host probe's,
        # wait at most that long behind bulk transfers
        shape = ["root", "tbf", "rate", rate, "burst", "16kbit", "latency", "1s"]
        for command in (["tc", "qdisc", "replace", "dev", machine.outer_link, *shape],
                        machine.command(["tc", "qdisc", "replace", "dev", machine.inner_link, *shape])):
            result = subprocess.run(command, capture_output=True, text=True, timeout=30)
            if result.returncode != 0:
                raise MachinesError(f"cannot slow {name}'s link: {result.stderr.strip()}")

    def pids(self, name: str) -> list[int]:
        """The processes running inside machine `name`."""
        result = _ip("netns", "pids", self[name].namespace, check=False)
        return [int(pid) for pid in result.stdout.split()]

    def kill_all(self, name: str) -> list[int]:
        """SIGKILL every process of machine `name` (as a machine that goes away); the pids killed."""
        killed = self.pids(name)
        for pid in killed:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return killed

    def lose(self, name: str) -> list[int]:
        """Machine `name` goes away: every process of it killed, then its cable pulled; the pids killed."""
        killed = self.kill_all(name)
        self.cut(name)
        return killed

    # -- the end --

    def remove(self) -> None:
        """Kill what runs inside the machines, remove their namespaces, links and the bridge."""
        if not self._made:
            return
        for machine in self.machines.values():
            self.kill_all(machine.name)
            _ip("link", "del", machine.outer_link, check=False)  # its peer goes with it
            _ip("netns", "del", machine.namespace, check=False)
        _ip("link", "del", self.bridge, check=False)
        self._made = False


def _base36(number: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    text = ""
    while True:
        number, rest = divmod(number, 36)
        text = digits[rest] + text
        if not number:
            return text


def remove_leftovers() -> None:
    """Remove the namespaces and links of an earlier run whose creating process is gone (killed before it
    could clean up); those of live runs are left alone."""
    def dead_owner(name: str) -> bool:
        digits = name[len(PREFIX):].split("x", 1)[0]
        try:
            return not os.path.exists(f"/proc/{int(digits, 36)}")
        except ValueError:
            return False

    namespaces = [line.split()[0] for line in _ip("netns", "list", check=False).stdout.splitlines() if line.strip()]
    for namespace in namespaces:
        if namespace.startswith(PREFIX) and dead_owner(namespace):
            for pid in _ip("netns", "pids", namespace, check=False).stdout.split():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), signal.SIGKILL)
            _ip("netns", "del", namespace, check=False)
    for line in _ip("-o", "link", "show", check=False).stdout.splitlines():
        parts = line.split(":")
        link = parts[1].strip().split("@")[0] if len(parts) > 1 else ""
        if link.startswith(PREFIX) and dead_owner(link):
            _ip("link", "del", link, check=False)


__all__ = ["SUBNETS", "Machine", "Machines", "MachinesError", "remove_leftovers", "unavailable"]
