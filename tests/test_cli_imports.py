"""The `regionflow` command's parser is built without its handlers' heavy imports (PySpark, the runner,
SQLAlchemy through the store, Airflow), so ``regionflow --help`` stays fast; those come when a command runs."""
from __future__ import annotations

import json
import subprocess
import sys

from regionflow.cli.common import STORE_URL_VARIABLE
from regionflow.store.engine import STORE_URL_VARIABLE as STORES_OWN

HEAVY = ("pyspark", "sqlalchemy", "airflow", "regionflow.units.runner", "regionflow.store")


def test_building_the_parser_imports_nothing_heavy():
    probe = ("import json, sys; from regionflow.cli import build_parser; build_parser(); "
             f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r} or m in {HEAVY!r})))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    assert json.loads(done.stdout) == []


def test_the_store_url_variable_is_the_stores_own():
    assert STORE_URL_VARIABLE == STORES_OWN
