import json

import pytest

from regionflow.core.errors import SpecError
from regionflow.core.resources import UNKNOWN, ResourceProfile
from regionflow.scheduling.blocklist import EVERY_JOB
from regionflow.scheduling.errors import SchedulingError, UnfulfillableBulk
from regionflow.scheduling.hosts import Cluster, Host
from regionflow.scheduling.pool import Bulk, SlotPool, SlotRef

CPU = ResourceProfile.of(cpu=1)
GPU = ResourceProfile.of(cpu=1, gpu=1)
BIG = ResourceProfile.of(cpu=1, heap_mib=4096)


class VirtualClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def bulk(bulk_id: str, size: int = 1, job: str = "job", profile: ResourceProfile = CPU, label: str = "") -> Bulk:
    return Bulk(bulk_id, job, label or f"region {bulk_id}", (profile,) * size)


def granted_ids(grants) -> list[str]:
    return [grant.bulk_id for grant in grants]


def make_pool(spec: str = "localhost:4", **options) -> tuple[SlotPool, VirtualClock]:
    clock = VirtualClock()
    return SlotPool(Cluster.parse(spec), clock=clock, **options), clock


# --- whole or nothing, FIFO -------------------------------------------------------------------

def test_a_bulk_gets_all_its_slots_or_none():
    pool, _ = make_pool("localhost:4")
    assert granted_ids(pool.submit(bulk("a", 3))) == ["a"]
    assert pool.submit(bulk("b", 2)) == []
    assert pool.free_slots() == 1 and pool.used_slots() == 3
    assert granted_ids(pool.release("a")) == ["b"]
    assert len(pool.grant_of("b").slots) == 2


def test_oldest_bulk_first_across_jobs():
    pool, _ = make_pool("localhost:4")
    pool.submit(bulk("running", 3, job="j0"))
    pool.submit(bulk("old", 2, job="j1"))
    assert pool.submit(bulk("young", 1, job="j2")) == []  # the free slot is set aside for "old"
    assert granted_ids(pool.release("running")) == ["old", "young"]


def test_bulks_that_end_together_free_their_slots_in_one_pass_oldest_waiting_first():
    pool, _ = make_pool("a:2;b:2")
    for name in ("r0", "r1", "r2", "r3"):
        pool.submit(bulk(name))
    pool.submit(bulk("big", 3))
    pool.submit(bulk("small"))
    # three slots freed in one pass go to the oldest waiting bulk, "big"; "small" stays behind it
    assert granted_ids(pool.release_all(["r0", "r1", "r2"])) == ["big"]
    assert pool.used_slots() == 4 and pool.is_waiting("small")
    assert granted_ids(pool.release_all([])) == []
    assert granted_ids(pool.release_all(["r3"])) == ["small"]


def test_release_all_checks_every_id_before_it_frees_any():
    pool, _ = make_pool("localhost:4")
    pool.submit(bulk("a", 2))
    pool.submit(bulk("b", 2))
    pool.submit(bulk("waiting", 2))
    with pytest.raises(SchedulingError, match="'waiting' is still waiting.*cancel it"):
        pool.release_all(["a", "waiting"])
    with pytest.raises(SchedulingError, match="bulk id 'a' twice; release each bulk once"):
        pool.release_all(["a", "b", "a"])
    assert pool.free_slots() == 0 and pool.grant_of("a") is not None  # nothing was released
    assert granted_ids(pool.release_all(["a", "b"])) == ["waiting"]
    assert pool.free_slots() == 2


def test_four_slot_bulk_is_not_starved_by_a_stream_of_single_slot_bulks():
    pool, _ = make_pool("localhost:4")
    for i in range(4):
        pool.submit(bulk(f"s{i}"))
    assert pool.submit(bulk("big", 4)) == []
    stream = iter(range(4, 1000))
    for i in range(3):
        pool.submit(bulk(f"s{next(stream)}"))
        assert pool.release(f"s{i}") == []
    pool.submit(bulk(f"s{next(stream)}"))
    assert granted_ids(pool.release("s3")) == ["big"]
    assert pool.pending_count == 4  # the stream waits behind the big region


