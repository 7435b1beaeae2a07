"""The slot pool's modules stay small, documented and pure Python (issue 17).

Each ``scheduling/pool*.py`` module has one job, a module docstring, fewer than 400 lines, and
imports only the standard library, ``regionflow.core`` and ``regionflow.scheduling``; the names
other code imports from ``regionflow.scheduling.pool`` stay there.
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

import regionflow.scheduling as scheduling

POOL_MODULES = sorted(Path(scheduling.__file__).parent.glob("pool*.py"))


@pytest.mark.parametrize("path", POOL_MODULES, ids=lambda path: path.name)
def test_pool_module_is_small_documented_and_pure(path):
    source = path.read_text()
    tree = ast.parse(source)
    assert ast.get_docstring(tree), f"{path.name} has no module docstring"
    assert len(source.splitlines()) < 400, f"{path.name} has grown past 400 lines: split it by responsibility"
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            # relative: .x is scheduling, ..core.x is core; nothing else of regionflow
            assert node.level == 1 or (node.level == 2 and (node.module or "").startswith("core")), \
                f"{path.name} imports {'.' * node.level}{node.module}"
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for name in names:
                top = name.split(".")[0]
                assert top in sys.stdlib_module_names or name.startswith(
                    ("regionflow.core", "regionflow.scheduling")), f"{path.name} imports {name}"


def test_the_pool_facade_still_exports_what_callers_import():
    from regionflow.scheduling import pool

    for name in ("Bulk", "Grant", "HostLoss", "HostUsage", "SlotPool", "SlotRef", "DEFAULT_RESOURCE_WAIT_TIMEOUT_S",
                 "DEFAULT_BACKFILL_LOOKAHEAD"):
        assert name in pool.__all__ and hasattr(pool, name)
