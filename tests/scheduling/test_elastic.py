"""Elastic requests (`regionflow.scheduling.elastic`): a region with smaller requests starts at once
with the largest one the free slots hold when its full request would wait, never ahead of an older
bulk; and the pool's `grantable_now` query that decides it changes nothing."""
from regionflow.core.resources import UNKNOWN
from regionflow.scheduling.elastic import elastic_bulk, smaller_now
from regionflow.scheduling.hosts import Cluster
from regionflow.scheduling.pool import Bulk, SlotPool


def bulk(bulk_id, slots, job="j"):
    return Bulk(bulk_id, job, bulk_id, (UNKNOWN,) * slots)


SMALLER = [(UNKNOWN,) * 2, (UNKNOWN,)]


def test_the_full_request_when_it_is_free():
    pool = SlotPool(Cluster.parse("a:slots=4"))
    full = bulk("e", 4)
    assert elastic_bulk(pool, full, SMALLER) is full


def test_the_largest_smaller_request_the_free_slots_hold():
    pool = SlotPool(Cluster.parse("a:slots=4"))
    assert pool.submit(bulk("hog", 2))
    chosen = elastic_bulk(pool, bulk("e", 4), SMALLER)
    assert chosen.size == 2 and chosen.bulk_id == "e"
    assert pool.pending_count == 0 and pool.running_count == 1  # the query changed nothing
    assert [g.bulk_id for g in pool.submit(chosen)] == ["e"]


def test_never_ahead_of_an_older_waiting_bulk():
    pool = SlotPool(Cluster.parse("a:slots=4"))
    pool.submit(bulk("hog", 3))
    assert pool.submit(bulk("older", 4)) == []  # waits, and reserves the free slot
    full = bulk("e", 4)
    assert elastic_bulk(pool, full, SMALLER) is full


def test_not_on_a_host_blocklisted_for_its_job_and_not_when_nothing_fits():
    pool = SlotPool(Cluster.parse("a:slots=2;b:slots=2"))
    pool.submit(bulk("hog", 2, job="other"))  # on one host
    held = pool.grant_of("hog")
    free_host = "b" if held.hosts == ("a",) else "a"
    pool.block("j", free_host)
    full = bulk("e", 4)
    assert not pool.grantable_now(bulk("e2", 1))
    assert elastic_bulk(pool, full, SMALLER) is full
    assert elastic_bulk(pool, full, []) is full


def test_a_waiting_bulk_takes_a_smaller_request_only_while_it_waits_alone():
    pool = SlotPool(Cluster.parse("a:slots=4"))
    pool.submit(bulk("hog", 2))
    waiting = bulk("e", 4)
    assert pool.submit(waiting) == []
    chosen = smaller_now(pool, waiting, SMALLER)
    assert chosen is not None and chosen.size == 2 and pool.is_waiting("e")  # a query: e still waits
    assert pool.submit(bulk("other", 1)) == []  # behind e, which reserves the free slots
    assert smaller_now(pool, waiting, SMALLER) is None
