"""The slot pool's modules stay small, documented and pure Python (issue 17).

Each ``scheduling/pool*.py`` module has one job, a module docstring and fewer than 400 lines; the
names other code imports from ``regionflow.scheduling.pool`` stay there. (That they import only the
standard library and regionflow.core / regionflow.scheduling is tests/test_architecture.py's rule for
every module of core/ and scheduling/.)
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

import regionflow.scheduling as scheduling

POOL_MODULES = sorted(Path(scheduling.__file__).parent.glob("pool*.py"))


@pytest.mark.parametrize("path", POOL_MODULES, ids=lambda path: path.name)
def test_pool_module_is_small_and_documented(path):
    source = path.read_text()
    tree = ast.parse(source)
    assert ast.get_docstring(tree), f"{path.name} has no module docstring"
    assert len(source.splitlines()) < 400, f"{path.name} has grown past 400 lines: split it by responsibility"



def test_the_pool_facade_still_exports_what_callers_import():
    from regionflow.scheduling import pool

    for name in ("Bulk", "Grant", "HostLoss", "HostUsage", "SlotPool", "SlotRef", "DEFAULT_RESOURCE_WAIT_TIMEOUT_S",
                 "DEFAULT_BACKFILL_LOOKAHEAD"):
        assert name in pool.__all__ and hasattr(pool, name)
