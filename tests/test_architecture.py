"""The house rules of issue 17, checked on the package's source (no imports of the modules needed):

- no package module over 500 lines without a one-line reason (``# over 500 lines: ...``) in its first lines;
- executors/ never imports the transformer (they meet through regionflow.contract);
- core/ and scheduling/ import only the standard library and regionflow.core / regionflow.scheduling;
- no Spark name in scheduling/ (it knows hosts, slots and profiles only; Spark lives in spark/);
- store/ imports neither Airflow nor PySpark (task processes and the CLI open it), but for the DB manager that
  only Airflow loads (store/db_manager.py);
- no process-global job registry (core/registry.py: an object, collected through a context).
"""
from __future__ import annotations

import ast
import pathlib
import sys

import regionflow

PACKAGE = pathlib.Path(regionflow.__file__).parent
MAX_LINES = 500


def _modules(folder: pathlib.Path = PACKAGE) -> list[pathlib.Path]:
    return sorted(folder.rglob("*.py"))


def _imports(path: pathlib.Path) -> list[str]:
    """Absolute names of every module `path` imports (relative imports resolved)."""
    package = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts[:-1])
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            names.append(module)
    return names


def test_no_module_over_500_lines_without_a_reason():
    over = []
    for path in _modules():
        lines = path.read_text().splitlines()
        if len(lines) > MAX_LINES and not any(line.startswith("# over 500 lines:") for line in lines[:5]):
            over.append(f"{path.relative_to(PACKAGE)} ({len(lines)} lines)")
    assert over == []


def test_executors_do_not_import_the_transformer():
    offenders = [f"{path.name}: {name}" for path in _modules(PACKAGE / "executors") for name in _imports(path)
                 if name.startswith("regionflow.transformer")]
    assert offenders == []


def test_core_and_scheduling_import_only_the_standard_library_and_themselves():
    allowed = set(sys.stdlib_module_names) | {"__future__"}
    offenders = []
    for layer in ("core", "scheduling"):
        mine = {"regionflow.core"} | ({"regionflow.scheduling"} if layer == "scheduling" else set())
        for path in _modules(PACKAGE / layer):
            for name in _imports(path):
                top = name.split(".")[0]
                if top in allowed or any(name == m or name.startswith(m + ".") for m in mine):
                    continue
                offenders.append(f"{layer}/{path.name}: {name}")
    assert offenders == []


def test_scheduling_names_no_spark():
    offenders = [f"{path.name}:{number}" for path in _modules(PACKAGE / "scheduling")
                 for number, line in enumerate(path.read_text().splitlines(), start=1) if "spark" in line.lower()]
    assert offenders == []


def test_the_store_imports_no_airflow_and_no_pyspark_but_in_its_db_manager():
    offenders = [f"{path.relative_to(PACKAGE)}: {name}" for path in _modules(PACKAGE / "store")
                 if path.name != "db_manager.py" for name in _imports(path)
                 if name.split(".")[0] in ("airflow", "pyspark")]
    assert offenders == []


def test_no_module_level_job_registry():
    graph = (PACKAGE / "core" / "graph.py").read_text()
    assert "REGISTERED_JOBS" not in graph and "_IMPORTING" not in graph


def test_the_unit_run_service_imports_no_airflow_and_no_airflow_adapter():
    adapters = ("airflow", "regionflow.operators", "regionflow.executors", "regionflow.sensors", "regionflow.triggers",
                "regionflow.cli", "regionflow.ui", "regionflow.transformer", "regionflow.testing")
    offenders = [f"units/{path.name}: {name}" for path in _modules(PACKAGE / "units") for name in _imports(path)
                 if any(name == a or name.startswith(a + ".") for a in adapters)]
    assert offenders == []


def test_one_unit_run_one_attempt_factory_and_a_thin_region_operator():
    """Attempts are built in units/attempts.py only, a unit's task at a grant in units/tasks.py only (the
    runner's one other UnitTask is the plain PySpark reference run's, which is not a unit), and the
    RegionOperator keeps Airflow's part only."""
    built = {name: sorted(str(path.relative_to(PACKAGE)) for path in _modules() if pattern in path.read_text())
             for name, pattern in (("Attempt", " Attempt(task"), ("UnitTask", "UnitTask(job=self."))}
    assert built == {"Attempt": ["units/attempts.py"], "UnitTask": ["units/tasks.py"]}
    assert len((PACKAGE / "operators" / "region.py").read_text().splitlines()) <= 150


def test_no_two_public_classes_share_a_name():
    """A class name says which class it is, whatever the package (the store's rows end in Row, the partition
    store's error is PartitionStoreError, a try waiting for its grant is a WaitingTry)."""
    where: dict[str, list[str]] = {}
    for path in _modules():
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                where.setdefault(node.name, []).append(str(path.relative_to(PACKAGE)))
    assert {name: paths for name, paths in where.items() if len(paths) > 1} == {}
