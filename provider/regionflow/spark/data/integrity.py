"""What a committed unit's files must be: each data file's size is recorded in its manifest at commit and
checked before the files are used again.

- A consumer reading a producer unit's partition dataset checks the files of the part it reads (its own
  ``_rf_unit=<u>`` directory, or a BROADCAST edge's whole dataset) against the producer's manifest: a file
  missing or of another size fails the consumer at once with `PartitionCorrupted`, naming the producer unit,
  its attempt and the file, instead of a Parquet error deep in Spark or, worse, fewer rows. Bytes changed
  in place (same size) are caught by Parquet's own page checksums, which every read of the store verifies
  (`VERIFY_PAGE_CHECKSUMS`; Spark's Parquet writer records them).
- A producer run again (a retry, a cleared task) whose unit is committed checks its whole unit: a damaged
  unit is set aside and computed again, so rerunning the producer repairs its partitions. regionflow does
  not re-run a producer by itself when a consumer finds its partition damaged (Flink does, for a lost
  partition): the consumer's error says which producer to run again.

Datasets released once every consumer committed (``<dataset>.released``) are gone by design, not damaged.
"""
from __future__ import annotations

from typing import Any

from .filesystems import FileSystem, PartitionStoreError, join, read_json

MANIFEST = "_manifest.json"
FILES_KEY = "files"  # manifest key: {path relative to the unit dir: bytes}
RELEASED_SUFFIX = ".released"
# A Parquet reader option (Hadoop conf key): verify each page's CRC as it is read.
VERIFY_PAGE_CHECKSUMS = {"parquet.page.verify-checksum.enabled": "true"}


class PartitionCorrupted(PartitionStoreError):
    """A committed unit's file is missing or not the size its commit recorded."""


def file_sizes(fs: FileSystem, root: str) -> dict[str, int]:
    """Every file under `root`, by its path relative to `root`, with its size in bytes."""
    sizes: dict[str, int] = {}
    pending = [""]
    while pending:
        relative = pending.pop()
        folder = join(root, relative) if relative else root
        for name in fs.list_dir(folder):
            child = f"{relative}/{name}" if relative else name
            if fs.is_dir(join(root, child)):
                pending.append(child)
            else:
                sizes[child] = fs.size(join(root, child))
    return sizes


def damage(fs: FileSystem, unit_dir: str, manifest: dict[str, Any], under: str = "") -> str | None:
    """What is wrong with the committed files under `under` (relative to `unit_dir`; "" for the whole unit),
    or None when each file the commit recorded there is present with its size. A manifest that recorded no
    sizes (a commit by an earlier regionflow) is taken as it is."""
    recorded: dict[str, int] | None = manifest.get(FILES_KEY)
    if recorded is None:
        return None
    prefix = f"{under.rstrip('/')}/" if under else ""
    expected = {path: size for path, size in recorded.items() if path.startswith(prefix)}
    if not expected:
        return None
    found = file_sizes(fs, join(unit_dir, under) if under else unit_dir)
    for path, size in sorted(expected.items()):
        dataset = path.split("/", 1)[0]
        if fs.exists(join(unit_dir, dataset) + RELEASED_SUFFIX):
            continue
        actual = found.get(path[len(prefix):])
        if actual is None:
            return f"file {join(unit_dir, path)} is missing ({size} bytes were committed)"
        if actual != size:
            return f"file {join(unit_dir, path)} is {actual} bytes, but {size} were committed"
    return None


def check_partition(fs: FileSystem, dataset: str, part: str | None,
                    manifests: dict[str, Any] | None = None) -> None:
    """Before reading `part` (a consumer unit's directory name, or None for all) of the partition dataset
    `dataset` (``.../units/<unit>/e<edge>``): raise `PartitionCorrupted` if its files are not as committed.
    `manifests` (unit dir -> its manifest) keeps each producer's manifest read once per consumer attempt
    when it reads several edges of one producer unit."""
    unit_dir, _, edge_dir = dataset.rstrip("/").rpartition("/")
    if manifests is None:
        manifest = read_json(fs, join(unit_dir, MANIFEST))
    else:
        if unit_dir not in manifests:
            manifests[unit_dir] = read_json(fs, join(unit_dir, MANIFEST))
        manifest = manifests[unit_dir]
    if manifest is None:
        raise PartitionCorrupted(f"partition {dataset} has no committed manifest in {unit_dir}: its producer unit "
                                 f"was removed after it committed; run the producer unit again")
    problem = damage(fs, unit_dir, manifest, f"{edge_dir}/{part}" if part else edge_dir)
    if problem is not None:
        raise PartitionCorrupted(
            f"the partition of producer unit {manifest.get('unit') or manifest.get('unit_key', unit_dir)} (attempt "
            f"{manifest.get('attempt_id')}) was changed after its commit: {problem}; run the producer unit "
            f"again (in Airflow: clear its region task and this one) and it is computed anew")


__all__ = ["FILES_KEY", "MANIFEST", "PartitionCorrupted", "VERIFY_PAGE_CHECKSUMS", "check_partition", "damage",
           "file_sizes"]
