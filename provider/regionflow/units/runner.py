"""`regionflow run`: a plan end to end on this machine, with the scheduling core and real Spark.

The runner is the scheduler process: the region strategy decides which units (shards of regions)
may start, the FIFO bulk slot pool grants their slots on hosts, and each granted unit runs as one
`Attempt` (the attempt lifecycle every runner shares) in a thread of its own, on the backend chosen
with `--backend`: a spark-submit per attempt, or a session on a per-host Spark Connect server.
Failures restart the unit (and what the strategy says must restart with it) up to `retries` times;
partitions whose consumers have all finished are deleted. An adaptive region cut into several shards is
decided for the run when its units become ready (`per_run`), as its decision task does in Airflow.
`--reference` runs the same vertex functions once as a plain PySpark program instead (`reference`).
"""
from __future__ import annotations

import os
import queue
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..core.attempts import AttemptState
from ..core.errors import RegionflowError
from ..core.plan import Plan
from ..core.run_context import RunContext
from ..core.templates import checked, sink_claim, vertex_reads, vertex_templates
from ..scheduling.elastic import elastic_bulk
from ..scheduling.errors import SchedulingError
from ..scheduling.fit import misfits
from ..scheduling.hosts import Cluster
from ..scheduling.pool import Bulk, Grant, SlotPool
from ..scheduling.strategy import UnitState
from ..spark.data.descriptors import DescriptorCache
from ..spark.data.filesystems import local_path
from ..spark.data.sinks import SinkCommitter
from ..spark.data.store import PartitionStore
from ..spark.driver.program import resolve_sink_path
from ..spark.launch.attempt import Attempt, AttemptOutcome, Backend, result_reason
from ..spark.launch.backends import SessionBackend, SubmitBackend
from ..spark.launch.cluster_managers import excluded_nodes
from ..spark.launch.pyfiles import build_py_files
from ..spark.launch.submission import GrantTarget, grant_target, job_modules
from ..spark.launch.submit import SubmissionResult
from ..spark.servers.session_servers import SessionServers
from .attempts import new_attempt
from .layout import UnitLayout
from .per_run import RunDecisions, carried_over
from .rendering import render
from .summary import RunSummary, UnitRun
from .tasks import UnitTaskBuilder

DEFAULT_RETRIES = 2


class RunFailed(RegionflowError):
    """The run could not complete: a unit failed more often than its retries allow."""


@dataclass
class RunOptions:
    data_dir: str
    cluster: Cluster
    max_shards: int | None = 1
    retries: int = DEFAULT_RETRIES
    job_conf: dict[str, str] = field(default_factory=dict)
    run_id: str | None = None
    progress: Callable[[str], None] | None = print
    backend: str = "session"  # one Spark Connect server per host, started here; "submit": spark-submit each
    # session backend: servers already up (shared by several runs: benchmarks, tests); the run neither
    # starts nor stops them
    servers: SessionServers | None = None
    keep_partitions: bool = False  # keep blocking partitions after their consumers finished (benchmarks count them)
    # time.monotonic() when the command started: progress lines count from it (default: the runner's creation)
    clock_origin: float | None = None
    # the run's values for its vertex functions and templates (--logical-date, --data-interval, --param);
    # its dag_id and run_id default to the job's name and the run's id
    context: RunContext | None = None
    # the address the drivers of hosts whose master is on another machine bind (`--bind-address`)
    bind_address: str = "127.0.0.1"


