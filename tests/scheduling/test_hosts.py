import json
import math
import os

import pytest

from regionflow.core.errors import SpecError
from regionflow.core.resources import ResourceProfile
from regionflow.scheduling.hosts import Cluster, Host
from regionflow.scheduling.hostspec import hosts_from_text


def test_compact_spec_with_fields_divides_host_resources_evenly_per_slot():
    cluster = Cluster.parse("h1:slots=2,cpu=2,mem=4g;h2:slots=2,master=spark://127.0.0.1:7077,gpu=2")
    h1, h2 = cluster.hosts
    assert (h1.name, h1.slots) == ("h1", 2)
    assert h1.profile == ResourceProfile.of(cpu=2, heap_mib=4096)
    assert h1.slot_profile == ResourceProfile.of(cpu=1, heap_mib=2048)
    assert h1.address is None  # this machine: the runtime layer's default
    assert h2.address == "spark://127.0.0.1:7077"  # kept as written, never read by scheduling
    assert h2.slot_profile.extended_map == {"gpu": 1.0}


def test_short_form_names_and_slot_counts_with_defaults():
    cluster = Cluster.parse("h1:2,h2:3")
    assert [(h.name, h.slots) for h in cluster] == [("h1", 2), ("h2", 3)]
    assert cluster.hosts[1].slot_profile == ResourceProfile.of(cpu=1, heap_mib=1024)
    assert cluster.describe_capacity() == "5 slots in all (h1: 2, h2: 3)"


def test_one_gpu_over_two_slots_gives_half_a_gpu_per_slot():
    host = Cluster.parse("g:slots=2,gpu=1").hosts[0]
    assert host.slot_profile.extended_map == {"gpu": 0.5}
    assert not ResourceProfile.of(cpu=1, gpu=1).fits_in(host.slot_profile)


def test_slot_fields_override_one_dimension_and_derive_the_host_total():
    host = Cluster.parse("g:4,gpu=4,slot_mem=8g,affinity=0-3+8").hosts[0]
    assert host.slot_profile == ResourceProfile.of(cpu=1.25, heap_mib=8192, gpu=1)
    assert host.profile.heap_mib == 4 * 8192
    assert host.cpu_affinity == (0, 1, 2, 3, 8)
    assert host.profile.cpu == 5


def test_extended_resources_other_than_gpu():
    host = Cluster.parse("f:slots=2,ext.fpga=2,slot_managed=512m").hosts[0]
    assert host.slot_profile.extended_map == {"fpga": 1.0}
    assert host.slot_profile.managed_mib == 512


def test_json_and_dict_forms_match_the_text_form():
    text = Cluster.parse("h1:slots=2,cpu=2,mem=4g;h2:slots=2,master=spark://127.0.0.1:7077,gpu=2")
    data = [{"name": "h1", "slots": 2, "cpu": 2, "mem": "4g"},
            {"name": "h2", "slots": 2, "master": "spark://127.0.0.1:7077", "gpu": 2}]
    assert Cluster.from_dicts(data) == text
    assert Cluster.parse(json.dumps(data)) == text
    assert Cluster.from_json(json.dumps({"hosts": data})) == text


def test_the_text_form_reads_into_the_json_forms_dict_typed_as_the_model_declares():
    text = ("h1:2,cpu=2.5,mem=4g,heap=2048,gpu=nan,ext.fpga=1,slot_mem=1g,slot_ext.fpga=0.5,affinity=0-1,"
            "master=local;h2:x")
    first, second = hosts_from_text(text)
    assert first == {"name": "h1", "slots": 2, "cpu": 2.5, "mem": "4g", "heap": 2048, "gpu": first["gpu"],
                     "ext": {"fpga": 1}, "slot": {"mem": "1g", "ext": {"fpga": 0.5}}, "affinity": "0-1",
                     "master": "local"}
    assert math.isnan(first["gpu"]) and second == {"name": "h2", "slots": "x"}  # for the model to refuse


@pytest.mark.parametrize("text, expected", [
    ("h1:2,name=h2", "'name' is not a field of the text form"),
    ("h1:2,slot=2", "write slot_<field>=<value>"),
    ("h1:2,ext=2", "write ext.<name>=<amount>"),
    ("h1:2,x", "'x' is not a field; expected key=value"),
])
def test_the_text_form_refuses_what_has_no_place_in_the_dict(text, expected):
    with pytest.raises(SpecError, match="host 'h1'") as error:
        hosts_from_text(text)
    assert expected in str(error.value)


def test_to_dicts_round_trips_including_slot_overrides():
    cluster = Cluster.parse("a:3,cpu=3,mem=3g,gpu=3,slot_mem=512m;b:1,master=local[1],affinity=2;"
                            "c:1,master=spark://127.0.0.1:7077,properties_file=/srv/spark/app.properties")
    assert Cluster.from_dicts(json.loads(json.dumps(cluster.to_dicts()))) == cluster
    assert cluster.host("c").properties_file == "/srv/spark/app.properties"
    assert cluster.host("a").properties_file is None


