"""Tests of regionflow.units.layout.grant_target: where one Spark application of a grant runs (pure).
The real 2-worker case is in test_standalone.py."""
from regionflow.scheduling.hosts import Cluster
from regionflow.spark.launch.submission import grant_target

CLUSTER = Cluster.parse("a:2;b:2;s1:1,master=spark://127.0.0.1:7077;s2:1,master=spark://127.0.0.1:7077;"
                        "t:1,master=spark://127.0.0.1:7078")


def test_a_grant_on_one_host_runs_there_with_all_its_slots():
    target = grant_target(["a", "a"], CLUSTER.host)
    assert (target.host.name, target.slots, target.held, target.note) == ("a", 2, 0, "")


def test_hosts_of_one_standalone_master_pool_their_slots_into_one_application():
    target = grant_target(["s1", "s2"], CLUSTER.host)
    assert (target.host.name, target.slots, target.held) == ("s1", 2, 0)


def test_local_hosts_and_other_masters_cannot_share_an_application_and_their_slots_are_held():
    local = grant_target(["a", "a", "b"], CLUSTER.host)
    assert (local.host.name, local.slots, local.held) == ("a", 2, 1)
    assert "runs on a with 2 slot(s); the slots on b (1) stay held" in local.note
    mixed = grant_target(["s1", "t", "s2"], CLUSTER.host)
    assert (mixed.host.name, mixed.slots, mixed.held) == ("s1", 2, 1) and "t (1)" in mixed.note


def test_session_servers_are_one_application_per_host():
    target = grant_target(["s1", "s2"], CLUSTER.host, pool_masters=False)
    assert (target.host.name, target.slots, target.held) == ("s1", 1, 1)