class LocalRunner:
    def __init__(self, job_reference: str, plan: Plan, options: RunOptions) -> None:
        self.job_reference = job_reference
        self.plan = plan
        self.options = options
        self.run_id = options.run_id or f"run-{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:6]}"
        self.store = PartitionStore(options.data_dir, self.run_id)
        self.work_dir = os.path.join(local_path(options.data_dir), self.run_id, "_tasks")
        self.layout = UnitLayout(plan, options.max_shards)
        self.shards = self.layout.shards
        self.scheduler = self.layout.scheduler()
        self.keys = self.layout.keys
        self.index = {key: unit for unit, key in enumerate(self.keys)}
        self.runs = [UnitRun(name) for name in self.layout.names]
        self.largest_host = max(host.slots for host in options.cluster)
        self.hosts = {host.name: host for host in options.cluster}
        self.pool = SlotPool(options.cluster)
        self.decisions = RunDecisions(plan, options.max_shards, self.store, options.cluster.total_slots,
                                      self.largest_host)
        self.context, self.rendered = run_values(plan, options, self.run_id)
        self.tasks = self._task_builder()
        self.events: queue.Queue = queue.Queue()
        self.live: dict[int, tuple[str, Attempt]] = {}  # unit -> (bulk id, its running attempt)
        self.servers: SessionServers | None = None
        self.backend: Backend | None = None
        self.unit_host: dict[int, str] = {}
        self.log_paths: dict[int, str] = {}
        self.origin = options.clock_origin if options.clock_origin is not None else time.monotonic()
        self.started = self.origin  # reset when the first unit is submitted: the makespan counts from there

    # ---- pre-flight -------------------------------------------------------------------------------

    def preflight(self) -> list[SinkCommitter]:
        """Everything that can be checked before Spark starts: slot requests the cluster can never
        serve (every resource), data dir, sinks, vertex functions."""
        problems = misfits(self.plan, self.options.cluster.hosts)
        if problems:
            raise SchedulingError(f"job {self.plan.graph.name!r} cannot run on this cluster: "
                                  + "; and ".join(problems))
        self.store.check_writable()
        for vertex in self.plan.graph.vertices.values():
            vertex.resolve_fn()
            _check_reads(vertex.name, vertex_reads(self.rendered, vertex))
        committers = [SinkCommitter(resolve_sink_path(v, self.options.data_dir, self.rendered), self.plan.graph.name,
                                    self.run_id, vertex=v.name, data_dir=self.options.data_dir,
                                    **sink_claim(v, self.context))
                      for v in self.plan.graph.vertices.values() if v.sink]
        for committer in committers:
            committer.check_target()
        for committer in committers:
            committer.claim()
        os.makedirs(self.work_dir, exist_ok=True)
        self.py_files = build_py_files(os.path.join(self.work_dir, "py"), job_modules(self.job_reference))
        return committers

    # ---- the loop ---------------------------------------------------------------------------------

    def run(self) -> RunSummary:
        self.preflight()
        self.servers = self._start_servers()
        self.backend = (SessionBackend(self.servers, self.options.job_conf) if self.servers is not None else
                        SubmitBackend(self.options.job_conf, self.py_files, forward_output=False))
        self.started = time.monotonic()
        try:
            self._submit(self.scheduler.start())
            while not self.scheduler.done:
                key, attempt, result = self.events.get()
                self._on_result(key, attempt, result)
        finally:
            self._kill_all()
            if self.servers is not None and self.options.servers is None:
                self.servers.stop()
        makespan = time.monotonic() - self.started
        return RunSummary(self.plan.graph.name, self.plan.mode.value, self.run_id, makespan,
                          self.runs, self._sink_figures())

    def _task_builder(self) -> UnitTaskBuilder:
        """The unit tasks of the current layout (input descriptors cached per partition group of it)."""
        self.descriptors = DescriptorCache(os.path.join(self.work_dir, "descriptors"))
        return UnitTaskBuilder(self.job_reference, self.layout, self.store, self.options.data_dir, self.descriptors,
                               lambda producer_unit: self.unit_host.get(producer_unit, ""))

    def _decided(self, units: list[int]) -> list[int]:
        """`units`, ready now, after deciding the regions among them decided per run: the run then goes on in
        the decided layout, and the units of those regions are its own."""
        due = self.decisions.due(self.layout, units)
        if not due:
            return units
        for logical in due:
            recorded = self.decisions.decide(self.layout, logical)
            self._progress(f"{self.layout.plan.region_task_id(logical)}: adaptive parallelism for this run: "
                           f"{recorded['reason']}")
        others = [self.keys[unit] for unit in units if self.layout.shards[unit].logical not in due]
        self._switch(self.decisions.layout())
        return sorted({self.index[key] for key in others} | {unit for logical in due
                                                              for unit in self.layout.units_of_logical(logical)})

    def _switch(self, layout: UnitLayout) -> None:
        """Go on in `layout`: the strategy carried over, every record of a unit moved to its index there."""
        old_keys, index = self.keys, {key: unit for unit, key in enumerate(layout.keys)}
        finished = [old_keys[unit] for unit, state in enumerate(self.scheduler.state) if state is UnitState.FINISHED]
        self.scheduler = carried_over(layout, finished, [old_keys[unit] for unit in self.live])
        runs = {run.name: run for run in self.runs}
        self.runs = [runs.get(name) or UnitRun(name) for name in layout.names]
        self.live = {index[old_keys[unit]]: live for unit, live in self.live.items()}
        self.unit_host = {index[old_keys[u]]: host for u, host in self.unit_host.items() if old_keys[u] in index}
        self.log_paths = {index[old_keys[u]]: path for u, path in self.log_paths.items() if old_keys[u] in index}
        self.layout, self.shards, self.keys, self.index = layout, layout.shards, layout.keys, index
        self.tasks = self._task_builder()

    def _submit(self, units: list[int]) -> None:
        for unit in self._decided(units):
            requests = self.layout.requests(unit, self.layout.width(unit, self.largest_host))
            self.runs[unit].ready = self._now()
            bulk = Bulk(f"{self.keys[unit]}:{self.runs[unit].attempts}", self.plan.graph.name, self.runs[unit].name,
                        requests)
            chosen = elastic_bulk(self.pool, bulk, self.layout.smaller_requests(unit, self.largest_host))
            if chosen is not bulk:
                self._progress(f"{self.runs[unit].name}: starts with {chosen.size} of the {bulk.size} slots it asks "
                               f"for (the others are taken)")
            self._launch(self.pool.submit(chosen))

    def _launch(self, grants: list[Grant]) -> None:
        for grant in grants:
            unit = self.index[grant.bulk_id.rpartition(":")[0]]
            run = self.runs[unit]
            run.attempts += 1
            target = grant_target([slot.host for slot in grant.slots], self.hosts.__getitem__,
                                  pool_masters=self.servers is None)
            run.start, run.end, run.slots, run.host = self._now(), None, target.slots, target.host.name
            self.scheduler.on_started(unit)
            if target.note:
                self._progress(f"{run.name}: {target.note}")
            attempt = self._attempt(unit, target, f"a{run.attempts}-{uuid.uuid4().hex[:6]}")
            self.live[unit] = (grant.bulk_id, attempt)
            self.unit_host[unit] = run.host
            threading.Thread(target=self._run_attempt, args=(self.keys[unit], attempt), daemon=True).start()
            self._progress(f"started {run.name} (attempt {run.attempts}) on {run.host} with {run.slots} slot(s)")

    def _start_servers(self) -> SessionServers | None:
        """The session backend's servers, one per host on free ports, owned by this run."""
        if self.options.backend == "submit":
            return None
        if self.options.backend != "session":
            raise RunFailed(f"backend {self.options.backend!r} is unknown; use 'session' or 'submit'")
        if self.options.servers is not None:
            return self.options.servers
        servers = SessionServers(self.options.cluster, os.path.join(self.work_dir, "sessions"), base_port=None,
                                 bind_address=self.options.bind_address)
        began = time.monotonic()
        try:
            servers.start()
        except BaseException:
            servers.stop()
            raise
        self._progress(f"Spark Connect servers of {len(servers.servers)} host(s) up in "
                       f"{time.monotonic() - began:.1f} s")
        return servers

    def _attempt(self, unit: int, target: GrantTarget, attempt_id: str) -> Attempt:
        host = target.host
        built = self.tasks.build(unit, slots=target.slots, width_slots=self.largest_host, host=host.name,
                                 attempt_id=attempt_id, excluded_nodes=excluded_nodes(
                                     host, self.options.cluster.hosts,
                                     lambda: self.pool.blocklist.hosts_for(self.plan.graph.name)),
                                 context=self.context.with_try(self.runs[unit].attempts), rendered=self.rendered)
        if built.decision.values:
            self._progress(f"{self.runs[unit].name}: adaptive parallelism {built.decision.reason}")
        log_path = os.path.join(self.work_dir, "logs", f"{self.keys[unit]}-{attempt_id}.log")
        self.log_paths[unit] = log_path
        assert self.backend is not None, "run() chooses the backend before the first attempt"
        return new_attempt(built.task, os.path.join(self.work_dir, f"{self.keys[unit]}-{attempt_id}.json"), host,
                           target.slots, self.backend, self.store, on_line=line_writer(log_path))

    def _run_attempt(self, key: str, attempt: Attempt) -> None:
        try:
            outcome: AttemptOutcome | BaseException = attempt.run()
        except BaseException as error:  # noqa: BLE001 - reported to the loop, never lost in a thread
            outcome = error
        self.events.put((key, attempt.attempt_id, outcome))  # by key: a decision may renumber the units

    def _on_result(self, key: str, attempt_id: str, outcome: AttemptOutcome | BaseException) -> None:
        unit = self.index.get(key, -1)
        live = self.live.get(unit)
        if live is None or live[1].attempt_id != attempt_id:
            return  # an attempt cancelled for a restart: its slots went back when it was cancelled
        bulk_id, _ = self.live.pop(unit)
        run = self.runs[unit]
        run.end = self._now()
        self._launch(self.pool.release(bulk_id))
        if isinstance(outcome, BaseException) or outcome.state is not AttemptState.SUCCEEDED:
            self._on_failure(unit, attempt_id, outcome)
            return
        progress = self.scheduler.on_finished(unit)
        self._progress(f"finished {run.name} in {run.seconds:.1f} s")
        self._release(progress.released_groups)
        self._submit(progress.ready)

    def _on_failure(self, unit: int, attempt: str, result) -> None:
        run = self.runs[unit]
        reason = failure_reason(result)
        self.store.discard(self.keys[unit], attempt)
        if run.attempts > self.options.retries:
            raise RunFailed(f"unit {run.name} failed {run.attempts} time(s), the last time with: {reason}; "
                            f"its Spark log is {self.log_paths.get(unit)}")
        self._progress(f"{run.name} failed (attempt {run.attempts}): {reason}; retrying")
        restart = self.scheduler.on_failed(unit)
        for other in restart.cancel:
            self._cancel(other)
        for restarted in restart.restarted:
            for group in self.scheduler.groups_produced[restarted]:
                self.descriptors.invalidate(group)
        self._submit(restart.ready)

    def kill_unit(self, name: str) -> bool:
        """Cancel the running attempt of the unit called `name` (as if its process died): the
        runner sees a killed attempt and retries it. True if such an attempt was running."""
        for unit, (_, attempt) in list(self.live.items()):
            if self.runs[unit].name == name:
                attempt.cancel()
                return True
        return False

    def _cancel(self, unit: int) -> None:
        live = self.live.pop(unit, None)
        if live is not None:
            bulk_id, attempt = live
            attempt.cancel(wait=True)
            self._launch(self.pool.release(bulk_id))

    def _kill_all(self) -> None:
        for unit in list(self.live):
            _, attempt = self.live.pop(unit)
            attempt.cancel(wait=True)

    # ---- data -------------------------------------------------------------------------------------

    def _release(self, groups: list[int]) -> None:
        if self.options.keep_partitions:
            return
        for group_index in groups:
            self.store.release(self.layout.released_paths(group_index, self.store))

    def _sink_figures(self) -> dict[str, dict[str, Any]]:
        return self.layout.sink_figures(self.store, self.options.data_dir)

    # ---- helpers ----------------------------------------------------------------------------------

    def _now(self) -> float:
        return time.monotonic() - self.started

    def _progress(self, message: str) -> None:
        if self.options.progress:
            counts = self.scheduler.counts()
            running = ", ".join(f"{self.runs[u].name} ({self.runs[u].slots}@{self.runs[u].host})" for u in self.live)
            self.options.progress(f"[{time.monotonic() - self.origin:7.1f}s] {counts['finished']}/{len(self.shards)} "
                                  f"units done"
                                  f"{'; running: ' + running if running else ''} | {message}")


