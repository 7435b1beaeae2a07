"""The RegionExecutor's composition root: `build_parts` makes the executor's collaborators from
``[regionflow]`` and wires them together; the executor calls them and builds nothing itself.

Each thing outside the scheduler's own memory is a field of `Seams`: None (the default) is the real
one, and a test puts a double there instead of patching the executor's insides (``RegionExecutor(...,
seams=Seams(...))``):

- `clock`: monotonic seconds of the slot pool (waits, blocklist expiries, ``resource_wait_timeout``), of
  the gate (how long a try waited, when its latest run went to the workers), of the queued stamps and
  the idle reaper, and of the executor's paced sync steps;
- `wall_clock`: epoch seconds, by which other schedulers count as stopped (`GrantRecovery`) and lost
  hosts' entries are extended (`LostHostWatch`);
- `task_states`: task instance states in Airflow's database (`guest.task_instance_states`), which waiting
  and granted tries and adopted grants are checked against; `renew_queued_time`: the executor's one
  write there (`guest.renew_queued_time`);
- `store`: regionflow's store (else a `RetryingStore` on ``store_url``, waiting out short outages);
- `attempt_factory`: builds a granted speculative copy's attempt (else `CopyRunner`'s, on the backend);
- `host_probe`: asks whether a lost host answers again (`SparkHostProbe`); `stopper`: stops the Spark
  work of an attempt whose process died (`configured_stopper`); `servers`: the session backend's Spark
  Connect servers that the idle reaper stops (`configured_servers`);
- `stats`: where the pool's metrics go (Airflow's ``Stats``);
- `workers`: where granted workloads run (`workers.LocalWorkers`: LocalExecutor's worker processes);
  the executor reads this one itself, since the real workers are its own.
"""
from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..config import RegionflowConfig
from ..scheduling.pool import Grant, SlotPool
from ..spark.launch.backends import configured_servers, configured_stopper
from ..spark.launch.orphans import OrphanStopper
from ..spark.servers.health import SparkHostProbe
from ..spark.servers.idle import IdleServerReaper
from ..spark.servers.session_servers import SessionServers
from ..store import RegionflowStore
from ..store.coordination import STOPPED_AFTER_S
from .admission import AdmissionGate
from .copies import AttemptFactory, CopyRunner
from .guest import renew_queued_time, task_instance_finished, task_instance_states
from .leftovers import Leftovers
from .lost_hosts import HostProbe, LostHostWatch
from .metrics import PoolMetrics
from .notices import StarvationNotices
from .queued_stamps import QueuedStamps
from .recovery import BlocklistMirror, GrantRecovery
from .store_retry import OUTAGE_RETRY_S, RetryingStore, StoreRetry
from .tries import WorkerOperations
from .workers import TaskWorkers

Clock = Callable[[], float]
TaskStates = Callable[[Iterable[str]], Mapping[str, tuple[Any, int]]]  # task instance id -> (state, try number)


@dataclass(frozen=True)
class Seams:
    """What the executor meets outside its own memory; None: the real thing (see the module docstring)."""

    clock: Clock | None = None
    wall_clock: Clock | None = None
    task_states: TaskStates | None = None
    renew_queued_time: Callable[[list[str]], None] | None = None
    store: RegionflowStore | None = None
    attempt_factory: AttemptFactory | None = None
    host_probe: HostProbe | None = None
    stopper: OrphanStopper | None = None
    servers: SessionServers | None = None
    stats: Any = None
    workers: TaskWorkers | None = None


@dataclass(frozen=True)
class ExecutorParts:
    """The executor's collaborators, wired together by `build_parts`."""

    pool: SlotPool
    store: RegionflowStore
    gate: AdmissionGate
    copies: CopyRunner  # speculative copies
    recovery: GrantRecovery  # membership in the shared pool, take-over of stopped schedulers
    blocklist: BlocklistMirror  # the store's blocklist, mirrored into the pool
    leftovers: Leftovers  # Spark work of ended tries whose process died
    metrics: PoolMetrics
    notices: StarvationNotices  # FLIP-138's not-enough-resources notices
    queued_stamps: QueuedStamps  # keeps waiting tries off Airflow's stuck-in-queued check
    queued_timeout_s: float  # Airflow's [scheduler] task_queued_timeout
    lost_hosts: LostHostWatch | None  # probes hosts lost for every run; None: off
    idle_reaper: IdleServerReaper | None  # session backend: stops servers of idle hosts; None: off
    clock: Clock
    task_states: TaskStates


