"""Tests of regionflow.spark.masters, the one parser of Spark master URLs (pure)."""
import pytest

from regionflow.core.errors import SpecError
from regionflow.spark.masters import Master, MasterKind, master_problem


@pytest.mark.parametrize("text, kind, url, endpoints, loopback", [
    ("local", MasterKind.LOCAL, "local", (), True),
    ("local[*]", MasterKind.LOCAL, "local[*]", (), True),
    (" local[3] ", MasterKind.LOCAL, "local[3]", (), True),
    ("spark://127.0.0.1:7077", MasterKind.STANDALONE, "spark://127.0.0.1:7077", (("127.0.0.1", 7077),), True),
    ("spark://m1:7077,[::1]:7078", MasterKind.STANDALONE, "spark://m1:7077,[::1]:7078",
     (("m1", 7077), ("::1", 7078)), False),
    ("yarn", MasterKind.YARN, "yarn", (), False),
    ("k8s://https://api.k:6443", MasterKind.KUBERNETES, "k8s://https://api.k:6443", (("api.k", 6443),), False),
    ("k8s://api.k", MasterKind.KUBERNETES, "k8s://https://api.k", (("api.k", 443),), False),
])
def test_every_accepted_form_parses(text, kind, url, endpoints, loopback):
    master = Master.parse(text)
    assert (master.kind, master.url, master.endpoints, master.loopback) == (kind, url, endpoints, loopback)
    assert master.is_local == (kind is MasterKind.LOCAL) and master_problem(text) is None


def test_a_local_master_is_sized_to_the_slots_and_a_cluster_master_is_kept():
    assert Master.parse("local[*]").sized(3).url == "local[3]"
    assert Master.parse("yarn").sized(3).url == "yarn"


@pytest.mark.parametrize("text, fragment", [
    ("", "empty"),
    ("mesos://m:5050", "not a Spark master regionflow runs; use local, local[k], local[*], spark://host:port, yarn"),
    ("spark://h", "not a standalone master URL"),
    ("spark://h:1,", "not a standalone master URL"),
    ("k8s://", "not a Kubernetes master URL; write k8s://https://host:port"),
    ("local[2,3]", "not a Spark master"),
    ("yarn-cluster", "not a Spark master"),
])
def test_other_text_is_an_error_naming_it_and_the_forms(text, fragment):
    assert fragment in master_problem(text)
    with pytest.raises(SpecError, match="master") as error:
        Master.parse(text)
    assert repr(text) in str(error.value)