def run_values(plan: Plan, options: RunOptions, run_id: str) -> tuple[RunContext, dict[str, dict[str, Any]]]:
    """The run's context (its DAG id the job's name, its run id the run's, unless given) and its vertices'
    templated fields rendered with it (`core.templates`): a template that fails is refused before Spark starts."""
    given = options.context or RunContext()
    context = replace(given, dag_id=given.dag_id or plan.graph.name, run_id=given.run_id or run_id,
                      try_number=given.try_number or 1)
    return context, checked(plan.graph, render(vertex_templates(plan.graph), context))


def _check_reads(vertex: str, paths: Sequence[str]) -> None:
    """An input path of `vertex` that is missing fails the run before Spark starts (local paths only:
    a remote URI is checked by Spark itself)."""
    for path in paths:
        local = local_path(path)
        if "://" not in local and not os.path.exists(local):
            raise RunFailed(f"vertex {vertex!r} reads {path!r}, which does not exist; "
                            "create it or fix the path in the job")


def line_writer(path: str) -> Callable[[str], None]:
    """Appends driver output lines to `path` (opened per line: submissions are few, lines cheap)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)

    def write(line: str) -> None:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(line + "\n")

    return write


def failure_reason(outcome: AttemptOutcome | SubmissionResult | BaseException) -> str:
    if isinstance(outcome, BaseException):
        return f"{type(outcome).__name__}: {outcome}"
    if isinstance(outcome, AttemptOutcome):
        return outcome.reason
    return result_reason(outcome)


__all__ = ["LocalRunner", "RunOptions", "RunSummary", "RunFailed", "UnitRun", "failure_reason", "line_writer",
           "run_values"]