def test_grant_lists_slots_in_request_order_and_packs_one_host():
    pool, _ = make_pool("a:2,gpu=2;b:4")
    (grant,) = pool.submit(Bulk("m", "job", "mixed", (CPU, GPU, CPU)))
    assert grant.slots == (SlotRef("b", 0), SlotRef("a", 0), SlotRef("b", 1))
    pool.release("m")
    (grant,) = pool.submit(Bulk("n", "job", "gpu and cpu", (GPU, CPU)))
    assert grant.hosts == ("a",)  # a mixed bulk that fits on one host goes to one host


def test_plain_cpu_work_does_not_take_gpu_slots_while_cheaper_ones_are_free():
    pool, _ = make_pool("g:2,gpu=2;c:2")
    (grant,) = pool.submit(bulk("cpu", 2))
    assert grant.hosts == ("c",)
    (grant,) = pool.submit(bulk("gpu", 2, profile=GPU))
    assert grant.hosts == ("g",)


def test_best_fit_host_keeps_empty_hosts_whole():
    pool, _ = make_pool("a:4;b:4")
    pool.submit(bulk("one", 1))
    (grant,) = pool.submit(bulk("three", 3))
    assert grant.hosts == ("a",)
    (grant,) = pool.submit(bulk("four", 4))
    assert grant.hosts == ("b",)


def test_a_bulk_larger_than_any_host_spreads_over_the_fewest_hosts():
    pool, _ = make_pool("a:2;b:4;c:3")
    (grant,) = pool.submit(bulk("x", 6))
    assert grant.hosts == ("b", "a")


def test_younger_bulk_backfills_slots_the_head_cannot_use():
    pool, _ = make_pool("g:2,gpu=2;c:2")
    pool.submit(bulk("gpu-busy", 2, profile=GPU))
    assert pool.submit(bulk("gpu-wait", 2, profile=GPU)) == []
    assert granted_ids(pool.submit(bulk("cpu", 2))) == ["cpu"]
    assert granted_ids(pool.release("gpu-busy")) == ["gpu-wait"]


def test_head_keeps_only_what_it_can_use_in_each_class():
    pool, _ = make_pool("g:2,gpu=2;c:4")
    pool.submit(bulk("gpu-busy", 2, profile=GPU))
    head = Bulk("head", "job", "one gpu one cpu", (GPU, CPU))
    assert pool.submit(head) == []  # waits for a gpu slot, sets one cpu slot aside
    assert granted_ids(pool.submit(bulk("cpu3", 3))) == ["cpu3"]
    assert pool.submit(bulk("cpu1", 1)) == []
    assert granted_ids(pool.release("gpu-busy")) == ["head", "cpu1"]
    assert pool.grant_of("head").hosts == ("g",)  # both requests fit a gpu slot: one host


# --- fulfillability -----------------------------------------------------------------------------

def test_bulk_larger_than_the_cluster_is_rejected_at_once():
    pool, _ = make_pool("localhost:4")
    with pytest.raises(UnfulfillableBulk) as error:
        pool.submit(bulk("b", 5, label="A+B #3"))
    assert str(error.value) == (
        "region 'A+B #3' needs 5 slots of cpu=1,heap=0MiB but the cluster has 4 slots in all (localhost: 4); "
        "lower the parallelism or add hosts"
    )
    assert error.value.label == "A+B #3" and error.value.bulk_id == "b"
    assert pool.pending_count == 0 and pool.requirements("job") == {}


def test_a_run_declares_its_regions_and_hears_which_the_cluster_can_never_serve():
    pool, _ = make_pool("h1:2;h2:2")
    pool.submit(bulk("busy", 4))
    pool.block("run", "h1")
    needs = [("scan", (CPU,) * 4), ("train", (GPU,)), ("wide", (CPU,) * 5), ("scan again", (CPU,) * 4)]
    problems = pool.run_shortfalls("run", needs)
    assert len(problems) == 2  # busy slots and the blocklisted host do not count: they come back
    assert problems[0].startswith("region 'train' needs 1 slot of cpu=1,heap=0MiB,gpu=1 but no host offers")
    assert problems[1] == ("region 'wide' needs 5 slots of cpu=1,heap=0MiB but the cluster has 4 slots in all "
                           "(h1: 2, h2: 2); lower the parallelism or add hosts")
    assert pool.pending_count == 0 and pool.requirements("run") == {}  # nothing was queued
    assert pool.run_shortfalls("run", needs[:1]) == []


