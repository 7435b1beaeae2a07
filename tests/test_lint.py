"""Lint and types stay clean (what `make lint` runs, and `.ci/run` before the tests): ruff with ruff.toml
(pycodestyle, pyflakes, import order, pyupgrade, bugbear) over the code and tests, and mypy over the package
with the settings in setup.cfg (strict checks on core/, scheduling/, store/ and contract.py; its cache in
build/mypy_cache: a few seconds once warm)."""
from __future__ import annotations

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUFF = ["ruff", "check", "provider", "tests", "benchmarks", "dags", "plugins", "docs"]
MYPY = ["mypy", "provider/regionflow"]


def _run(args: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def test_ruff_is_clean():
    result = _run(RUFF, timeout=120)
    assert result.returncode == 0, f"{' '.join(RUFF)} exited {result.returncode}:\n{result.stdout}{result.stderr}"


def test_mypy_is_clean():
    result = _run(MYPY, timeout=600)  # ~25 s on a cold cache (a clean clone), ~1 s warm
    assert result.returncode == 0, f"{' '.join(MYPY)} exited {result.returncode}:\n{result.stdout}{result.stderr}"
