"""The admission gate: task instance tries in front of the FIFO bulk slot pool (no Airflow here).

The RegionExecutor turns each workload the scheduler hands it into a `Try` (what the gate needs to know
of it) and asks the gate to admit it; the gate keeps the try waiting until its whole bulk is granted,
records the grant in the store, and then asks the executor, through `WorkerOperations`, to hand the
workload to a worker. Like Flink's scheduler operations, that interface is the gate's one way out:
tests drive the gate with a recording double of it, a real `SlotPool` and a real store, without Airflow.
A try and the gate's ways out are in `tries`; the gate keeps each try's runs out in a `runs.RunLedger`,
finds ends no worker reported with `unheard.UnheardEnds`, and decides grants through `shared_pool`.

Facts of Airflow's scheduler the gate is built for (see the lifecycle table in docs/executor.md):
- the scheduler may queue the same try again (a reschedule poke, a resumed deferral, a restart) before
  the executor reads the end of its previous run: a live grant serves the new run, and the late end of
  the earlier run is not reported (`end_of_run`);
- a try queued twice while it waits keeps its place with the newest workload (its token);
- a task instance marked, cleared or deleted while it waits is withdrawn (`withdraw_changed`);
- a bulk no state of the cluster can satisfy fails its task at once (the pool says why);
- a try of a task that `waits_for_inputs` (its shard reads only some shards of an upstream region task)
  whose producer units have not all committed runs first without slots: it defers until they have, and
  Airflow queues the same try again when it resumes, which asks for the slots (its first admission is
  recorded released, with `INPUTS_GATE_NOTE`).
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import replace
from typing import Any

from ..contract import INPUTS_GATE_NOTE, NoSlots, RegionSlots
from ..core.resources import ResourceProfile
from ..scheduling.elastic import smaller_now
from ..scheduling.errors import UnfulfillableBulk
from ..scheduling.pool import Bulk, Grant, SlotPool
from ..store import GrantRecord, GrantState, RegionflowStore, admission_of, try_of
from .guard import guarded
from .runs import RunLedger
from .shared_pool import Decided, SharedPool
from .tries import Copies, Metrics, Recovery, Try, WaitingTry, WorkerOperations, now_is
from .unheard import UnheardEnds, in_database


class AdmissionGate:
    """Tries in FIFO bulks in front of the workers. Called on the scheduler's thread only."""

    def __init__(self, pool: SlotPool, store: RegionflowStore, operations: WorkerOperations, *,
                 copies: Copies, recovery: Recovery, metrics: Metrics, log: Any = None,
                 owner: str | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        """`owner`: this scheduler's id in the store (its rows are its own; other schedulers share the pool).
        `clock`: monotonic seconds, for how long a try waited and when its latest run went to the workers."""
        self.pool, self.store, self.operations = pool, store, operations
        self.copies, self.recovery, self.metrics = copies, recovery, metrics
        self.log = log or logging.getLogger(__name__)
        self.owner, self.clock = owner, clock
        self.shared = SharedPool(pool, store, self.log)  # every grant decision goes through it
        self.held: dict[str, WaitingTry] = {}  # bulk id -> try waiting for its grant
        self.waiting: dict[Hashable, str] = {}  # try key -> bulk id of its waiting admission
        self.granted: dict[Hashable, str] = {}  # try key -> bulk id of its live grant
        self.runs = RunLedger(clock)  # try key -> its runs handed to the workers, end not yet read
        self._requeue: list[WaitingTry] = []  # held tries whose place another scheduler released
        self._unrecorded: dict[str, str | None] = {}  # bulk id -> message of a release the store missed
        self._unheard = UnheardEnds()  # granted tries Airflow's database shows ended, no worker having said so

    # ---- in ---------------------------------------------------------------------------------------

    def admit(self, workload: Any, attempt: Try) -> None:
        """One workload from the scheduler: a new try, or the same try queued again."""
        key = attempt.key
        if isinstance(attempt.contract, NoSlots):  # speculation sensors: a few store reads per poke
            self._hand_over(workload, key)
            return
        live = self.granted.get(key)
        if live is not None:
            # The scheduler queued this try again (resume, reschedule poke) before we read the end of its
            # previous run: that run has left the slots (Airflow queues a try again only once its process
            # reported), so the live grant serves the new run and the late end is not reported.
            self.store.record_reused(live, f"re-queued at {_now()} while granted: the live grant was reused")
            self._hand_over(workload, key)
            return
        if key in self.waiting:  # queued twice while waiting: it keeps its place, with the newest token
            self.held[self.waiting[key]] = WaitingTry(workload, attempt, self.held[self.waiting[key]].since)
            return
        bulk = attempt.bulk()
        record = self._admission(attempt, bulk)
        if record.state is GrantState.GRANTED:
            if self.recovery.adopted.pop(record.bulk_id, None) is not None:  # granted before a scheduler restart
                self.granted[key] = record.bulk_id
                self.store.record_reused(record.bulk_id, f"re-queued at {_now()} after a scheduler restart: "
                                                         f"the restored grant was reused")
                self._hand_over(workload, key)
                return
            self.shared.wrote(self.store.record_released(record.bulk_id,
                                                         "stale: no scheduler holds this grant any more"))
            record = self._admission(attempt, bulk)
        if self._gate_run(attempt, record):
            self.log.info("RegionExecutor: %s runs without slots until its inputs are committed", key)
            self._hand_over(workload, key)
            return
        bulk = _as_admitted(bulk, record)
        shortfall = self._run_shortfall(attempt, bulk.job_id)
        if shortfall:
            self._reject(workload, bulk, shortfall, "this DAG run can never finish on this cluster")
            return
        try:
            grants = self.pool.submit(bulk)
        except UnfulfillableBulk as rejection:
            self._reject(workload, bulk, str(rejection))
            return
        self.held[bulk.bulk_id] = WaitingTry(workload, attempt, self.clock())
        self.waiting[key] = bulk.bulk_id
        self.start(grants)

    def start_elastic(self, wait_s: float, now: float) -> None:
        """A try whose shard lists smaller requests (adaptive vertices) and whose full request has waited
        `wait_s` seconds, alone in the queue, is admitted again with the largest smaller request the free
        slots hold, and starts (`scheduling.elastic.smaller_now`); its region task decides its adaptive
        vertices from the slots it gets. One try per call; nothing when another bulk waits (FIFO). `now`:
        `time.monotonic()`."""
        if self.pool.pending_count != 1:
            return
        waiting = self.pool.waiting_bulks()[0]  # the one bulk in the queue: this scheduler's try, or not
        held = self.held.get(waiting.bulk_id)
        contract = held.attempt.contract if held is not None else None
        if held is None or now - held.since < wait_s or not isinstance(contract, RegionSlots):
            return
        chosen = smaller_now(self.pool, waiting, contract.smaller_of(held.attempt.map_index))
        if chosen is None:
            return
        key = held.attempt.key
        waited = now - held.since
        self.log.info("RegionExecutor: %s waited %.0f s for %d slots; it starts with the %d free (its adaptive "
                      "vertices may run at fewer subtasks)", key, waited, waiting.size, chosen.size)
        self._free(waiting.bulk_id, f"withdrawn after {waited:.0f} s: admitted again with {chosen.size} of its "
                                    f"{waiting.size} slot requests ([regionflow] elastic_wait)")
        del self.held[waiting.bulk_id], self.waiting[key]
        bulk = _as_admitted(chosen, self._admission(held.attempt, chosen))
        self.held[bulk.bulk_id] = held
        self.waiting[key] = bulk.bulk_id
        self.start(self.pool.submit(bulk))

    def start(self, grants: Iterable[Grant]) -> None:
        """Record the pool's grants in the store (the shared pool decides anew when another scheduler
        wrote meanwhile, see `SharedPool`) and hand granted tries to the workers, copies to their runner."""
        self._start_decided(self._decided(self.shared.decide, list(grants)))

    def refresh(self) -> None:
        """Every sync: when another scheduler wrote to the pool, rebuild from the store, record what that
        makes possible and start this scheduler's tries granted meanwhile (by it or by another)."""
        for bulk_id, message in list(self._unrecorded.items()):
            del self._unrecorded[bulk_id]
            guarded(self.log, f"recording the release of {bulk_id} again", self._record_released, bulk_id, message)
            self.shared.invalidate()  # the pool let the slots go long ago: rebuild from the store
        if self.shared.changed():
            self._start_decided(self._decided(self.shared.rebuild))

    def _decided(self, decide: Any, *args: Any) -> list[Decided]:
        rebuilds = self.shared.rebuilds
        decided: list[Decided] = decide(*args)
        if self.shared.rebuilds != rebuilds:  # rebuilt: another scheduler may have granted our bulks
            decided += self._granted_elsewhere({item.grant.bulk_id for item in decided})
        return decided

    def _granted_elsewhere(self, decided: set[str]) -> list[Decided]:
        """This scheduler's waiting bulks that the rebuilt pool holds as granted. A held try whose row
        is no longer in the pool was released by a scheduler that took this one for stopped: it is
        admitted again, at the back of the queue."""
        found: list[Decided] = []
        for bulk_id in [*self.held, *self.copies.waiting]:
            grant = self.pool.grant_of(bulk_id)
            if bulk_id not in decided and grant is not None:
                found.append(Decided(grant, None))
            elif grant is None and not self.pool.is_waiting(bulk_id) and bulk_id in self.held:
                self._requeue.append(self.held.pop(bulk_id))
        return found

    def _start_decided(self, decided: list[Decided]) -> None:
        for item in decided:
            grant = item.grant
            if self.copies.owns(grant.bulk_id):
                guarded(self.log, f"launching speculative copy {grant.bulk_id}", self.copies.launch, grant)
                continue
            held = self.held.pop(grant.bulk_id, None)
            if held is None:  # another scheduler's bulk: that one starts it when it reads the store
                continue
            key = held.attempt.key
            self.waiting.pop(key, None)
            self.granted[key] = grant.bulk_id
            record = item.record
            if record is not None and record.granted_at is not None:
                guarded(self.log, "counting a grant", self.metrics.granted, record.granted_at - record.submitted_at)
            self._hand_over(held.workload, key)
        while self._requeue:
            held = self._requeue.pop(0)
            self.waiting.pop(held.attempt.key, None)
            self.log.warning("RegionExecutor: %s lost its place (another scheduler took this one for stopped); "
                             "it queues again", held.attempt.key)
            self.admit(held.workload, held.attempt)

    # ---- out --------------------------------------------------------------------------------------

    def end_of_run(self, key: Hashable, state: str) -> bool:
        """A run of try `key` ended: whether to report it. Not when the scheduler queued the try again
        before this end was read (reported, Airflow would take it for the new run's end)."""
        if self.runs.end_read(key):
            return True
        self.log.info("RegionExecutor: late %s of an earlier run of %s not reported", state, key)
        return False

    def not_stuck(self, key: Hashable, now: float, starting_s: float) -> str | None:
        """Why try `key`, QUEUED too long in Airflow's eyes, is not stuck (None: it is). It waits for its
        slots in FIFO order, or its latest run went to the workers less than `starting_s` before `now`
        (monotonic), so its worker is starting it."""
        if key in self.waiting:
            return f"keeps {key} waiting for its slots in FIFO order; it is not stuck"
        if self.runs.starting(key, now, starting_s):
            return f"handed {key} to its workers less than {starting_s:g} s ago; it is starting, not stuck"
        return None

    def after_end(self, key: Hashable, state: str) -> None:
        """The try's end was reported: its slots go back, or it leaves the queue if it still waited."""
        if key in self.granted:
            guarded(self.log, f"releasing the slots of {key}", self.release, self.granted.pop(key))
        elif key in self.waiting:  # failed by the scheduler while it waited for slots
            guarded(self.log, f"withdrawing {key}", self.withdraw, self.waiting[key],
                          f"withdrawn: the scheduler reported it {state} while it waited for slots")

    def release(self, bulk_id: str) -> None:
        """Give a bulk's slots back (or cancel it if it still waits) and start what that makes possible."""
        self._free(bulk_id)

    def withdraw(self, bulk_id: str, why: str) -> None:
        """Take a waiting try out of the queue (its task instance no longer wants to run)."""
        held = self.held.pop(bulk_id, None)
        if held is not None:
            self.waiting.pop(held.attempt.key, None)
            self.operations.note(held.workload, f"regionflow: {why}")
        self.log.info("RegionExecutor: %s %s", bulk_id, why)
        self._free(bulk_id, why)

    def withdraw_changed(self, states: Mapping[str, tuple[Any, int | None]], still_queued: frozenset[Any]) -> None:
        """Withdraw waiting tries whose task instance changed outside the executor: `states` maps task
        instance ids to their (state, try number) in Airflow's database (absent: deleted)."""
        for bulk_id, held in list(self.held.items()):
            state, try_number = states.get(held.attempt.ti_id, (None, None))
            if try_number == held.attempt.try_number and state in still_queued:
                continue
            now = now_is(state, try_number)
            self.withdraw(bulk_id, f"withdrawn from the slot queue: the task instance is {now} now")

    def unheard_ends(self, states: Mapping[str, tuple[Any, int | None]], live_states: frozenset[Any], now: float,
                     grace_s: float) -> list[tuple[Hashable, str]]:
        """Granted tries whose end never reached the executor, with what Airflow's database says of them:
        those that have looked ended there for `grace_s` seconds (`UnheardEnds.found`), to be ended with
        `end_unheard`. `states` maps task instance ids to their (state, try number) in Airflow's database."""
        return self._unheard.found(self.granted, states, live_states, now, grace_s)

    def ended_in_database(self, states: Mapping[str, tuple[Any, int | None]],
                          done_states: frozenset[Any]) -> list[tuple[Hashable, str | None]]:
        """Granted tries that Airflow's database shows done for good, before any worker reports it: their task
        instance (same try) is in `done_states`, is at another try, or is gone. Such a try's process runs no
        Spark work any more (an operator records its attempt's end before its task instance ends), so its slots
        can go back at once, as an Airflow pool's do when the state is written; the worker's report, which
        comes once the task process has exited, is read as usual (`end_early`). Not a deferred or rescheduled
        try: the same try comes back and its report must find it as it left. `states` maps task instance ids to
        their (state, try number) in Airflow's database. Each try comes with the note its grant row gets: None
        for the plain end of its run (a done state), what happened otherwise (another try, deleted)."""
        ended: list[tuple[Hashable, str | None]] = []
        for key, try_number, state, now_try in in_database(self.granted, states):
            if now_try == try_number and state in done_states:
                ended.append((key, None))
            elif now_try != try_number:
                ended.append((key, f"released: the task instance is {now_is(state, now_try)} in Airflow's database"))
        return ended

    def end_early(self, key: Hashable, note: str | None) -> None:
        """Release the slots of a try found by `ended_in_database`; its runs stay, for its worker's report."""
        self._unheard.forget(key)
        bulk_id = self.granted.pop(key, None)
        if bulk_id is not None:
            self._free(bulk_id, note)

    def granted_ti_ids(self) -> list[str]:
        """The task instance ids of the granted tries (what `unheard_ends` needs the states of)."""
        return [try_of(bulk_id)[0] for bulk_id in self.granted.values()]

    def end_unheard(self, key: Hashable, now_is: str) -> None:
        """End a granted try found by `unheard_ends`: its runs are forgotten and its slots go back."""
        self._unheard.forget(key)
        self.runs.forget(key)
        bulk_id = self.granted.pop(key, None)
        if bulk_id is not None:
            self.log.warning("RegionExecutor: %s is %s in Airflow's database, but no worker reported its end; "
                             "its slots are released", key, now_is)
            self._free(bulk_id, f"released: the task instance is {now_is} and no worker reported the end")

    def fail(self, workload: Any, key: Hashable, message: str) -> None:
        """Fail a try with `message`, freeing any slots it waits for or holds."""
        self.log.error("RegionExecutor: %s fails: %s", key, message)
        bulk_id = self.waiting.pop(key, None) or self.granted.pop(key, None)
        if bulk_id is not None:
            self.held.pop(bulk_id, None)
            guarded(self.log, "freeing its slots", self._free, bulk_id, message)
        self.runs.forget(key)
        self.operations.fail(workload, message)

    def fail_unexpected(self, workload: Any, key: Hashable, doing: str, error: BaseException) -> None:
        """An error of ours while handling a try: fail that try (its log says why), go on."""
        self.log.error("RegionExecutor: %s failed for %s; the task instance fails", doing, key, exc_info=error)
        self.fail(workload, key, f"regionflow: unexpected error while {doing}: {type(error).__name__}: {error}")

    def revoke(self, key: Hashable) -> None:
        """Forget a try handed to a worker that never started it: its slots go back (Airflow revoked it). One
        still waiting leaves the queue (Airflow queues it again)."""
        if key in self.waiting:
            self.withdraw(self.waiting[key], "revoked by Airflow (queued past [scheduler] task_queued_timeout)")
            return
        self.runs.forget(key)
        bulk_id = self.granted.pop(key, None)
        if bulk_id is not None:
            self.log.warning("RegionExecutor: %s revoked by Airflow (queued too long); its slots are released", key)
            self._free(bulk_id, "revoked: the try stayed queued after it got its slots")

    def leave_waiting(self) -> None:
        """The scheduler stops: waiting tries stay QUEUED in Airflow, and the next scheduler queues them again."""
        if self.held:
            self.log.info("RegionExecutor: leaving %d waiting task instance(s) queued", len(self.held))
        for bulk_id in list(self.held):
            self.pool.cancel(bulk_id)
        self.held.clear()
        self.waiting.clear()

    # ---- inside -----------------------------------------------------------------------------------

    def _admission(self, attempt: Try, bulk: Bulk) -> GrantRecord:
        record = self.store.admit(attempt.ti_id, attempt.try_number, dag_id=attempt.dag_id, run_id=attempt.run_id,
                                  task_id=attempt.task_id, map_index=attempt.map_index, job_id=bulk.job_id,
                                  label=bulk.label, requests=[p.to_dict() for p in bulk.requests], owner=self.owner)
        self.shared.wrote(record)
        return record

    def _gate_run(self, attempt: Try, record: GrantRecord) -> bool:
        """Whether this admission is the first of a try that `waits_for_inputs` while a producer unit its
        shard reads has no commit in the store: then it is recorded released at once (its task defers
        first, holding nothing) and the try runs without slots."""
        contract = attempt.contract
        if not (isinstance(contract, RegionSlots) and contract.waits_for_inputs):
            return False
        if record.state is not GrantState.WAITING or admission_of(record.bulk_id) != 1:
            return False
        committed = {commit.unit_key for commit in self.store.commits(attempt.dag_id, attempt.run_id)}
        if set(contract.inputs_of(attempt.map_index)) <= committed:
            return False  # its inputs are there: it queues for its slots at once
        self.shared.wrote(self.store.record_released(record.bulk_id, INPUTS_GATE_NOTE))
        return True

    def _hand_over(self, workload: Any, key: Hashable) -> None:
        self.runs.handed(key)
        self.operations.hand_over(workload)

    def _run_shortfall(self, attempt: Try, job_id: str) -> str:
        """A run's declaration, checked when a task of a region without upstream regions is queued
        (FLIP-138): '' when the cluster can serve every region of the run, else what it cannot."""
        contract = attempt.contract
        if not isinstance(contract, RegionSlots) or not contract.run_needs:
            return ""
        problems = self.pool.run_shortfalls(job_id, [(need.bulk_label(attempt.dag_id), need.requests)
                                                     for need in contract.run_needs])
        return f"not enough resources for run {job_id}: " + "; and ".join(problems) if problems else ""

    def _reject(self, workload: Any, bulk: Bulk, message: str,
                what: str = "this task can never get its slots") -> None:
        self.log.error("RegionExecutor rejects %s: %s", bulk.label, message)
        self.shared.wrote(guarded(self.log, "recording a rejection", self.store.record_rejected, bulk.bulk_id, message))
        guarded(self.log, "counting a rejection", self.metrics.rejected)
        self.operations.fail(workload, f"regionflow: {what}: {message}")

    def _free(self, bulk_id: str, message: str | None = None) -> None:
        # The store first: the pool's next decision is recorded at the version this release made. A
        # release the store missed is recorded again at the next sync; until then its slots stay taken
        # in the store, which is the truth, so nothing is granted on them.
        guarded(self.log, f"recording the release of {bulk_id}", self._record_released, bulk_id, message)
        if self.pool.is_waiting(bulk_id):
            grants = self.pool.cancel(bulk_id)
        elif self.pool.grant_of(bulk_id) is not None:
            grants = self.pool.release(bulk_id)
        else:
            grants = []
        self.start(grants)

    def _record_released(self, bulk_id: str, message: str | None) -> None:
        try:
            record = self.store.grant_for(bulk_id)
            if record is not None and record.state in (GrantState.WAITING, GrantState.GRANTED, GrantState.LOST):
                self.shared.wrote(self.store.record_released(bulk_id, message))
        except Exception:
            self._unrecorded[bulk_id] = message
            self.shared.invalidate()  # the pool lets the slots go, the store does not (yet)
            raise


def _as_admitted(bulk: Bulk, record: GrantRecord) -> Bulk:
    """`bulk` under its admission's id and with its admission's requests: an admission already waiting
    (this try queued again, or admitted by another scheduler) may hold a smaller request
    (`start_elastic`). Smaller ones always have fewer requests, so equal counts need no reading back."""
    if len(record.requests) == bulk.size:
        return replace(bulk, bulk_id=record.bulk_id)
    requests = tuple(ResourceProfile.from_dict(request) for request in record.requests)
    return replace(bulk, bulk_id=record.bulk_id, requests=requests)


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


__all__ = ["AdmissionGate", "Try", "WaitingTry", "WorkerOperations"]