def test_profile_no_host_offers_is_rejected_at_once():
    pool, _ = make_pool("h1:2;h2:2")
    with pytest.raises(UnfulfillableBulk) as error:
        pool.submit(bulk("b", 1, profile=GPU, label="train"))
    message = str(error.value)
    assert "region 'train' needs 1 slot of cpu=1,heap=0MiB,gpu=1" in message
    assert "no host offers a slot that fits" in message
    assert "gpu: asked 1 per slot, the largest slot offers 0 (host 'h1')" in message
    assert "h1: 2 x cpu=1,heap=1024MiB" in message


def test_profile_fitting_too_few_slots_is_rejected():
    pool, _ = make_pool("g:2,gpu=2;c:4")
    with pytest.raises(UnfulfillableBulk, match=r"needs 3 slots of .*gpu=1 but only 2 slots in all \(g: 2\) fit"):
        pool.submit(bulk("b", 3, profile=GPU))


def test_profiles_competing_for_the_same_slots_are_rejected():
    pool, _ = make_pool("g:2,gpu=2,mem=8g;c:2")
    with pytest.raises(UnfulfillableBulk, match="at most 2 of these requests fit"):
        pool.submit(Bulk("b", "job", "r", (GPU, BIG, BIG)))


def test_unknown_profile_fits_any_slot():
    pool, _ = make_pool("h:2")
    assert granted_ids(pool.submit(bulk("u", 2, profile=UNKNOWN))) == ["u"]


# --- blocklist ----------------------------------------------------------------------------------

def test_blocklisted_host_is_skipped_until_the_entry_expires():
    pool, clock = make_pool("h1:2;h2:2", blocklist_expiry_s=30)
    pool.block("job", "h1")
    (grant,) = pool.submit(bulk("a", 2))
    assert grant.hosts == ("h2",)
    assert pool.submit(bulk("b", 2)) == []
    assert granted_ids(pool.submit(bulk("other-job", 2, job="other"))) == ["other-job"]
    pool.release("other-job")
    assert pool.is_waiting("b")
    assert pool.next_wakeup() == 30.0
    clock.now = 30.0
    (grant,) = pool.poll()
    assert (grant.bulk_id, grant.hosts) == ("b", ("h1",))


def test_every_fitting_host_blocklisted_is_rejected_with_hosts_and_expiry():
    pool, clock = make_pool("h1:2;h2:2")
    pool.block("job", "h1", expiry_s=45)
    pool.block("job", "h2", expiry_s=10)
    clock.now = 5
    with pytest.raises(UnfulfillableBulk) as error:
        pool.submit(bulk("b", 1, label="scan"))
    message = str(error.value)
    assert "region 'scan' needs 1 slot" in message
    assert "blocklisted for job 'job'" in message
    assert "h1 for another 40 s" in message and "h2 for another 5 s" in message
    assert granted_ids(pool.submit(bulk("ok", 1, job="other"))) == ["ok"]


def test_too_few_slots_outside_the_blocklist_is_rejected():
    pool, _ = make_pool("h1:2;h2:2")
    pool.block("job", "h1")
    with pytest.raises(UnfulfillableBulk, match=r"only 2 slots in all \(h2: 2\) fit .*blocklisted for job 'job': h1"):
        pool.submit(bulk("b", 3))


def test_blocklist_added_after_submit_makes_the_bulk_wait_not_fail():
    pool, clock = make_pool("h1:2")
    pool.submit(bulk("busy", 2, job="other"))
    pool.submit(bulk("b", 2))
    pool.block("job", "h1", expiry_s=5)
    assert pool.release("busy") == []
    clock.now = 5
    assert granted_ids(pool.submit(bulk("c", 1, job="other"))) == ["b"]  # expiry noticed on the next call


def test_unblock_lifts_an_entry_at_once():
    pool, _ = make_pool("h1:1")
    pool.submit(bulk("x", 1, job="other"))
    pool.submit(bulk("b", 1))
    pool.block("job", "h1", expiry_s=1000)
    assert pool.release("x") == []
    assert granted_ids(pool.unblock("job", "h1")) == ["b"]


