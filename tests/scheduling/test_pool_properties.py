"""Property test: random clusters and event streams against an independent model of the rules.

The model tracks which slot holds what, the waiting queue, the blocklist and the clock, and
checks every grant the pool reports, in order, with its own brute-force matching:

* no host is over-committed (slot count, and the sum of request profiles on a host fits it);
* a grant is whole, uses free slots on live hosts its job is not blocklisted on, and each
  request sits in a slot whose offer it fits;
* a younger bulk is granted while an older one waits only when the oldest waiting bulk could not
  have been granted at that moment, and the grant leaves the oldest one's set-aside intact: in
  every slot class, at least min(free slots it may use there, its requests that fit there);
* submit rejects exactly the bulks the cluster (minus the job's blocklisted hosts) cannot hold;
  remove_host loses exactly the grants on the host and rejects exactly what no longer fits;
* the declared requirements equal the model's waiting requests;
* in the end, with entries expired and everything released, every accepted bulk was granted.
"""
from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from regionflow.core.resources import UNKNOWN, ResourceProfile
from regionflow.scheduling.errors import UnfulfillableBulk
from regionflow.scheduling.hosts import Host
from regionflow.scheduling.pool import Bulk, Grant, SlotPool

REQUEST_PROFILES = [
    ResourceProfile.of(cpu=1, heap_mib=512),
    ResourceProfile.of(cpu=1, heap_mib=2048),
    ResourceProfile.of(cpu=1, heap_mib=512, gpu=1),
    ResourceProfile.of(cpu=2, heap_mib=1024),
    UNKNOWN,
]
SLOT_OFFERS = [
    {"cpu": 1, "mem": 1024},
    {"cpu": 2, "mem": 2048},
    {"cpu": 1, "mem": 1024, "gpu": 1},
    {"cpu": 2, "mem": 4096, "gpu": 1},
]
JOBS = ["j0", "j1", "j2"]


def make_host(name: str, slots: int, offer: int) -> Host:
    return Host.of(name, slots, slot=SLOT_OFFERS[offer])


def can_match(requests: list[ResourceProfile], slots: list[tuple[str, int, ResourceProfile]]) -> bool:
    """Kuhn's augmenting-path matching of requests to distinct slots (small inputs only)."""
    owner: dict[int, int] = {}

    def place(request: int, seen: set[int]) -> bool:
        for slot, (_, _, offer) in enumerate(slots):
            if slot in seen or not requests[request].fits_in(offer):
                continue
            seen.add(slot)
            if slot not in owner or place(owner[slot], seen):
                owner[slot] = request
                return True
        return False

    return len(requests) <= len(slots) and all(place(r, set()) for r in range(len(requests)))


