"""Input descriptors: where a consumer subtask finds the partitions of one consumed partition group.

Seed 004's ShuffleDescriptors, for regionflow. Every consumer of a partition group reads the same
list of partition locations, so the list is built once per group (not once per consumer), cached,
serialised compactly, compressed, and handed out as a small JSON-able *reference*: inline (base64)
when the compressed form is at most `offload_min_size` bytes, otherwise written once to a blob file
that every consumer reads (Flink's blob server, here a shared directory). This module owns the
format, the cache with its statistics, the consumer-side loader and the benchmark. No PySpark.

The serialised form is column-oriented JSON: a table of hosts, the directories of the paths with
their shared prefix factored out, producer ids as ranges, one host index and one directory index per
location, and the last path component only when it is not the usual ``p{producer}``. Paths of one
unit share a directory and a host, so the columns are long runs that zlib squeezes to almost nothing.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import random
import tempfile
import threading
import time
import zlib
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from typing import Any, NamedTuple

from ...core.errors import RegionflowError, SpecError
from .filesystems import FileSystem, filesystem_for, join, write_atomically

FORMAT_VERSION = 1
DEFAULT_OFFLOAD_MIN_SIZE = 1 << 20  # Flink's blob.offload.minsize
DEFAULT_MAX_CACHE_BYTES = 64 << 20
COMPRESSION_LEVEL = 6


class DescriptorError(RegionflowError):
    """An input descriptor cannot be loaded (missing or corrupt blob, malformed reference)."""


class PartitionLocation(NamedTuple):
    producer: int  # global subtask id
    host: str
    path: str


# ---- the compact format ---------------------------------------------------------------------------


def serialise(locations: Iterable[PartitionLocation]) -> bytes:
    hosts: dict[str, int] = {}
    dirs: dict[str, int] = {}
    producers: list[int] = []
    host_column: list[int] = []
    dir_column: list[int] = []
    leaves: list[str] = []
    for producer, host, path in locations:
        cut = path.rfind("/") + 1
        directory, leaf = path[:cut], path[cut:]
        producers.append(producer)
        host_column.append(hosts.setdefault(host, len(hosts)))
        dir_column.append(dirs.setdefault(directory, len(dirs)))
        leaves.append(leaf)
    prefix = os.path.commonprefix(list(dirs)) if dirs else ""
    document = {
        "v": FORMAT_VERSION,
        "n": len(producers),
        "hosts": list(hosts),
        "prefix": prefix,
        "dirs": [directory[len(prefix):] for directory in dirs],
        "producers": _to_ranges(producers),
        "host": host_column,
        "dir": dir_column,
        "leaf": _leaf_column(producers, leaves),
    }
    return json.dumps(document, separators=(",", ":")).encode("utf-8")


def deserialise(data: bytes) -> list[PartitionLocation]:
    document = json.loads(data)
    if document.get("v") != FORMAT_VERSION:
        raise ValueError(f"descriptor format version {document.get('v')!r}, expected {FORMAT_VERSION}")
    producers = [p for start, count in document["producers"] for p in range(start, start + count)]
    hosts = document["hosts"]
    dirs = [document["prefix"] + directory for directory in document["dirs"]]
    leaf = document["leaf"]
    if leaf is None:  # the layout before per-unit edge datasets: one directory per producer
        leaves = [f"p{producer}" for producer in producers]
    else:
        leaves = [leaf] * len(producers) if isinstance(leaf, str) else leaf
    columns = (producers, document["host"], document["dir"], leaves)
    if any(len(column) != document["n"] for column in columns):
        raise ValueError(f"descriptor columns disagree on the location count {document['n']}")
    return [PartitionLocation(p, hosts[h], dirs[d] + leaf) for p, h, d, leaf in zip(*columns, strict=False)]


def _leaf_column(producers: list[int], leaves: list[str]) -> str | list[str] | None:
    """One leaf shared by every location (``e<edge>``, the edge dataset of each producer unit: the
    usual case), None for leaves that are ``p<producer>``, else the whole column."""
    if leaves and all(leaf == leaves[0] for leaf in leaves):
        return leaves[0]
    if all(leaf == f"p{producer}" for producer, leaf in zip(producers, leaves, strict=False)):
        return None
    return leaves


def _to_ranges(values: list[int]) -> list[list[int]]:
    """[3, 4, 5, 9] -> [[3, 3], [9, 1]]: (start, count) runs of consecutive ids."""
    ranges: list[list[int]] = []
    for value in values:
        if ranges and ranges[-1][0] + ranges[-1][1] == value:
            ranges[-1][1] += 1
        else:
            ranges.append([value, 1])
    return ranges


def compress(data: bytes) -> bytes:
    return zlib.compress(data, COMPRESSION_LEVEL)


# ---- the producer side: one reference per group ------------------------------------------------------


@dataclass
class DescriptorStats:
    built: int = 0
    hits: int = 0
    bytes_serialised: int = 0
    bytes_compressed: int = 0
    blobs_written: int = 0
    evictions: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


class _Entry(NamedTuple):
    ref: dict[str, Any]
    weight: int  # bytes the entry pins in memory


class DescriptorCache:
    """Builds each group's descriptor once and hands every consumer the same small reference.

    `ref_for` returns a shared dict: treat it as read-only. The in-memory cache is an LRU bounded by
    `max_cache_bytes` (inline descriptors weigh their base64 size); an evicted group is rebuilt on the
    next request, and its blob, named by content, is found in place rather than written again.
    Blob files stay in `blob_dir` until the run's directory is removed: a consumer that already holds
    a reference may still be reading one.
    """

    def __init__(self, blob_dir: str, offload_min_size: int = DEFAULT_OFFLOAD_MIN_SIZE, *,
                 max_cache_bytes: int = DEFAULT_MAX_CACHE_BYTES, fs: FileSystem | None = None,
                 spark: Any = None) -> None:
        self.blob_dir = blob_dir
        self.offload_min_size = _byte_option("offload_min_size", offload_min_size)
        self.max_cache_bytes = _byte_option("max_cache_bytes", max_cache_bytes)
        self.fs: FileSystem = fs if fs is not None else filesystem_for(blob_dir, spark)
        self.stats = DescriptorStats()
        self._entries: OrderedDict[int, _Entry] = OrderedDict()
        self._weight = 0
        self._lock = threading.Lock()

    def ref_for(self, group_id: int, build: Callable[[], list[PartitionLocation]]) -> dict[str, Any]:
        """The reference consumers of `group_id` get; `build` runs only when the group is not cached."""
        with self._lock:
            entry = self._entries.get(group_id)
            if entry is not None:
                self._entries.move_to_end(group_id)
                self.stats.hits += 1
                return entry.ref
            ref = self._make_ref(group_id, build())
            self._remember(group_id, _Entry(ref, _weight_of(ref)))
            return ref

    def invalidate(self, group_id: int) -> None:
        """The group's partitions were recommitted or lost: the next `ref_for` rebuilds it."""
        with self._lock:
            entry = self._entries.pop(group_id, None)
            if entry is not None:
                self._weight -= entry.weight

    def __contains__(self, group_id: int) -> bool:
        return group_id in self._entries

    def _make_ref(self, group_id: int, locations: list[PartitionLocation]) -> dict[str, Any]:
        serialised = serialise(locations)
        compressed = compress(serialised)
        self.stats.built += 1
        self.stats.bytes_serialised += len(serialised)
        self.stats.bytes_compressed += len(compressed)
        if len(compressed) <= self.offload_min_size:
            return {"group": group_id, "inline": base64.b64encode(compressed).decode("ascii")}
        digest = hashlib.sha256(compressed).hexdigest()
        path = join(self.blob_dir, f"g{group_id}-{digest[:16]}.bin")
        self._write_blob(path, compressed)
        return {"group": group_id, "blob": path, "sha256": digest, "size": len(compressed)}

    def _write_blob(self, path: str, data: bytes) -> None:
        if self.fs.exists(path) and self.fs.size(path) == len(data):
            return  # same name, same size: the same content, written before an eviction or invalidation
        self.fs.mkdirs(self.blob_dir)
        write_atomically(self.fs, path, data, replace=True)
        self.stats.blobs_written += 1

    def _remember(self, group_id: int, entry: _Entry) -> None:
        self._entries[group_id] = entry
        self._weight += entry.weight
        while self._weight > self.max_cache_bytes and len(self._entries) > 1:
            _, evicted = self._entries.popitem(last=False)
            self._weight -= evicted.weight
            self.stats.evictions += 1


