"""Spark master URLs: the one parser (pure Python; no PySpark).

A host's ``master`` says where its Spark runs. Accepted forms:

==============================  ===============================================================
``local``, ``local[k]``,        one JVM on this machine; a submission of n slots runs
``local[*]``                    ``local[n]``
``spark://h:p[,h2:p2...]``      a standalone master (a list: standby masters, Spark's HA form)
``yarn``                        the YARN ResourceManager of ``HADOOP_CONF_DIR`` (client deploy mode)
``k8s://https://h[:p]``         a Kubernetes API server (``k8s://h:p`` means https, as in Spark)
==============================  ===============================================================

The host model validates every ``master`` with `master_problem` when the hosts are parsed; spark-submit
arguments, the standalone master watcher and the Spark Connect servers all read a master through
`Master.parse`. The scheduling layer only ever sees the text and this module's verdict on it.
"""
from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from ...core.errors import SpecError

_LOCAL_RE = re.compile(r"^local(?:\[(\d+|\*)\])?$")
_ENDPOINT_RE = re.compile(r"^([A-Za-z0-9_.\-]+|\[[0-9a-fA-F:]+\]):(\d{1,5})$")
_K8S_RE = re.compile(r"^k8s://(?:(https?)://)?([A-Za-z0-9_.\-]+|\[[0-9a-fA-F:]+\])(?::(\d{1,5}))?/?$")
_LOOPBACK_NAMES = ("localhost", "::1")
FORMS = "local, local[k], local[*], spark://host:port, yarn or k8s://https://host:port"


class MasterKind(enum.Enum):
    LOCAL = "local"
    STANDALONE = "standalone"
    YARN = "yarn"
    KUBERNETES = "kubernetes"


@dataclass(frozen=True)
class Master:
    """A parsed Spark master URL. `endpoints` are a standalone master's (host, port) pairs, or the
    Kubernetes API server's; empty for local and YARN."""

    url: str
    kind: MasterKind
    endpoints: tuple[tuple[str, int], ...] = ()

    @classmethod
    def parse(cls, text: str) -> Master:
        """Parse `text`; a `SpecError` names it and lists the accepted forms."""
        problem = master_problem(text)
        if problem is not None:
            raise SpecError(f"master {text!r} is {problem}")
        url = text.strip()
        if _LOCAL_RE.match(url):
            return cls(url, MasterKind.LOCAL)
        if url == "yarn":
            return cls(url, MasterKind.YARN)
        if url.startswith("spark://"):
            return cls(url, MasterKind.STANDALONE, tuple(_endpoint(part) for part in url[len("spark://"):].split(",")))
        match = _K8S_RE.match(url)
        assert match is not None  # master_problem accepted it
        scheme, host, port = match.group(1) or "https", match.group(2), match.group(3)
        default_port = 443 if scheme == "https" else 80
        normalised = f"k8s://{scheme}://{host}" + (f":{port}" if port else "")
        return cls(normalised, MasterKind.KUBERNETES, ((host.strip("[]"), int(port or default_port)),))

    @property
    def is_local(self) -> bool:
        return self.kind is MasterKind.LOCAL

    @property
    def loopback(self) -> bool:
        """True when everything of this master runs on 127.0.0.1 (local, or a loopback standalone master):
        the driver then binds 127.0.0.1 too."""
        if self.kind is MasterKind.LOCAL:
            return True
        if self.kind is MasterKind.STANDALONE:
            return all(host.startswith("127.") or host in _LOOPBACK_NAMES for host, _ in self.endpoints)
        return False

    def sized(self, slots: int) -> Master:
        """This master for a submission of `slots` slots: ``local[slots]`` for a local master."""
        return Master(f"local[{slots}]", MasterKind.LOCAL) if self.is_local else self


def master_problem(text: object) -> str | None:
    """What is wrong with `text` as a master URL, or None when it is one of the accepted forms."""
    if not isinstance(text, str) or not text.strip():
        return f"empty; use {FORMS}"
    url = text.strip()
    if _LOCAL_RE.match(url) or url == "yarn":
        return None
    if url.startswith("spark://"):
        matches = [_ENDPOINT_RE.match(part.strip()) for part in url[len("spark://"):].split(",")]
        if not all(matches):
            return "not a standalone master URL; write spark://host:port (or spark://h1:p1,h2:p2 for standby masters)"
        return _port_problem([(m.group(1), m.group(2)) for m in matches if m])
    k8s = _K8S_RE.match(url)
    if k8s:
        return _port_problem([(k8s.group(2), k8s.group(3))] if k8s.group(3) else [])
    if url.startswith("k8s://"):
        return "not a Kubernetes master URL; write k8s://https://host:port"
    return f"not a Spark master regionflow runs; use {FORMS}"


def _port_problem(endpoints: list[tuple[str, str]]) -> str | None:
    """The first endpoint whose port is not a TCP port (1 to 65535), or None."""
    for host, port in endpoints:
        if not 1 <= int(port) <= 65535:
            return (f"not a usable master URL: its port {port} (host {host}) is outside 1-65535; give a port "
                    f"from 1 to 65535")
    return None


def _endpoint(part: str) -> tuple[str, int]:
    match = _ENDPOINT_RE.match(part.strip())
    assert match is not None  # master_problem accepted it
    return match.group(1).strip("[]"), int(match.group(2))


__all__ = ["FORMS", "Master", "MasterKind", "master_problem"]
