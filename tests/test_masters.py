"""Tests of regionflow.spark.launch.masters, the one parser of Spark master URLs (pure)."""
import pytest

from regionflow.core.errors import SpecError
from regionflow.spark.launch.masters import Master, MasterKind, master_problem


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


@pytest.mark.parametrize("text, port, host", [
    ("spark://127.0.0.1:99999", "99999", "127.0.0.1"),
    ("spark://127.0.0.1:0", "0", "127.0.0.1"),
    ("spark://m1:7077,m2:65536", "65536", "m2"),
    ("k8s://https://api.k:70000", "70000", "api.k"),
    ("k8s://api.k:0", "0", "api.k"),
])
def test_a_port_outside_1_to_65535_is_refused_naming_master_and_port(text, port, host):
    with pytest.raises(SpecError) as error:
        Master.parse(text)
    assert str(error.value) == (f"master {text!r} is not a usable master URL: its port {port} (host {host}) is outside "
                                f"1-65535; give a port from 1 to 65535")
    assert master_problem(text.replace(f":{port}", ":65535")) is None


def test_a_host_whose_master_port_is_out_of_range_is_refused_when_the_hosts_are_read():
    from regionflow.spark.launch.targets import parse_cluster

    with pytest.raises(SpecError, match=r"host 'a'.master = 'spark://127.0.0.1:99999': .*its port 99999"):
        parse_cluster("a:2,master=spark://127.0.0.1:99999")
