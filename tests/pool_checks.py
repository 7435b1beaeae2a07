"""Checks of a slot pool's ledger shared by the tests of schedulers that share one pool
(test_shared_pool.py, airflow/test_ha_postgres.py, airflow/test_store_restart.py): no slot held twice at
once, FIFO order kept."""
from __future__ import annotations

from collections import defaultdict


def overlapping_holders(grants):
    """(slot, bulk, bulk) for every two grants that held one slot at the same time."""
    by_slot = defaultdict(list)
    for grant in grants:
        if grant.granted_at is None:
            continue
        until = grant.released_at if grant.released_at is not None else float("inf")
        for slot in grant.slots:
            by_slot[slot].append((grant.granted_at, until, grant.bulk_id))
    clashes = []
    for slot, spans in by_slot.items():
        spans.sort()
        for (_, first_until, first), (second_from, _, second) in zip(spans, spans[1:], strict=False):
            if second_from < first_until:
                clashes.append((slot, first, second))
    return clashes


def fifo_violations(grants):
    """(older, younger) pairs where a younger bulk asking at least as many slots was granted first. The
    pool lets a younger bulk pass an older one only when it asks less (it fits where the older does not)."""
    granted = [g for g in grants if g.granted_at is not None]  # in row order: the order of admission
    return [(older.bulk_id, younger.bulk_id) for i, older in enumerate(granted) for younger in granted[i + 1:]
            if len(younger.requests) >= len(older.requests) and younger.granted_at < older.granted_at]