def build_parts(config: RegionflowConfig, log: Any, operations: WorkerOperations,
                seams: Seams | None = None) -> ExecutorParts:
    """The collaborators of an executor with ``[regionflow]`` `config` (checked already), logging to `log`,
    whose admission gate hands granted workloads over through `operations`."""
    seams = seams or Seams()
    clock = seams.clock or time.monotonic
    task_states = seams.task_states or task_instance_states
    pool = SlotPool(config.cluster, blocklist_expiry_s=config.blocklist_expiry,
                    resource_wait_timeout_s=config.resource_wait_timeout, clock=clock)
    stopped_after_s = _stopped_after_s()
    store = seams.store
    if store is None:  # a short outage of the store (a server restart) delays scheduling instead of failing
        # tasks; the loop waits at most half the time after which peers would take this scheduler for stopped
        retry = StoreRetry(min(OUTAGE_RETRY_S, stopped_after_s / 2), log=log)
        store = RetryingStore.from_config(config.store_url, retry=retry)
    metrics = PoolMetrics(seams.stats)
    leftovers = Leftovers(store, seams.stopper if seams.stopper is not None else configured_stopper(config), log)

    def start(grants: list[Grant]) -> None:  # grants made on the way (a copy freed slots): the gate starts them
        gate.start(grants)

    def release(bulk_id: str) -> None:
        gate.release(bulk_id)

    copies = CopyRunner(pool, store, config, log, start=start, release=release,
                        attempt_factory=seams.attempt_factory, leftovers=leftovers)
    recovery = GrantRecovery(store, copies, log, functools.partial(task_instance_finished, states=task_states),
                             stopped_after_s=stopped_after_s, clock=seams.wall_clock or time.time)
    copies.owner = recovery.scheduler_id
    blocklist = BlocklistMirror(store, pool, log, start=start)
    lost_hosts = _lost_host_watch(config, store, log, seams)
    gate = AdmissionGate(pool, store, operations, copies=copies, recovery=recovery, metrics=metrics, log=log,
                         owner=recovery.scheduler_id, clock=clock)
    idle_reaper = _idle_reaper(config, seams, clock)
    queued_timeout_s = _queued_timeout_s()
    queued_stamps = QueuedStamps(queued_timeout_s, seams.renew_queued_time or renew_queued_time, clock=clock)
    return ExecutorParts(pool=pool, store=store, gate=gate, copies=copies, recovery=recovery, blocklist=blocklist,
                         leftovers=leftovers, metrics=metrics, notices=StarvationNotices(pool, gate, metrics, log),
                         queued_stamps=queued_stamps, queued_timeout_s=queued_timeout_s, lost_hosts=lost_hosts,
                         idle_reaper=idle_reaper, clock=clock, task_states=task_states)


def _stopped_after_s() -> float:
    """After how long without a heartbeat another scheduler counts as stopped: Airflow's own rule."""
    from airflow.configuration import conf

    return conf.getfloat("scheduler", "scheduler_health_check_threshold", fallback=STOPPED_AFTER_S)


def _queued_timeout_s() -> float:
    """Airflow's ``[scheduler] task_queued_timeout``: how long a task may stay QUEUED before the scheduler
    takes it for stuck."""
    from airflow.configuration import conf

    return conf.getfloat("scheduler", "task_queued_timeout", fallback=600.0)


def _lost_host_watch(config: RegionflowConfig, store: RegionflowStore, log: Any, seams: Seams) -> LostHostWatch | None:
    """The probes of hosts lost for every run; None when ``lost_host_probe_interval`` is 0 or no
    host-lost entry is ever written (`RegionflowConfig.blocks_lost_hosts`)."""
    if config.lost_host_probe_interval <= 0 or not config.blocks_lost_hosts:
        return None
    probe = seams.host_probe if seams.host_probe is not None else SparkHostProbe.of(config)
    return LostHostWatch(store, probe, config.blocklist_expiry, log,
                         interval_s=config.lost_host_probe_interval, clock=seams.wall_clock or time.time)


def _idle_reaper(config: RegionflowConfig, seams: Seams, clock: Clock) -> IdleServerReaper | None:
    """The idle-server reaper of the session backend; None with submit or a timeout of 0."""
    if config.backend != "session" or config.slot_idle_timeout <= 0:
        return None
    servers = seams.servers if seams.servers is not None else configured_servers(config)
    return IdleServerReaper(servers, config.slot_idle_timeout, clock=clock)


__all__ = ["ExecutorParts", "Seams", "TaskStates", "build_parts"]
