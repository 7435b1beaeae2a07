"""Tests of regionflow.spark.launch.targets: Spark's reading of the hosts scheduling knows (pure, no Spark)."""
import pytest

from regionflow.core.errors import SpecError
from regionflow.scheduling.hosts import Cluster
from regionflow.spark.launch.targets import check_cluster, parse_cluster, spark_target


def test_a_host_without_master_runs_local_with_its_cpus_or_pinned_cores():
    plain, pinned, given = parse_cluster("h1:slots=2,cpu=3;h2:4,affinity=0-1+5,cpu=3;"
                                         "h3:2,master=spark://127.0.0.1:7077").hosts
    assert spark_target(plain).master == "local[3]" and spark_target(plain).is_local
    assert spark_target(pinned).master == "local[3]" and spark_target(pinned).cpu_affinity == (0, 1, 5)
    assert spark_target(given).master == "spark://127.0.0.1:7077" and not spark_target(given).is_local
    assert spark_target(Cluster.local_default(slots=3).hosts[0]).master == "local[3]"


def test_fractional_cpus_still_give_one_local_thread():
    (host,) = parse_cluster("h:1,cpu=0.5").hosts
    assert spark_target(host).master == "local[1]"


@pytest.mark.parametrize(
    "spec, expected",
    [
        ("h1:2,master=mesos://m:5050", ["host 'h1'.master = 'mesos://m:5050'", "spark://host:port", "yarn"]),
        ("h1:2;h2:2,master=spark://m", ["host 'h2'.master = 'spark://m'", "spark://host:port"]),
        ("h1:2,master=spark://m:7077,affinity=0-1", ["host 'h1'", "affinity", "local", "drop affinity"]),
        ("h1:2,master=yarn,affinity=0", ["host 'h1'", "affinity", "master=yarn"]),
    ],
)
def test_spark_rules_refuse_the_host_at_fault(spec, expected):
    assert Cluster.parse(spec)  # the host model alone has no Spark rule
    with pytest.raises(SpecError) as error:
        parse_cluster(spec)
    for fragment in expected:
        assert fragment in str(error.value)


def test_check_cluster_returns_the_cluster_it_accepts():
    cluster = Cluster.parse("a:2,master=k8s://https://k:6443;b:1,master=local[1],affinity=2")
    assert check_cluster(cluster) is cluster

