"""The per-module progress lines of tests/conftest.py (`ModuleProgress`), written to a recording reporter."""
from __future__ import annotations

import importlib.util
import os


def _root_conftest():
    """tests/conftest.py as a module of its own: ``import conftest`` gives whichever conftest pytest imported
    last under that name (in a CI run, tests/spark/conftest.py, which has no `ModuleProgress`)."""
    spec = importlib.util.spec_from_file_location("tests_root_conftest",
                                                  os.path.join(os.path.dirname(__file__), "conftest.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


conftest = _root_conftest()


class RecordingReporter:
    """What `ModuleProgress` uses of pytest's terminal reporter: `currentfspath` and `write_line`."""

    def __init__(self) -> None:
        self.currentfspath = None
        self.lines: list[str] = []

    def write_line(self, line: str) -> None:
        self.lines.append(line)


def test_a_line_per_module_with_its_test_count_and_the_speed_only_when_due(monkeypatch) -> None:
    reporter = RecordingReporter()
    progress = conftest.ModuleProgress(reporter)
    for nodeid in ("tests/a.py::one", "tests/a.py::two[x]", "tests/b.py::one"):
        progress.test_starts(nodeid)
    monkeypatch.setattr(conftest, "MEASURE_EVERY_S", 0.0)
    progress.module_ends()
    progress.module_ends()  # no module running: nothing more

    assert len(reporter.lines) == 2
    first, second = reporter.lines
    assert "] tests/a.py: 2 tests in " in first and "machine speed" not in first  # measured at the start
    assert "] tests/b.py: 1 tests in " in second and "machine speed: CPU unit median" in second
    assert reporter.currentfspath is True  # write_line ends a line of progress dots first
