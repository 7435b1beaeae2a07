"""Is a lost host back? What the executor's `LostHostWatch` asks of a host blocklisted for every run.

A host is lost when the thing an attempt needs there stops answering (see `RegionOperator`): with
``[regionflow] backend = session`` its Spark Connect server, with a ``spark://`` master that master.
The same things are probed here, with the same checks (`reachability`):

- session backend: the host's server serves, answering an HTTP/2 handshake (a stopped or hung server
  that still holds its port does not), and, when the host names a standalone master, that master
  answers a request on its RPC port (a stopped or hung master does not). A server stopped for being idle is
  started again by the next attempt, so a host lost with one did not start: nothing to probe, its
  entry expires. A server regionflow stopped because its master went away (the machine was lost) is
  started again by the next attempt too, and needs only that master: the host is back once the master
  answers (the machine came back), not after the entry's whole expiry;
- submit backend: the host's standalone master answers a request on its RPC port;
- anything else (``local[k]``, YARN, Kubernetes, a host no longer in the cluster): cannot tell (None),
  and the entry simply expires after ``blocklist_expiry``.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ...core.errors import SpecError
from ..launch.backends import configured_servers
from ..launch.targets import spark_target
from ..launch.watch import MASTER_PROBE_TIMEOUT_S, standalone_masters
from .connect import MASTER_LOST
from .reachability import any_speaks_spark_rpc
from .session_servers import SessionServers

if TYPE_CHECKING:
    from ...config import RegionflowConfig
    from ...scheduling.hosts import Cluster


class SparkHostProbe:
    """`HostProbe` of the executor's lost-host watch, for the hosts and backend of ``[regionflow]``."""

    def __init__(self, cluster: Cluster, servers: SessionServers | None) -> None:
        self.cluster = cluster
        self.servers = servers  # the session backend's servers; None with the submit backend

    @classmethod
    def of(cls, config: RegionflowConfig) -> SparkHostProbe:
        """The probe for ``[regionflow]`` `config` (its hosts, backend and Connect servers)."""
        return cls(config.cluster, configured_servers(config) if config.backend == "session" else None)

    def answers(self, host: str) -> bool | None:
        """True when `host` answers again, False when it is still silent, None when nothing tells."""
        try:
            spec = self.cluster.host(host)
        except SpecError:
            return None
        masters = standalone_masters(spark_target(spec).master)
        if masters and not any_speaks_spark_rpc(masters, MASTER_PROBE_TIMEOUT_S):
            return False
        if self.servers is not None:
            server = self.servers.server(host)
            if server.stopped_idle:
                if masters and server.stop_reason == MASTER_LOST:  # the master answered just above
                    return True
                return None  # lost although the next attempt starts it again: it did not start
            return server.serving()
        return True if masters else None


__all__ = ["SparkHostProbe"]
