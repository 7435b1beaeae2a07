"""Input descriptors: compact round trip, built once per group, inline vs blob, invalidation, errors."""
from __future__ import annotations

import base64
import json
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from regionflow.core.errors import SpecError
from regionflow.spark.data.descriptors import (
    DescriptorCache,
    DescriptorError,
    PartitionLocation,
    bench_descriptors,
    bench_locations,
    deserialise,
    load_descriptor,
    serialise,
)


def locations(count, root="/data/run-1/units", host_of=lambda p: f"h{p % 3}"):
    return [PartitionLocation(p, host_of(p), f"{root}/src-{p // 10}/e0/p{p}") for p in range(count)]


class CountingBuild:
    def __init__(self, result):
        self.result, self.calls = result, 0

    def __call__(self):
        self.calls += 1
        return self.result


def test_round_trip_of_usual_locations():
    original = locations(250)
    assert deserialise(serialise(original)) == original


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 10**6), st.text(max_size=8), st.text(max_size=30))))
def test_round_trip_of_any_locations(rows):
    original = [PartitionLocation(*row) for row in rows]
    assert deserialise(serialise(original)) == original


def test_built_once_per_group_and_shared(tmp_path):
    cache = DescriptorCache(str(tmp_path))
    build = CountingBuild(locations(100))
    refs = [cache.ref_for(7, build) for _ in range(1000)]
    assert build.calls == 1
    assert all(ref is refs[0] for ref in refs)
    assert cache.stats.built == 1 and cache.stats.hits == 999
    assert load_descriptor(refs[0]) == locations(100)


def test_inline_below_the_threshold(tmp_path):
    cache = DescriptorCache(str(tmp_path / "blobs"))
    ref = cache.ref_for(1, lambda: locations(100))
    assert set(ref) == {"group", "inline"} and ref["group"] == 1
    assert not os.path.exists(tmp_path / "blobs")
    assert cache.stats.blobs_written == 0
    assert cache.stats.bytes_compressed < cache.stats.bytes_serialised
    assert load_descriptor(ref) == locations(100)


def test_blob_above_the_threshold_written_once(tmp_path):
    cache = DescriptorCache(str(tmp_path), offload_min_size=64)
    ref = cache.ref_for(3, lambda: locations(500))
    assert set(ref) == {"group", "blob", "sha256", "size"}
    assert os.path.basename(ref["blob"]) == f"g3-{ref['sha256'][:16]}.bin"
    assert os.path.getsize(ref["blob"]) == ref["size"] == cache.stats.bytes_compressed
    for _ in range(100):
        cache.ref_for(3, lambda: locations(500))
    assert cache.stats.blobs_written == 1
    assert os.listdir(tmp_path) == [os.path.basename(ref["blob"])]  # no temp file left behind
    assert load_descriptor(ref) == locations(500)


def test_invalidate_rebuilds_and_writes_a_new_blob(tmp_path):
    cache = DescriptorCache(str(tmp_path), offload_min_size=0)
    first = cache.ref_for(2, lambda: locations(50))
    cache.invalidate(2)
    moved = locations(50, root="/data/run-1/units-recommitted")
    build = CountingBuild(moved)
    second = cache.ref_for(2, build)
    assert build.calls == 1 and cache.stats.built == 2 and cache.stats.blobs_written == 2
    assert second["blob"] != first["blob"]
    assert load_descriptor(second) == moved
    cache.invalidate(99)  # unknown group: nothing to do


def test_lru_bound_evicts_and_rebuild_finds_the_blob(tmp_path):
    cache = DescriptorCache(str(tmp_path), offload_min_size=0, max_cache_bytes=300)
    for group in range(5):
        cache.ref_for(group, lambda: locations(20))
    assert cache.stats.evictions > 0 and 0 not in cache
    cache.ref_for(0, lambda: locations(20))
    assert cache.stats.built == 6 and cache.stats.blobs_written == 5  # group 0's blob was still there


def test_missing_blob_names_group_and_path(tmp_path):
    ref = DescriptorCache(str(tmp_path), offload_min_size=0).ref_for(5, lambda: locations(10))
    os.remove(ref["blob"])
    with pytest.raises(DescriptorError, match=rf"partition group 5: descriptor blob {ref['blob']} cannot be read"):
        load_descriptor(ref)


def test_corrupt_blob_names_group_and_path(tmp_path):
    ref = DescriptorCache(str(tmp_path), offload_min_size=0).ref_for(6, lambda: locations(10))
    with open(ref["blob"], "r+b") as handle:
        handle.write(b"\0\0\0")
    with pytest.raises(DescriptorError, match=rf"partition group 6: descriptor blob {ref['blob']} is corrupt"):
        load_descriptor(ref)


def test_corrupt_inline_and_malformed_refs():
    with pytest.raises(DescriptorError, match="partition group 1: its inline descriptor does not decode"):
        load_descriptor({"group": 1, "inline": base64.b64encode(b"not zlib").decode()})
    with pytest.raises(DescriptorError, match="partition group 1: the inline descriptor is not base64"):
        load_descriptor({"group": 1, "inline": "***"})
    with pytest.raises(DescriptorError, match="names no partition group"):
        load_descriptor({"inline": ""})
    with pytest.raises(DescriptorError, match="neither 'inline' nor 'blob'"):
        load_descriptor({"group": 2})


@pytest.mark.parametrize("value", [-1, 1.5, "1MiB", None, True])
def test_bad_offload_min_size_names_the_option(tmp_path, value):
    with pytest.raises(SpecError, match=r"option offload_min_size must be a non-negative integer"):
        DescriptorCache(str(tmp_path), offload_min_size=value)


def test_bench_locations_look_like_the_store_layout():
    first = bench_locations(250)[123]
    assert first.producer == 123 and first.host.startswith("h")
    assert first.path == "/tmp/rf-data/run-2026-11-22T00:00:00/units/source+sink-1/e0"


def test_bench_offloaded_ships_under_one_percent():
    figures = bench_descriptors(2000, offload_min_size=256, contrast_parallelism=None)
    assert figures["offloaded"] and figures["built"] == 1 and figures["hits"] == 1999
    assert figures["shipped_over_naive"] < 0.01
    assert figures["shipped_bytes"] == figures["compressed_bytes"] + figures["ref_bytes"] * 2000
    assert figures["naive_bytes"] == figures["naive_list_bytes"] * 2000
    assert figures["compression_ratio"] > 1


def test_bench_contrast_stays_inline():
    figures = bench_descriptors(500, contrast_parallelism=200)
    assert not figures["offloaded"] and not figures["contrast"]["offloaded"]
    assert figures["if_offloaded"]["offloaded"]
    assert figures["shipped_bytes"] == figures["ref_bytes"] * 500


def test_a_groups_shared_directory_is_stored_once_and_old_descriptors_still_load():
    shared = [PartitionLocation(p, "h0", f"/d/units/u{p // 100}/e0") for p in range(1000)]
    document = json.loads(serialise(shared))
    assert document["leaf"] == "e0" and len(document["dirs"]) == 10
    assert deserialise(serialise(shared)) == shared
    per_producer = [PartitionLocation(p, "h0", f"/d/units/u/e0/p{p}") for p in range(5)]
    assert json.loads(serialise(per_producer))["leaf"] is None
    assert deserialise(serialise(per_producer)) == per_producer