def test_an_entry_for_every_job_keeps_every_jobs_bulks_off_the_host_until_it_expires():
    """A lost host (EVERY_JOB entry) is out for every job, also for jobs with entries of their own and
    for jobs that arrive later, and comes back for all of them when the entry expires."""
    pool, clock = make_pool("h1:2;h2:2", blocklist_expiry_s=30)
    pool.block("own", "h2", expiry_s=100)  # a job-level entry, kept apart from the lost host
    pool.block(EVERY_JOB, "h1")
    assert pool.blocklist.is_blocked("anyone", "h1") and not pool.blocklist.is_blocked("anyone", "h2")
    assert pool.blocklist.hosts_for("own") == {"h1": 30.0, "h2": 100.0}
    (first,) = pool.submit(bulk("a", 2, job="j1"))
    assert first.hosts == ("h2",)
    assert pool.submit(bulk("b", 2, job="j2")) == []  # h2 is busy and h1 is out for j2 too
    with pytest.raises(UnfulfillableBulk, match=r"blocklisted for job 'own' \(h1 for another 30 s, h2 for another"):
        pool.submit(bulk("c", 1, job="own"))  # every host it could use is out
    (second,) = pool.release("a")
    assert (second.bulk_id, second.hosts) == ("b", ("h2",))
    pool.submit(bulk("d", 2, job="j3"))
    clock.now = 30.0
    (third,) = pool.poll()  # the entry expired: h1 is back for every job
    assert (third.bulk_id, third.hosts) == ("d", ("h1",))
    assert not pool.blocklist.is_blocked("j3", "h1") and pool.blocklist.is_blocked("own", "h2")


def test_a_blocked_heads_reservation_sits_off_its_blocklisted_hosts():
    pool, _ = make_pool("h1:2;h2:2")
    pool.submit(bulk("busy", 1, job="other"))      # h1 slot 0
    pool.block("job", "h2")
    assert pool.submit(bulk("head", 2)) == []       # can only use h1, which has one free slot
    assert granted_ids(pool.submit(bulk("y", 2, job="other"))) == ["y"]  # takes h2, not the head's h1 slot
    assert pool.grant_of("y").hosts == ("h2",)
    assert pool.submit(bulk("z", 1, job="other")) == []
    assert granted_ids(pool.release("busy")) == ["head"]


def test_a_new_entry_for_the_heads_job_moves_its_set_aside_off_that_host():
    pool, _ = make_pool("g:1,gpu=1;c:3;c2:2")
    pool.submit(bulk("gpu-busy", 1, job="other", profile=GPU))
    assert pool.submit(Bulk("head", "job", "gpu+cpu", (GPU, CPU))) == []
    pool.block("job", "c")
    (grant,) = pool.submit(bulk("y", 2, job="other"))
    assert grant.hosts == ("c",)  # c2 is the only cpu host the head may use: it stays free
    (grant,) = pool.release("gpu-busy")
    assert grant.bulk_id == "head" and grant.hosts == ("g", "c2")


# --- hosts coming and going ---------------------------------------------------------------------

def test_removing_a_host_reports_lost_grants_and_rejects_what_no_longer_fits():
    pool, _ = make_pool("h1:2;h2:2")
    pool.submit(bulk("on-h1", 2))
    pool.submit(bulk("on-h2", 1))
    pool.submit(bulk("needs-3", 3))
    pool.submit(bulk("needs-1", 1))
    loss = pool.remove_host("h1")
    assert loss.host == "h1"
    assert granted_ids(loss.lost_grants) == ["on-h1"]
    assert [(b.bulk_id, type(e)) for b, e in loss.rejected] == [("needs-3", UnfulfillableBulk)]
    assert "needs 3 slots" in str(loss.rejected[0][1]) and "h2: 2" in str(loss.rejected[0][1])
    assert granted_ids(loss.granted) == ["needs-1"]
    assert pool.total_slots() == 2 and pool.grant_of("on-h1") is None
    with pytest.raises(SchedulingError, match="holds no slots"):
        pool.release("on-h1")


def test_a_grant_spanning_hosts_is_lost_whole_and_frees_its_other_slots():
    pool, _ = make_pool("h1:2;h2:2")
    pool.submit(bulk("wide", 4))
    pool.submit(bulk("next", 2))
    loss = pool.remove_host("h2")
    assert granted_ids(loss.lost_grants) == ["wide"]
    assert granted_ids(loss.granted) == ["next"]


