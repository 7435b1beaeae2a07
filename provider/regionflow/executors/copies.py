"""Speculative copies for the RegionExecutor: copy requests in the store become bulks in the FIFO pool,
granted copies run as attempts in threads of the scheduler process, and their ends come back as typed
events that release the slots on the scheduler's thread.

The execution API refuses to start a task instance that is not QUEUED, so a copy is not an Airflow task
instance. The speculation sensor writes a copy request into the store; `CopyRunner.take_requests`
(every executor sync) turns each pending one into a bulk ``copy:<request id>`` in the same FIFO pool as
the region tasks (no jumping the queue). The bulk runs under a job of its own (``<job>#copy:<id>``) on
which every host of the request's exclusion list, of the shard's live attempts and of the run's
blocklist is blocked: the per-shard rule (never on the host of another live attempt of the shard) does
not block the run's other regions off a host that is only busy with that shard. A granted copy runs in
a thread as an `Attempt` (the region task's own lifecycle, on the configured backend) with a fresh
attempt id ``spec<n>-<hex>``. A failed copy only marks its request failed: the shard goes on with its
original attempt. The attempt is built by an injected factory, so tests run copies without Spark.
"""
from __future__ import annotations

import os
import queue
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..config import RegionflowConfig
from ..core.attempts import AttemptState
from ..core.resources import UNKNOWN, ResourceProfile
from ..scheduling.errors import UnfulfillableBulk
from ..scheduling.hosts import Host
from ..scheduling.pool import Bulk, Grant, SlotPool
from ..spark.data.store import PartitionStore
from ..spark.data.task import UnitTask
from ..spark.launch.attempt import Attempt
from ..spark.launch.submission import grant_target
from ..spark.launch.watch import DEFAULT_HOST_LOST_TIMEOUT_S
from ..store import COPY_PREFIX, CopyRequestRecord, CopyState, RegionflowStore, StoreError
from ..store.recorder import StoreRecorder
from ..units.attempts import attempt_on_config
from .leftovers import Leftovers
from .shared_pool import copy_job

COPY_EXCLUSION_S = 7 * 24 * 3600.0  # lifted explicitly when the copy ends


@dataclass(frozen=True)
class CopyEnded:
    """A copy's thread ended (posted by the thread; the slots are released on the scheduler's thread)."""

    bulk_id: str


@dataclass(frozen=True)
class CopyLaunch:
    """What an attempt factory gets to build a copy's attempt."""

    request: CopyRequestRecord
    task: UnitTask
    task_path: str
    host: Host
    slots: int
    partitions: PartitionStore
    recorder: StoreRecorder


AttemptFactory = Callable[[CopyLaunch], Attempt]


