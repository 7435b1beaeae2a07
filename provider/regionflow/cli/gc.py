"""``regionflow gc``: remove what finished runs left in the data dir, never anything of a running run.

A run directory (``{data_dir}/{run}``, the partition store's layout) may keep, after its run:

- orphaned attempt directories (``_attempts/{unit}/{attempt}``): attempts that lost the commit race
  and were not cleaned (their process was killed), or never committed;
- blocking partitions (``units/{unit}/e{edge}``): kept with ``[regionflow] partition_retention`` > 0,
  or left by a run that failed before its consumers committed.

A run is *running* while regionflow's store has a waiting or granted slot request of it; such a run is
never touched. A run is collected once nothing under its directory changed for ``--older-than``
seconds (default: ``$AIRFLOW__REGIONFLOW__PARTITION_RETENTION``, else 0). Committed manifests stay, as
a record of which attempt won. ``--dry-run`` lists what would go. Local data dirs only (a path or
``file://``): for HDFS or an object store, use its own lifecycle rules.
"""
from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..core.errors import SpecError
from ..output import print_document
from ..spark.data.filesystems import LocalFileSystem, local_path
from ..spark.data.store import ATTEMPTS, UNITS, run_key_for
from .common import STORE_URL_VARIABLE

RETENTION_VARIABLE = "AIRFLOW__REGIONFLOW__PARTITION_RETENTION"
DATA_DIR_VARIABLE = "AIRFLOW__REGIONFLOW__DATA_DIR"
_FS = LocalFileSystem()  # sizes and removal of local directories, as the partition store does them


@dataclass(frozen=True)
class Garbage:
    """One directory `regionflow gc` removes: its run, what it is, and its size."""

    run: str
    kind: str  # "attempt" or "partitions"
    path: str
    bytes: int


def collect(data_dir: str, running: set[str], older_than_s: float, now: float | None = None) -> list[Garbage]:
    """What may go: orphaned attempt dirs and partitions of every run directory of `data_dir` that is not
    in `running` (run keys) and unchanged for `older_than_s` seconds."""
    root = local_path(data_dir)
    if "://" in root:
        raise SpecError(f"regionflow gc handles local data dirs only, not {data_dir!r}; use the storage's own "
                        f"lifecycle rules there")
    if not os.path.isdir(root):
        raise SpecError(f"data dir {data_dir!r} does not exist; give the [regionflow] data_dir the runs wrote to")
    now = time.time() if now is None else now
    found = []
    for run in sorted(os.listdir(root)):
        run_dir = os.path.join(root, run)
        if run in running or not _is_run_dir(run_dir) or now - _newest_change(run_dir) < older_than_s:
            continue
        found += [Garbage(run, "attempt", path, _FS.size(path))
                  for path in _children(os.path.join(run_dir, ATTEMPTS), 2)]
        found += [Garbage(run, "partitions", path, _FS.size(path))
                  for path in _children(os.path.join(run_dir, UNITS), 2) if _is_partition(path)]
    return found


def remove(garbage: Iterable[Garbage]) -> int:
    """Delete `garbage`; returns the bytes freed."""
    return sum(item.bytes for item in garbage if _FS.delete(item.path))


def running_runs(store_url: str | None) -> set[str]:
    """Run keys of the runs regionflow's store has live slot requests of (waiting or granted)."""
    if store_url is None:
        return set()
    from ..store import RegionflowStore, store_exists

    if not store_exists(store_url):
        return set()
    store = RegionflowStore.from_config(store_url)
    return {run_key_for(record.dag_id, record.run_id) for record in store.live_grants() + store.waiting_grants()}


def register(commands: Any) -> None:
    """Register ``gc`` on the CLI's subcommands."""
    gc = commands.add_parser("gc", help="remove orphaned attempt dirs and partitions of finished runs")
    gc.add_argument("--data-dir", default=None, help=f"the data dir (default: ${DATA_DIR_VARIABLE})")
    gc.add_argument("--store-url", default=None,
                    help=f"regionflow's store, to tell running runs (default: ${STORE_URL_VARIABLE}; without a store "
                         "every run directory counts as finished)")
    gc.add_argument("--older-than", type=float, default=None, metavar="SECONDS",
                    help=f"only runs unchanged this long (default: ${RETENTION_VARIABLE}, else 0)")
    gc.add_argument("--dry-run", action="store_true", help="list what would be removed, remove nothing")
    gc.add_argument("--format", choices=("text", "json"), default="text")
    gc.set_defaults(handler=run_gc)


def run_gc(args: argparse.Namespace) -> int:
    data_dir = args.data_dir or os.environ.get(DATA_DIR_VARIABLE, "").strip()
    if not data_dir:
        raise SpecError(f"regionflow gc needs --data-dir (or ${DATA_DIR_VARIABLE})")
    older_than = args.older_than if args.older_than is not None else \
        float(os.environ.get(RETENTION_VARIABLE, "").strip() or 0)
    document = gc_document(data_dir, args.store_url or os.environ.get(STORE_URL_VARIABLE) or None, older_than,
                           args.dry_run)
    if args.format == "json":
        print_document(json.dumps(document, indent=2))
    else:
        print(gc_text(document))
    return 0


def gc_document(data_dir: str, store_url: str | None, older_than: float, dry_run: bool) -> dict[str, Any]:
    """Collect (and unless `dry_run` remove) what finished runs of `data_dir` left; what was found, as the
    JSON document both CLIs print."""
    if older_than < 0:
        raise SpecError(f"--older-than is {older_than:g}; give 0 or more seconds")
    found = collect(data_dir, running_runs(store_url), older_than)
    freed = 0 if dry_run else remove(found)
    return {"dry_run": dry_run, "bytes": sum(g.bytes for g in found), "freed": freed,
            "removed" if not dry_run else "would_remove":
                [{"run": g.run, "kind": g.kind, "path": g.path, "bytes": g.bytes} for g in found]}


def gc_text(document: dict[str, Any]) -> str:
    """`gc_document` as lines: a directory per line, then the total."""
    verb = "would remove" if document["dry_run"] else "removed"
    found = document["would_remove" if document["dry_run"] else "removed"]
    lines = [f"{verb} {item['kind']:<10} {item['bytes']:>12} B  {item['path']}" for item in found]
    return "\n".join(lines + [f"{verb} {len(found)} dir(s), {document['bytes']} bytes"])


def _is_run_dir(path: str) -> bool:
    return os.path.isdir(os.path.join(path, UNITS)) or os.path.isdir(os.path.join(path, ATTEMPTS))


def _is_partition(path: str) -> bool:
    name = os.path.basename(path)
    return name.startswith("e") and name[1:].isdigit()


def _children(path: str, depth: int) -> list[str]:
    """Directories exactly `depth` levels under `path`, sorted."""
    level = [path]
    for _ in range(depth):
        level = [os.path.join(parent, name) for parent in level if os.path.isdir(parent)
                 for name in sorted(os.listdir(parent)) if os.path.isdir(os.path.join(parent, name))]
    return level


def _newest_change(path: str) -> float:
    newest = os.lstat(path).st_mtime
    for folder, dirs, files in os.walk(path):
        for name in dirs + files:
            try:
                newest = max(newest, os.lstat(os.path.join(folder, name)).st_mtime)
            except FileNotFoundError:
                continue
    return newest


__all__ = ["Garbage", "collect", "gc_document", "gc_text", "register", "remove", "run_gc", "running_runs"]