def test_adding_a_host_grants_waiting_bulks():
    pool, _ = make_pool("h1:2")
    pool.submit(bulk("a", 2))
    pool.submit(bulk("b", 2))
    (grant,) = pool.add_host(Host.of("h2", 2))
    assert (grant.bulk_id, grant.hosts) == ("b", ("h2",))


def test_adding_a_host_with_a_new_kind_of_slot_serves_waiting_bulks_of_it():
    pool, _ = make_pool("c:2")
    pool.submit(bulk("cpu", 2))
    pool.submit(bulk("cpu-wait", 1))
    with pytest.raises(UnfulfillableBulk):
        pool.submit(bulk("gpu", 1, profile=GPU))
    assert granted_ids(pool.add_host(Host.of("g", 1, gpu=1))) == ["cpu-wait"]
    assert granted_ids(pool.submit(bulk("gpu", 1, profile=GPU))) == []
    assert granted_ids(pool.release("cpu-wait")) == ["gpu"]


def test_host_errors_name_the_host():
    pool, _ = make_pool("h1:2")
    with pytest.raises(SchedulingError, match="no host named 'nope'.*h1"):
        pool.remove_host("nope")
    with pytest.raises(SchedulingError, match="'h1' is already in the pool"):
        pool.add_host(Host.of("h1", 1))


# --- declared requirements and notices ----------------------------------------------------------

def test_requirements_follow_submit_grant_cancel_and_release():
    pool, _ = make_pool("h:2,mem=8g")
    pool.submit(bulk("a", 2, job="j1"))
    pool.submit(bulk("b", 2, job="j1"))
    pool.submit(Bulk("c", "j2", "c", (CPU, BIG)))
    assert pool.requirements("j1") == {CPU: 2}
    assert pool.acquired("j1") == {CPU: 2}
    assert pool.declared() == {"j1": {CPU: 2}, "j2": {CPU: 1, BIG: 1}}
    pool.cancel("c")
    assert pool.declared() == {"j1": {CPU: 2}}
    pool.release("a")
    assert pool.requirements("j1") == {} and pool.declared() == {}
    assert pool.acquired("j1") == {CPU: 2}
    pool.release("b")
    assert pool.acquired("j1") == {}


def test_not_enough_resources_notice_after_the_grace_period():
    pool, clock = make_pool("h:2", resource_wait_timeout_s=60)
    pool.submit(bulk("running", 2, job="j1"))
    pool.submit(bulk("waiting", 2, job="j2", label="sort #0"))
    clock.now = 59
    assert pool.overdue_jobs() == []
    (notice,) = pool.overdue_jobs(now=61)
    assert notice.job_id == "j2" and notice.oldest_bulk_id == "waiting" and notice.waiting_s == 61
    assert notice.outstanding == {CPU: 2} and notice.acquired == {}
    assert "job 'j2' has waited 61 s for 2 slots of cpu=1,heap=0MiB" in notice.message
    assert "'sort #0'" in notice.message and "resource_wait_timeout" in notice.message
    pool.release("running")
    assert pool.overdue_jobs(now=100) == []


# --- API errors and views -----------------------------------------------------------------------

def test_misuse_is_reported_clearly():
    pool, _ = make_pool("h:1")
    pool.submit(bulk("a"))
    pool.submit(bulk("b"))
    with pytest.raises(SchedulingError, match="already running"):
        pool.submit(bulk("a"))
    with pytest.raises(SchedulingError, match="still waiting"):
        pool.release("b")
    with pytest.raises(SchedulingError, match="running, not waiting"):
        pool.cancel("a")
    with pytest.raises(SchedulingError, match="not waiting"):
        pool.cancel("zzz")
    with pytest.raises(SchedulingError, match="no slot requests"):
        Bulk("e", "job", "empty", ())


def test_cancelling_the_head_lets_the_next_bulk_run():
    pool, _ = make_pool("h:2")
    pool.submit(bulk("a", 1))
    pool.submit(bulk("head", 2))
    assert pool.submit(bulk("small", 1)) == []
    assert granted_ids(pool.cancel("head")) == ["small"]