class CopyRunner:
    """Runs the speculative copies of one RegionExecutor. `start` hands grants the pool makes on the way
    to the executor (a cancelled or finished copy frees slots others wait for); `release` gives a copy's
    slots back. Methods are called on the scheduler's thread, except the copies' own thread bodies."""

    def __init__(self, pool: SlotPool, store: RegionflowStore, config: RegionflowConfig, log: Any,
                 start: Callable[[list[Grant]], None], release: Callable[[str], None],
                 attempt_factory: AttemptFactory | None = None, leftovers: Leftovers | None = None) -> None:
        self.pool, self.store, self.config, self.log = pool, store, config, log
        self.leftovers = leftovers  # ends a copy whose scheduler died (None: its Spark work ends on its own)
        self._start, self._release = start, release
        self.attempt_factory = attempt_factory or self._attempt_on_backend
        self.waiting: dict[str, CopyRequestRecord] = {}  # bulk id -> request waiting for slots
        self.running: dict[str, threading.Thread] = {}  # bulk id -> thread running the copy
        self._ended: queue.Queue[CopyEnded] = queue.Queue()
        self._sequence = 0
        self.host_lost_timeout = DEFAULT_HOST_LOST_TIMEOUT_S  # a copy whose master is silent this long is killed
        self.owner: str | None = None  # the scheduler whose copies these are (set by the executor)

    def owns(self, bulk_id: str) -> bool:
        """Whether `bulk_id` is a copy waiting for its grant (the executor passes its grant to `launch`)."""
        return bulk_id in self.waiting

    def take_requests(self) -> None:
        """Withdraw waiting copies whose request is no longer pending; submit new pending requests."""
        for bulk_id, request in list(self.waiting.items()):
            current = self.store.copy_request(request.request_id)
            if current is None or current.state is not CopyState.PENDING:
                self._withdraw(bulk_id, f"copy request is {current.state.value if current else 'gone'}")
        for request in self.store.pending_copy_requests():
            if request.bulk_id in self.waiting or request.bulk_id in self.running:
                continue
            self._submit(request)

    def launch(self, grant: Grant) -> None:
        """Start the granted copy in a thread of its own."""
        request = self.waiting.pop(grant.bulk_id)  # the shared pool recorded the grant
        target = grant_target([slot.host for slot in grant.slots], self.config.cluster.host,
                              pool_masters=self.config.backend != "session")
        host = target.host.name
        try:
            self.store.mark_copy(request.request_id, CopyState.GRANTED, host=host)
        except StoreError as error:  # cancelled meanwhile: the shard finished
            self.log.info("RegionExecutor: speculative copy %s not started: %s", grant.bulk_id, error)
            self._ended.put(CopyEnded(grant.bulk_id))
            return
        self._sequence += 1
        attempt_id = f"spec{self._sequence}-{uuid.uuid4().hex[:6]}"
        thread = threading.Thread(target=self._run, args=(request, host, target.slots, attempt_id),
                                  name=f"regionflow-{grant.bulk_id}", daemon=True)
        self.running[grant.bulk_id] = thread
        thread.start()

    def finish_ended(self) -> None:
        """Release the slots of copies whose threads ended (pool calls stay on the scheduler thread)."""
        while True:
            try:
                event = self._ended.get_nowait()
            except queue.Empty:
                return
            thread = self.running.pop(event.bulk_id, None)
            if thread is not None:
                thread.join(timeout=1.0)
            grant = self.store.grant_for(event.bulk_id)
            if grant is not None:
                self._unblock(copy_job(grant.job_id, event.bulk_id))
            self._release(event.bulk_id)

    def take_over(self, bulk_id: str, why: str) -> CopyRequestRecord | None:
        """A copy of a stopped scheduler: its thread died with that scheduler, or it waited in that
        scheduler's pool. Its records are settled (a running copy attempt ends as killed; the request ends
        as cancelled when it had no slots yet, else as failed, with `why`). When the shard still runs an
        attempt and has not committed, the copy is asked for again as a new request, which the pool of any
        scheduler takes at the back of the FIFO queue (copy bulk ids are one per request, so the old
        request cannot wait again). Returns the new request, or None when the copy is no longer wanted."""
        try:
            request_id = int(bulk_id[len(COPY_PREFIX):])
        except ValueError:
            return None
        request = self.store.copy_request(request_id)
        if request is None:
            return None
        if request.attempt_id:
            attempt = self.store.attempt(request.attempt_id)
            if attempt is not None and attempt.state == AttemptState.RUNNING:
                if self.leftovers is not None:
                    self.leftovers.end(attempt, why)
                else:
                    self.store.end_attempt(request.attempt_id, AttemptState.KILLED, why)
        if not request.is_open:
            return None
        self._mark(request_id, CopyState.CANCELLED if request.state is CopyState.PENDING else CopyState.FAILED,
                   message=why)
        unwanted = self._unwanted(request)
        if unwanted:
            self.log.info("RegionExecutor: speculative copy %s of a stopped scheduler not asked again: %s",
                          bulk_id, unwanted)
            return None
        again = self.store.request_copy(
            dag_id=request.dag_id, run_id=request.run_id, task_id=request.task_id, map_index=request.map_index,
            unit_key=request.unit_key, label=request.label, requests=request.requests,
            template_path=request.template_path, py_files=request.py_files, spark_conf=request.spark_conf,
            excluded_hosts=request.excluded_hosts, slow_attempt=request.slow_attempt, job_id=request.job_id)
        if again is not None:
            self.log.info("RegionExecutor: speculative copy %s of a stopped scheduler is asked again as %s (%s)",
                          bulk_id, again.bulk_id, why)
        return again

    def _unwanted(self, request: CopyRequestRecord) -> str:
        """Why a copy of `request`'s shard is no longer worth running ('' when it is)."""
        try:
            task = UnitTask.read(request.template_path)
        except (OSError, ValueError) as error:
            return f"its task template cannot be read ({error})"
        if _committed(task):
            return "the shard has committed"
        if not self.store.live_attempts(request.unit_key, dag_id=request.dag_id, run_id=request.run_id):
            return "the shard runs no attempt (its task instance is retried by Airflow, not copied)"
        return ""

    # ---- inside -----------------------------------------------------------------------------------

    def _submit(self, request: CopyRequestRecord) -> None:
        bulk_id = request.bulk_id
        job = copy_job(request.job_id, bulk_id)
        requests = tuple(ResourceProfile.from_dict(p) for p in request.requests) or (UNKNOWN,)
        bulk = Bulk(bulk_id, job, request.label, requests)
        excluded = set(request.excluded_hosts)
        excluded |= {a.host for a in self.store.live_attempts(request.unit_key, dag_id=request.dag_id,
                                                                 run_id=request.run_id)}
        excluded |= {entry.host for entry in self.store.active_blocks(job_id=request.job_id)}
        if all(host.name in excluded for host in self.config.cluster):
            message = (f"every host ({', '.join(sorted(excluded))}) runs an attempt of the shard or is blocklisted; "
                       f"a copy needs another host")
            self.log.warning("RegionExecutor: speculative copy %s not run: %s", bulk_id, message)
            self._mark(request.request_id, CopyState.FAILED, message=message)
            return
        for host in sorted(excluded):  # in the store too, so every scheduler's pool keeps the copy off it
            self.pool.block(job, host, COPY_EXCLUSION_S)
            self.store.block(job, host, time.time() + COPY_EXCLUSION_S, "a copy runs on another host than its shard")
        self.store.record_waiting(bulk_id, dag_id=request.dag_id, run_id=request.run_id, task_id=request.task_id,
                                  try_number=0, label=request.label, requests=[p.to_dict() for p in requests],
                                  map_index=request.map_index, job_id=request.job_id, owner=self.owner)
        self.waiting[bulk_id] = request
        self.log.info("RegionExecutor: speculative copy %s of %s[%d] waits for slots, avoiding host(s) %s",
                      bulk_id, request.task_id, request.map_index, ", ".join(sorted(excluded)) or "none")
        try:
            grants = self.pool.submit(bulk)
        except UnfulfillableBulk as rejection:
            self.waiting.pop(bulk_id, None)
            self._unblock(job)
            self.store.record_rejected(bulk_id, str(rejection))
            self._mark(request.request_id, CopyState.FAILED, message=str(rejection))
            return
        self._start(grants)

    def _withdraw(self, bulk_id: str, why: str) -> None:
        request = self.waiting.pop(bulk_id)
        self._start(self.pool.cancel(bulk_id))
        self._unblock(copy_job(request.job_id, bulk_id))
        self.store.record_released(bulk_id)
        self.log.info("RegionExecutor: speculative copy %s withdrawn: %s", bulk_id, why)

    def _run(self, request: CopyRequestRecord, host_name: str, slots: int, attempt_id: str) -> None:
        """Thread body: run one speculative copy to its end; never raises."""
        try:
            self._attempt(request, host_name, slots, attempt_id)
        except Exception as error:  # noqa: BLE001 - a failed copy does not fail the shard
            self.log.exception("RegionExecutor: speculative copy %s failed", request.bulk_id)
            self._mark(request.request_id, CopyState.FAILED, message=f"{type(error).__name__}: {error}")
            attempt = self.store.attempt(attempt_id)
            if attempt is not None and attempt.state == AttemptState.RUNNING:
                self.store.end_attempt(attempt_id, AttemptState.FAILED, f"{type(error).__name__}: {error}"[:2000])
        finally:
            self._ended.put(CopyEnded(request.bulk_id))

    def _attempt(self, request: CopyRequestRecord, host_name: str, slots: int, attempt_id: str) -> None:
        task = UnitTask.read(request.template_path)
        task.host, task.attempt_id = host_name, attempt_id
        partitions = PartitionStore(task.data_dir, task.run_id)
        if _committed(task, partitions):
            self._mark(request.request_id, CopyState.CANCELLED, message="the shard committed before the copy ran")
            return
        task_path = os.path.join(os.path.dirname(request.template_path), f"{task.unit_key}-{attempt_id}.json")
        recorder = StoreRecorder(self.store, request.dag_id, request.run_id, request.task_id, request.map_index,
                                 bulk_id=request.bulk_id, speculative=True)
        attempt = self.attempt_factory(CopyLaunch(request, task, task_path, self.config.cluster.host(host_name),
                                                  slots, partitions, recorder))
        self.store.mark_copy(request.request_id, CopyState.RUNNING, attempt_id=attempt_id)
        self.log.info("RegionExecutor: speculative copy %s of %s[%d] runs as attempt %s on host %s",
                      request.bulk_id, request.task_id, request.map_index, attempt_id, host_name)
        outcome = attempt.run()
        if outcome.winner is not None:
            self.store.record_commit(request.dag_id, request.run_id, task.unit_key, outcome.winner.attempt_id)
        if outcome.state is AttemptState.SUCCEEDED:
            self._mark(request.request_id, CopyState.WON)
            self.log.info("RegionExecutor: speculative copy %s (attempt %s on %s) committed first",
                          request.bulk_id, attempt_id, host_name)
        elif outcome.state is AttemptState.LOST_COMMIT:
            self._mark(request.request_id, CopyState.LOST,
                       message=f"attempt {outcome.winner_attempt} on {outcome.winner_host} committed first")
        else:  # e.g. its host was lost: the slots go back, the shard goes on with the original
            self._mark(request.request_id, CopyState.FAILED,
                       message=None if outcome.failure is None else outcome.failure[:2000])

    def _attempt_on_backend(self, launch: CopyLaunch) -> Attempt:
        """The default factory: an `Attempt` on the configured backend (session or submit)."""
        request = launch.request
        attempt = attempt_on_config(self.config, launch.task, launch.task_path, launch.host, launch.slots,
                                    launch.partitions, job_conf=dict(request.spark_conf),
                                    py_files=lambda: list(request.py_files), recorder=launch.recorder,
                                    forward_output=False, host_lost_timeout=self.host_lost_timeout)
        self.log.info("RegionExecutor: speculative copy %s uses the %s backend", request.bulk_id,
                      attempt.backend.name)
        return attempt

    def _mark(self, request_id: int, state: CopyState, message: str | None = None) -> None:
        try:
            self.store.mark_copy(request_id, state, message=message)
        except StoreError as error:
            self.log.warning("RegionExecutor: copy request %d: %s", request_id, error)

    def _unblock(self, job: str) -> None:
        for host in list(self.pool.blocklist.own_hosts(job)):  # the copy's exclusions, not a lost host
            self.store.unblock(job, host)
            self._start(self.pool.unblock(job, host))


def _committed(task: UnitTask, partitions: PartitionStore | None = None) -> bool:
    """Whether the task's unit has committed (the partition store is the truth; first commit wins)."""
    partitions = partitions or PartitionStore(task.data_dir, task.run_id)
    return partitions.committed(task.unit_key) is not None


__all__ = ["AttemptFactory", "CopyEnded", "CopyLaunch", "CopyRunner"]