@dataclass
class Model:
    hosts: dict[str, Host] = field(default_factory=dict)  # insertion order = host order
    used: dict[tuple[str, int], str] = field(default_factory=dict)
    waiting: list[Bulk] = field(default_factory=list)
    running: dict[str, Grant] = field(default_factory=dict)
    bulks: dict[str, Bulk] = field(default_factory=dict)
    blocked_until: dict[tuple[str, str], float] = field(default_factory=dict)
    now: float = 0.0

    def is_blocked(self, job: str, host: str) -> bool:
        return self.blocked_until.get((job, host), -1.0) > self.now

    def free_slots_for(self, job: str | None) -> list[tuple[str, int, ResourceProfile]]:
        return [
            (name, index, host.slot_profile)
            for name, host in self.hosts.items()
            for index in range(host.slots)
            if (name, index) not in self.used and (job is None or not self.is_blocked(job, name))
        ]

    def all_slots_for(self, job: str | None) -> list[tuple[str, int, ResourceProfile]]:
        return [
            (name, index, host.slot_profile)
            for name, host in self.hosts.items()
            for index in range(host.slots)
            if job is None or not self.is_blocked(job, name)
        ]

    def fits_cluster(self, bulk: Bulk, mind_blocklist: bool) -> bool:
        return can_match(list(bulk.requests), self.all_slots_for(bulk.job_id if mind_blocklist else None))

    def set_aside(self, bulk: Bulk) -> dict[ResourceProfile, int]:
        """Per slot class: min(free slots `bulk` may use there, its requests that fit there)."""
        offers = {host.slot_profile for host in self.hosts.values()}
        free = Counter(offer for _, _, offer in self.free_slots_for(bulk.job_id))
        return {
            offer: min(free[offer], sum(1 for r in bulk.requests if r.fits_in(offer)))
            for offer in offers
        }

    def free_of(self, bulk: Bulk) -> Counter:
        return Counter(offer for _, _, offer in self.free_slots_for(bulk.job_id))

    def apply_grant(self, grant: Grant) -> None:
        bulk = self.bulks[grant.bulk_id]
        assert bulk in self.waiting, f"{grant.bulk_id} granted but not waiting"
        assert len(grant.slots) == len(bulk.requests), "grant is not whole"
        assert len(set(grant.slots)) == len(grant.slots), "a slot is used twice in one grant"
        head = self.waiting[0]
        if head is not bulk:
            assert not can_match(list(head.requests), self.free_slots_for(head.job_id)), (
                f"{bulk.bulk_id} was granted while the older {head.bulk_id} could have been"
            )
            before = self.set_aside(head)
        for (name, index), request in zip(grant.slots, bulk.requests, strict=True):
            host = self.hosts.get(name)
            assert host is not None, f"slot on unknown host {name}"
            assert 0 <= index < host.slots
            assert (name, index) not in self.used, f"slot {name}#{index} over-committed"
            assert request.fits_in(host.slot_profile), f"{request} does not fit a slot of {name}"
            assert not self.is_blocked(bulk.job_id, name), f"{bulk.job_id} placed on blocklisted {name}"
            self.used[(name, index)] = bulk.bulk_id
        self.waiting.remove(bulk)
        self.running[bulk.bulk_id] = grant
        if head is not bulk:
            free_after = self.free_of(head)
            for offer, kept in before.items():
                assert free_after[offer] >= kept, f"set-aside of head {head.bulk_id} broken by {bulk.bulk_id}"
        self.check_hosts_not_overcommitted()

    def check_hosts_not_overcommitted(self) -> None:
        load: dict[str, ResourceProfile] = {}
        for (name, index), bulk_id in self.used.items():
            grant = self.running[bulk_id]
            request = self.bulks[bulk_id].requests[grant.slots.index((name, index))]
            if not request.unknown:
                load[name] = load.get(name, ResourceProfile()) + request
        for name, total in load.items():
            assert total.fits_in(self.hosts[name].profile), f"host {name} over-committed: {total}"

    def release(self, bulk_id: str) -> None:
        grant = self.running.pop(bulk_id)
        for slot in grant.slots:
            self.used.pop((slot.host, slot.index), None)


OPERATION_MIX = ["submit"] * 6 + ["release"] * 4 + ["cancel", "block", "block", "block", "advance", "remove", "add"]

# An operation is a kind and one integer its parameters are decoded from: cheap to generate, and
# shrinking the integer towards 0 shrinks the parameters too.
operations = st.lists(st.tuples(st.sampled_from(OPERATION_MIX), st.integers(0, 10**6)), min_size=20, max_size=100)