def test_local_default_has_one_slot_per_core():
    cluster = Cluster.local_default()
    (host,) = cluster.hosts
    assert host.name == "localhost"
    assert host.slots == (os.cpu_count() or 1)
    assert host.address is None and host.profile.cpu == host.slots
    assert Cluster.local_default(slots=3).total_slots == 3


@pytest.mark.parametrize(
    "spec, expected",
    [
        ("h1:slots=x", ["host 'h1'.slots must be an integer", "got 'x'", "1 to 32768"]),
        ("h1:0", ["host 'h1'.slots is 0", "at least 1", "1 to 32768"]),
        ("h1:slots=nan", ["host 'h1'.slots must be an integer", "got nan"]),
        ("h1:slots=100000000", ["host 'h1'.slots is 100000000", "at most 32768", "1 to 32768"]),
        ("h1:2,cpu=inf", ["host 'h1'.cpu is inf", "finite"]),
        ("h1:2,cpus=2", ["host 'h1'", "'cpus'", "did you mean 'cpu'"]),
        ("h1:2,affinity=0-100000000", ["host 'h1'", "core 100000000", "below 8192"]),
        ("h1:2,mem=lots", ["host 'h1'.mem = 'lots'", "memory size", "4g"]),
        ("h1:2,cpus=4", ["host 'h1'", "unknown key 'cpus'", "allowed: name, slots, cpu"]),
        ("h1:2,cpu=0", ["host 'h1'.cpu is 0", "greater than 0"]),
        ("h1:2,gpu=-1", ["host 'h1'.gpu is -1", "at least 0"]),
        ("h1:2,master=", ["host 'h1'.master is empty"]),
        ("h1:2,affinity=3-1", ["host 'h1'.affinity = '3-1'", "0-3+8"]),
        ("h1:2,cpu=4,affinity=0-1", ["host 'h1'", "cpu=4", "affinity pins only 2 cores"]),
        ("h1:2,gpu=1,slot_gpu=1", ["host 'h1'", "slot_gpu=1", "gpu=1"]),
        ("h1:2,mem=1g,heap=2g", ["host 'h1'", "heap"]),
        ("h1:2,cpu=1,cpu=2", ["host 'h1'", "'cpu' is given twice"]),
        ("h1:2;h1:3", ["host 'h1'", "twice"]),
        ("h1:slots=2;h2:cpu=1", ["host 'h2' needs 'slots'"]),
        ("bad name:2", ["host name", "bad name"]),
        ("slots=2", ["NAME:SLOTS"]),
        ("   ", ["empty"]),
    ],
)
def test_bad_specs_name_the_host_the_field_and_what_is_expected(spec, expected):
    with pytest.raises(SpecError) as error:
        Cluster.parse(spec)
    for fragment in expected:
        assert fragment in str(error.value)


@pytest.mark.parametrize(
    "data, expected",
    [
        ({"name": "h1"}, ["host 'h1'", "slots"]),
        ({"name": "h1", "slots": True}, ["host 'h1'.slots", "got True"]),
        ({"name": "h1", "slots": 2, "slot": 3}, ["host 'h1'.slot", "object"]),
        ({"name": "h1", "slots": 2, "slot": {"mme": "2g"}}, ["host 'h1'.slot", "'mme'", "did you mean 'mem'"]),
        ({"name": "h1", "slots": 2, "cpus": 2}, ["host 'h1'", "'cpus'", "did you mean 'cpu'"]),
        ({"name": "h1", "slots": 2, "gpu": float("nan")}, ["host 'h1'.gpu is nan", "finite"]),
        ({"name": "h1", "slots": 40000}, ["host 'h1'.slots is 40000", "at most 32768"]),
        ({"name": "h1", "slots": 2, "affinity": [0, 9000]}, ["host 'h1'.affinity[1] is 9000", "at most 8191"]),
        ({"name": "h1", "slots": 2, "affinity": [0, "x"]}, ["host 'h1'", "affinity"]),
        ({"slots": 2}, ["host needs 'name'"]),
    ],
)
def test_bad_dicts_name_the_host_and_field(data, expected):
    with pytest.raises(SpecError) as error:
        Cluster.from_dicts([data])
    for fragment in expected:
        assert fragment in str(error.value)


def test_malformed_json_says_where():
    with pytest.raises(SpecError, match="line 1 column"):
        Cluster.parse("[{")


def test_host_of_builds_programmatically():
    host = Host.of("w", 2, cpu=4, mem="8g", gpu=2, master="spark://w:7077")
    assert host.slot_profile == ResourceProfile.of(cpu=2, heap_mib=4096, gpu=1)
