"""ResourceProfile: arithmetic, fitting, (de)serialisation, validation."""
from __future__ import annotations

import pytest

from regionflow.core.errors import RegionflowError, ResourceError
from regionflow.core.resources import UNKNOWN, ZERO, ResourceProfile


def test_of_and_extended():
    profile = ResourceProfile.of(cpu=1.5, heap_mib=512, off_heap_mib=64, managed_mib=128, gpu=1, fpga=0)
    assert profile.cpu == 1.5 and profile.heap_mib == 512 and profile.off_heap_mib == 64
    assert profile.managed_mib == 128
    assert profile.extended == (("gpu", 1),)  # zero extended resources are dropped
    assert profile.extended_map == {"gpu": 1}
    assert not profile.unknown


def test_addition():
    a = ResourceProfile.of(cpu=1, heap_mib=100, gpu=1)
    b = ResourceProfile.of(cpu=2, managed_mib=50, gpu=2, tpu=1)
    assert a + b == ResourceProfile.of(cpu=3, heap_mib=100, managed_mib=50, gpu=3, tpu=1)
    assert a + ZERO == a
    assert (a + UNKNOWN).unknown and (UNKNOWN + a).unknown


def test_subtraction():
    a = ResourceProfile.of(cpu=4, heap_mib=1000, gpu=2)
    b = ResourceProfile.of(cpu=1, heap_mib=400, gpu=2)
    assert a - b == ResourceProfile.of(cpu=3, heap_mib=600)
    assert a - UNKNOWN == a
    with pytest.raises(ResourceError):
        b - a


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_nan_and_infinity_rejected(value):
    for field in ("cpu", "heap_mib", "managed_mib", "gpu"):
        with pytest.raises(ResourceError) as info:
            ResourceProfile.of(**{field: value})
        assert field in str(info.value) and "finite" in str(info.value)
    with pytest.raises(ResourceError):
        ResourceProfile.from_dict({"cpu": value})


def test_negative_rejected():
    for field in ("cpu", "heap_mib", "off_heap_mib", "managed_mib"):
        with pytest.raises(ResourceError) as info:
            ResourceProfile.of(**{field: -1})
        assert field in str(info.value)
        assert isinstance(info.value, RegionflowError)
    with pytest.raises(ResourceError) as info:
        ResourceProfile.of(gpu=-1)
    assert "gpu" in str(info.value)


def test_fits_in():
    small = ResourceProfile.of(cpu=1, heap_mib=100, gpu=1)
    big = ResourceProfile.of(cpu=2, heap_mib=200, gpu=1)
    assert small.fits_in(big)
    assert not big.fits_in(small)
    assert not small.fits_in(ResourceProfile.of(cpu=2, heap_mib=200))  # no gpu offered
    assert UNKNOWN.fits_in(small) and UNKNOWN.fits_in(UNKNOWN)
    assert not small.fits_in(UNKNOWN)
    assert ResourceProfile.of(cpu=0.1 + 0.2).fits_in(ResourceProfile.of(cpu=0.3))


def test_scaled():
    profile = ResourceProfile.of(cpu=1, heap_mib=101, gpu=2)
    assert profile.scaled(2) == ResourceProfile.of(cpu=2, heap_mib=202, gpu=4)
    assert profile.scaled(0.5).heap_mib == 50
    assert UNKNOWN.scaled(3) is UNKNOWN


def test_dict_round_trip():
    profile = ResourceProfile.of(cpu=2, heap_mib=512, managed_mib=64, gpu=1)
    data = profile.to_dict()
    assert data == {"cpu": 2, "heap_mib": 512, "off_heap_mib": 0, "managed_mib": 64, "gpu": 1}
    assert ResourceProfile.from_dict(data) == profile
    assert UNKNOWN.to_dict() == {"unknown": True}
    assert ResourceProfile.from_dict({"unknown": True}) is UNKNOWN
    assert ResourceProfile.from_dict(None) is UNKNOWN
    assert ResourceProfile.from_dict({}) is UNKNOWN
    assert ResourceProfile.from_dict({"cpu": 0}) == ZERO and not ResourceProfile.from_dict({"cpu": 0}).unknown


@pytest.mark.parametrize("data", [{"cpu": "1"}, {"heap_mib": None}, {"gpu": True}, {"cpu": [1]}])
def test_from_dict_rejects_non_numbers(data):
    with pytest.raises(ResourceError) as info:
        ResourceProfile.from_dict(data)
    assert next(iter(data)) in str(info.value)


def test_is_zero_and_describe():
    assert ZERO.is_zero() and not UNKNOWN.is_zero() and not ResourceProfile.of(gpu=1).is_zero()
    assert UNKNOWN.describe() == "unknown (default slot)"
    assert str(ResourceProfile.of(cpu=1.5, heap_mib=10, managed_mib=5, gpu=1)) == (
        "cpu=1.5,heap=10MiB,managed=5MiB,gpu=1"
    )


def test_unknown_is_not_zero():
    assert UNKNOWN != ZERO
    assert UNKNOWN.unknown and not ZERO.unknown