def decode_picks(seed: int) -> list[int]:
    """1..5 request profile indices."""
    size = 1 + seed % 5
    return [(seed // 5 // len(REQUEST_PROFILES) ** i) % len(REQUEST_PROFILES) for i in range(size)]


clusters = st.lists(st.tuples(st.integers(1, 4), st.integers(0, len(SLOT_OFFERS) - 1)), min_size=1, max_size=4)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cluster=clusters, ops=operations, lookahead=st.sampled_from([1, 2, 32]))
def test_pool_keeps_its_promises(cluster, ops, lookahead):
    run_stream(cluster, ops, lookahead)


def test_pool_keeps_its_promises_on_seeded_random_streams():
    """The same checks on many plain-random streams: cheap to generate, so more of them."""
    for seed in range(400):
        rng = random.Random(seed)
        cluster = [(rng.randint(1, 4), rng.randrange(len(SLOT_OFFERS))) for _ in range(rng.randint(1, 4))]
        ops = [(rng.choice(OPERATION_MIX), rng.randrange(10**6)) for _ in range(rng.randint(20, 100))]
        run_stream(cluster, ops, rng.choice([1, 2, 32]))


def run_stream(cluster: list[tuple[int, int]], ops: list[tuple[str, int]], lookahead: int) -> None:
    model = Model()
    for i, (slots, offer) in enumerate(cluster):
        model.hosts[f"h{i}"] = make_host(f"h{i}", slots, offer)
    pool = SlotPool(list(model.hosts.values()), clock=lambda: model.now, blocklist_expiry_s=10,
                    backfill_lookahead=lookahead)
    names = iter(f"n{i}" for i in range(1000))
    counter = iter(range(100000))

    def apply(grants: list[Grant]) -> None:
        for grant in grants:
            model.apply_grant(grant)

    for kind, seed in ops:
        if kind == "submit":
            job = JOBS[seed % len(JOBS)]
            picks = decode_picks(seed // len(JOBS))
            bulk = Bulk(f"b{next(counter)}", job, "r", tuple(REQUEST_PROFILES[p] for p in picks))
            model.bulks[bulk.bulk_id] = bulk
            fits = model.fits_cluster(bulk, mind_blocklist=True)
            try:
                grants = pool.submit(bulk)
            except UnfulfillableBulk:
                assert not fits, f"{bulk} was rejected but fits the cluster"
                continue
            assert fits, f"{bulk} was accepted but can never fit"
            model.waiting.append(bulk)
            apply(grants)
        elif kind == "release" and model.running:
            bulk_id = sorted(model.running)[seed % len(model.running)]
            model.release(bulk_id)
            apply(pool.release(bulk_id))
        elif kind == "cancel" and model.waiting:
            bulk = model.waiting[seed % len(model.waiting)]
            model.waiting.remove(bulk)
            apply(pool.cancel(bulk.bulk_id))
        elif kind == "block" and model.hosts:
            job = JOBS[seed % len(JOBS)]
            name = list(model.hosts)[(seed // len(JOBS)) % len(model.hosts)]
            expiry = 5.0 if seed % 2 else 20.0
            entry = pool.block(job, name, expiry)
            model.blocked_until[(job, name)] = max(model.blocked_until.get((job, name), -1.0), entry.expires_at)
            assert entry.expires_at == model.blocked_until[(job, name)]
        elif kind == "advance":
            model.now += [1.0, 7.0, 30.0][seed % 3]
            apply(pool.poll())
        elif kind == "remove" and model.hosts:
            remove_host(model, pool, list(model.hosts)[seed % len(model.hosts)])
        elif kind == "add":
            host = make_host(next(names), 1 + seed % 4, (seed // 4) % len(SLOT_OFFERS))
            model.hosts[host.name] = host
            apply(pool.add_host(host))
        check_views(model, pool)

    drain(model, pool)


def remove_host(model: Model, pool: SlotPool, name: str) -> None:
    expected_lost = {bulk_id for (host, _), bulk_id in model.used.items() if host == name}
    loss = pool.remove_host(name)
    assert {grant.bulk_id for grant in loss.lost_grants} == expected_lost
    for bulk_id in expected_lost:
        model.release(bulk_id)
    del model.hosts[name]
    expected_rejected = [b.bulk_id for b in model.waiting if not model.fits_cluster(b, mind_blocklist=False)]
    assert [bulk.bulk_id for bulk, _ in loss.rejected] == expected_rejected
    model.waiting = [b for b in model.waiting if b.bulk_id not in set(expected_rejected)]
    for grant in loss.granted:
        model.apply_grant(grant)


def check_views(model: Model, pool: SlotPool) -> None:
    assert pool.pending_count == len(model.waiting)
    assert [b.bulk_id for b in pool.waiting_bulks()] == [b.bulk_id for b in model.waiting]
    total = sum(host.slots for host in model.hosts.values())
    assert pool.used_slots() == len(model.used) and pool.free_slots() == total - len(model.used)
    expected: dict[str, Counter] = {}
    for bulk in model.waiting:
        expected.setdefault(bulk.job_id, Counter()).update(bulk.requests)
    assert pool.declared() == {job: dict(counts) for job, counts in expected.items()}
    for job in JOBS:
        assert pool.requirements(job) == dict(expected.get(job, {}))


def drain(model: Model, pool: SlotPool) -> None:
    """Expire every entry, then release everything: every accepted bulk must get its slots."""
    model.now += 1000.0
    for grant in pool.poll():
        model.apply_grant(grant)
    while model.running:
        bulk_id = next(iter(model.running))
        model.release(bulk_id)
        for grant in pool.release(bulk_id):
            model.apply_grant(grant)
    assert model.waiting == [], f"starved: {[b.bulk_id for b in model.waiting]}"
    assert pool.pending_count == 0 and pool.used_slots() == 0
