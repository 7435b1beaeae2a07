"""Across a job's runs: how many shards each region decided per run (`core.run_decision`) was last cut into.

A producer of a key-grouped edge (`core.keygroups`) writes its rows before the consumer's decision, in one
file per core carrying each row's key group. Sorted by key group, a consumer shard reading a range of groups
skips the other groups' pages; but the sort is paid on every row, and a consumer decided as one shard reads
every group anyway. Neither layout wins everywhere (`benchmarks/per_run_decision.py`, 2M rows on this
project's 2-core box: the sort costs ~0.4 s; eight shards reading unsorted files took 0.1-0.5 s longer than
reading sorted ones, four shards no longer: `docs/benchmarks.md`). So the producers follow the region's previous
run: sorted unless its last decision was one shard (Airflow's runs of a DAG repeat: a daily input grows
slowly). A run without a previous one sorts: the layout that stays cheap however large the input. Either
layout holds the same rows and every consumer filters by key group, so the choice only moves cost.

Layout: ``{data_dir}/_history/{job}/{region task id}.json``, ``{"shards": n, "run": run key}``, replaced by
each decision (the last one wins). The partition store's run directories sit beside it; ``regionflow gc``
only looks at those.
"""
from __future__ import annotations

import json

from .filesystems import FileSystem, join, read_json, write_atomically
from .store import safe_component

HISTORY = "_history"


class DecisionHistory:
    """The last per-run decision of each region of one job (a DAG's id in Airflow) under one data dir."""

    def __init__(self, data_dir: str, job: str, fs: FileSystem) -> None:
        self.fs = fs
        self.folder = join(data_dir, HISTORY, safe_component(job))

    def remember(self, region: str, shards: int, run_key: str) -> None:
        """Record that region task `region` of run `run_key` was decided as `shards` shards."""
        self.fs.mkdirs(self.folder)
        write_atomically(self.fs, self._path(region), json.dumps({"shards": shards, "run": run_key}).encode(),
                         replace=True)

    def last_shards(self, region: str) -> int | None:
        """The shard count of `region`'s last decision, None before its first one."""
        recorded = read_json(self.fs, self._path(region))
        return None if recorded is None else int(recorded["shards"])

    def _path(self, region: str) -> str:
        return join(self.folder, f"{safe_component(region)}.json")


__all__ = ["HISTORY", "DecisionHistory"]