def test_snapshot_is_json_and_lists_waiting_bulks_oldest_first():
    pool, clock = make_pool("h1:2;h2:2")
    pool.submit(bulk("a", 3))
    pool.submit(bulk("b", 2))
    pool.submit(bulk("c", 1, job="j2"))
    pool.block("j2", "h1", expiry_s=10)
    clock.now = 4
    snap = json.loads(json.dumps(pool.snapshot()))
    assert [(h["name"], h["used"], h["free"]) for h in snap["hosts"]] == [("h1", 2, 0), ("h2", 1, 1)]
    assert [p["bulk_id"] for p in snap["pending"]] == ["b", "c"]
    assert snap["pending"][0]["waiting_s"] == 4
    assert snap["blocklist"] == [{"job_id": "j2", "host": "h1", "expires_in_s": 6.0}]
    assert snap["running"][0]["slots"] == [["h1", 0], ["h1", 1], ["h2", 0]]


@pytest.mark.parametrize("lookahead, backfilled", [(1, []), (2, ["cpu"])])
def test_lookahead_bounds_how_many_blocked_bulks_a_pass_looks_past(lookahead, backfilled):
    pool, _ = make_pool("g:1,gpu=1;c:2", backfill_lookahead=lookahead)
    pool.submit(bulk("gpu-busy", 1, profile=GPU))
    assert pool.submit(bulk("gpu-wait", 1, profile=GPU)) == []
    assert granted_ids(pool.submit(bulk("cpu", 1))) == backfilled


def test_bad_lookahead_is_refused():
    with pytest.raises(SpecError, match="backfill_lookahead"):
        SlotPool(Cluster.parse("h:1"), backfill_lookahead=0)


def test_restore_retakes_exact_slots_and_refuses_double_grants():
    from regionflow.scheduling.capacity import SlotRef

    pool = SlotPool(Cluster.parse("a:2;b:2"))
    restored = pool.restore(Bulk("old", "job", "region", (UNKNOWN, UNKNOWN)), [SlotRef("b", 0), SlotRef("b", 1)])
    assert restored.hosts == ("b",) and pool.free_slots() == 2
    assert pool.acquired("job") == {UNKNOWN: 2}
    assert pool.submit(Bulk("new", "job", "r2", (UNKNOWN,) * 3)) == []  # waits: only 2 free
    with pytest.raises(SchedulingError, match="already taken"):
        pool.restore(Bulk("twice", "job", "r3", (UNKNOWN,)), [SlotRef("b", 1)])
    granted = pool.release("old")
    assert [g.bulk_id for g in granted] == ["new"] and pool.free_slots() == 1


def test_reset_forgets_every_bulk_keeps_hosts_and_blocklist_and_rebuilds_to_the_same_decisions():
    """The executor rebuilds its pool from the store's rows: reset, restore the live grants, submit the
    waiting bulks in order; the rebuilt pool then decides as the original would have."""
    original = SlotPool(Cluster.parse("a:2;b:2"), blocklist_expiry_s=60)
    original.block("job2", "a")
    held = original.submit(Bulk("held", "job1", "r", (UNKNOWN,) * 3))
    assert [g.bulk_id for g in held] == ["held"]
    original.submit(Bulk("big", "job1", "r", (UNKNOWN,) * 2))
    original.submit(Bulk("small", "job2", "r", (UNKNOWN,)))  # would fit on b, but waits behind big (FIFO)
    slots = original.grant_of("held").slots
    rebuilt = SlotPool(Cluster.parse("a:2;b:2"), blocklist_expiry_s=60)
    rebuilt.block("job2", "a")
    rebuilt.submit(Bulk("stale", "job9", "r", (UNKNOWN,)))  # what the cache held before: forgotten
    rebuilt.reset()
    assert rebuilt.free_slots() == 4 and rebuilt.pending_count == 0 and rebuilt.running_count == 0
    assert set(rebuilt.blocklist.hosts_for("job2")) == {"a"} and [h.name for h in rebuilt.hosts()] == ["a", "b"]
    rebuilt.restore(Bulk("held", "job1", "r", (UNKNOWN,) * 3), list(slots))
    assert rebuilt.submit(Bulk("big", "job1", "r", (UNKNOWN,) * 2), waited_s=5) == []
    assert rebuilt.submit(Bulk("small", "job2", "r", (UNKNOWN,))) == []
    assert [g.bulk_id for g in rebuilt.release("held")] == [g.bulk_id for g in original.release("held")]