def _weight_of(ref: dict[str, Any]) -> int:
    return 100 + len(ref.get("inline", "")) + len(ref.get("blob", ""))


def _byte_option(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise SpecError(f"option {name} must be a non-negative integer number of bytes, got {value!r}; "
                        f"e.g. {name}={DEFAULT_OFFLOAD_MIN_SIZE} (1 MiB)")
    return value


# ---- the consumer side ---------------------------------------------------------------------------------


def load_descriptor(ref: dict[str, Any], fs: FileSystem | None = None, spark: Any = None) -> list[PartitionLocation]:
    """The partition locations a reference stands for; verifies a blob's sha256."""
    group = ref.get("group") if isinstance(ref, dict) else None
    if group is None:
        raise DescriptorError(f"malformed input descriptor reference {ref!r}: it names no partition group")
    if "inline" in ref:
        compressed = _decode_inline(group, ref["inline"])
        origin = "its inline descriptor"
    elif "blob" in ref:
        compressed = _read_blob(group, ref, fs if fs is not None else filesystem_for(ref["blob"], spark))
        origin = f"blob {ref['blob']}"
    else:
        raise DescriptorError(f"input descriptor reference of partition group {group} has neither "
                              f"'inline' nor 'blob': {sorted(ref)}")
    try:
        return deserialise(zlib.decompress(compressed))
    except (zlib.error, ValueError, KeyError, TypeError, IndexError) as error:
        raise DescriptorError(f"partition group {group}: {origin} does not decode ({error}); "
                              f"the scheduler must invalidate and rebuild the group's descriptor") from error


def _decode_inline(group: int, text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError, TypeError) as error:
        raise DescriptorError(f"partition group {group}: the inline descriptor is not base64 ({error})") from error


def _read_blob(group: int, ref: dict[str, Any], fs: FileSystem) -> bytes:
    path = ref["blob"]
    try:
        data = fs.read_bytes(path)
    except OSError as error:
        raise DescriptorError(
            f"partition group {group}: descriptor blob {path} cannot be read ({error}); the blob dir must be "
            f"shared with every host running consumers and kept until the run ends"
        ) from error
    digest = hashlib.sha256(data).hexdigest()
    if digest != ref.get("sha256"):
        raise DescriptorError(
            f"partition group {group}: descriptor blob {path} is corrupt (sha256 {digest[:16]}..., {len(data)} "
            f"bytes; expected {str(ref.get('sha256'))[:16]}..., {ref.get('size')} bytes); the scheduler must "
            f"invalidate and rebuild the group's descriptor"
        )
    return data


# ---- benchmark -------------------------------------------------------------------------------------------


BENCH_ROOT = "/tmp/rf-data/run-2026-11-22T00:00:00/units"
BENCH_HOSTS = 10
BENCH_UNIT_SIZE = 100  # producers per unit: a unit ran on one host and commits one directory


def bench_locations(parallelism: int, seed: int = 2026) -> list[PartitionLocation]:
    """Producer locations of one all-to-all edge, as a sharded run leaves them: units of
    `BENCH_UNIT_SIZE` producers, each unit on a randomly chosen host ``h0..h9``."""
    rng = random.Random(seed)
    unit_hosts = [f"h{rng.randrange(BENCH_HOSTS)}" for _ in range(-(-parallelism // BENCH_UNIT_SIZE))]
    return [
        PartitionLocation(p, unit_hosts[p // BENCH_UNIT_SIZE],
                          f"{BENCH_ROOT}/source+sink-{p // BENCH_UNIT_SIZE}/e0")
        for p in range(parallelism)
    ]


def naive_list_bytes(locations: list[PartitionLocation]) -> int:
    """One consumer's own, uncompressed list, as Flink 1.12 shipped it in every deployment descriptor."""
    return len(json.dumps([loc._asdict() for loc in locations]).encode("utf-8"))


def bench_descriptors(parallelism: int = 10_000, offload_min_size: int = DEFAULT_OFFLOAD_MIN_SIZE,
                      contrast_parallelism: int | None = 1000) -> dict[str, Any]:
    """A `parallelism` x `parallelism` all-to-all edge: one group, read by every consumer. Figures for
    shipping one cached, compressed descriptor versus one uncompressed list per consumer; with a
    `contrast` run at `contrast_parallelism` under the same threshold, and, when the descriptor stays
    inline, an `if_offloaded` run with threshold 0."""
    figures = _bench_one(parallelism, offload_min_size)
    if not figures["offloaded"]:
        # the compact format rarely reaches Flink's 1 MiB threshold: show what a blob would ship
        figures["if_offloaded"] = _bench_one(parallelism, 0)
    if contrast_parallelism and contrast_parallelism != parallelism:
        figures["contrast"] = _bench_one(contrast_parallelism, offload_min_size)
    return figures


def _bench_one(parallelism: int, offload_min_size: int) -> dict[str, Any]:
    consumers = parallelism
    with tempfile.TemporaryDirectory(prefix="rf-bench-descriptors-") as blob_dir:
        cache = DescriptorCache(blob_dir, offload_min_size)
        started = time.perf_counter()
        ref = cache.ref_for(0, lambda: bench_locations(parallelism))
        build_ms = (time.perf_counter() - started) * 1000
        started = time.perf_counter()
        for _ in range(consumers - 1):  # every other consumer: a cache hit
            cache.ref_for(0, lambda: bench_locations(parallelism))
        refs_ms = (time.perf_counter() - started) * 1000
        started = time.perf_counter()
        loaded = load_descriptor(ref)
        load_ms = (time.perf_counter() - started) * 1000
        expected = bench_locations(parallelism)
        if loaded != expected:
            raise AssertionError("the loaded descriptor differs from the built one")
    offloaded = "blob" in ref
    ref_bytes = len(json.dumps(ref, separators=(",", ":")).encode("utf-8"))
    naive_list = naive_list_bytes(expected)
    naive = naive_list * consumers
    shipped = (ref["size"] if offloaded else 0) + ref_bytes * consumers
    stats = cache.stats
    return {
        "parallelism": parallelism,
        "consumers": consumers,
        "offload_min_size": offload_min_size,
        "naive_list_bytes": naive_list,
        "naive_bytes": naive,
        "naive_list_compressed_bytes": len(compress(json.dumps([loc._asdict() for loc in expected]).encode())),
        "serialised_bytes": stats.bytes_serialised,
        "compressed_bytes": stats.bytes_compressed,
        "compression_ratio": round(stats.bytes_serialised / stats.bytes_compressed, 1),
        "offloaded": offloaded,
        "ref_bytes": ref_bytes,
        "shipped_bytes": shipped,
        "shipped_over_naive": round(shipped / naive, 6),
        "built": stats.built,
        "hits": stats.hits,
        "build_ms": round(build_ms, 2),
        "refs_ms": round(refs_ms, 2),
        "load_ms": round(load_ms, 2),
    }


__all__ = [
    "DEFAULT_OFFLOAD_MIN_SIZE", "DescriptorCache", "DescriptorError", "DescriptorStats", "PartitionLocation",
    "bench_descriptors", "bench_locations", "deserialise", "load_descriptor", "serialise",
]
