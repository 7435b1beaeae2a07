"""Install smoke test: guards the pyspark / pyspark-client pin in pyproject.toml.

apache-airflow-providers-apache-spark depends on ``pyspark-client``, which
installs its own copy of the ``pyspark`` Python package on top of pyspark's.
If the two versions differ, the Python side no longer matches the JARs that
pyspark ships and Spark jobs break in odd ways.  These tests fail loudly then.
"""
import importlib.metadata as md
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest


def _jar_spark_version() -> str:
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    found = sorted(jars.glob("spark-core_*.jar"))
    assert found, f"no spark-core jar in {jars} (is the full pyspark installed?)"
    m = re.fullmatch(r"spark-core_[0-9.]+-(.+)\.jar", found[0].name)
    assert m, f"unexpected jar name {found[0].name}"
    return m.group(1)


def test_imports_airflow_pyspark_and_spark_hook():
    import airflow
    import pyspark
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    assert airflow.__version__.startswith("3.3.")
    assert pyspark.__version__
    assert callable(SparkSubmitHook)


def test_pyspark_python_matches_jars_and_dists():
    import pyspark

    jar_version = _jar_spark_version()
    assert pyspark.__version__ == jar_version, (
        f"pyspark Python files are {pyspark.__version__} but jars are {jar_version}: "
        "pyspark-client overwrote pyspark with another version; pin both equal in pyproject.toml"
    )
    assert md.version("pyspark") == jar_version
    assert md.version("pyspark-client") == jar_version


@pytest.mark.timeout(300)
def test_venv_spark_submit_version():
    bindir = Path(sys.executable).parent
    spark_submit = bindir / "spark-submit"
    if not spark_submit.exists():
        found = shutil.which("spark-submit")
        assert found, "spark-submit not found next to the interpreter nor on PATH"
        spark_submit = Path(found)
    env = dict(os.environ)
    env["PATH"] = f"{bindir}{os.pathsep}{env.get('PATH', '')}"
    proc = subprocess.run(
        [str(spark_submit), "--version"],
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert f"version {_jar_spark_version()}" in out, out


def test_every_installed_distribution_is_pinned_in_constraints_txt():
    """`make` installs with ``-c constraints.txt``; a requirement added to pyproject.toml without re-pinning
    (``make constraints``) would be resolved unpinned and pip could backtrack again."""
    root = Path(__file__).resolve().parent.parent
    pins = {}
    for line in (root / "constraints.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            pins[re.sub(r"[-_.]+", "-", name).lower()] = version
    unpinned = []
    for dist in md.distributions():
        name = re.sub(r"[-_.]+", "-", dist.metadata["Name"]).lower()
        if name in ("airflow-provider-regionflow", "pip", "setuptools", "wheel", "py-spy"):
            continue
        if pins.get(name) != dist.version:
            unpinned.append(f"{name}=={dist.version} (constraints.txt: {pins.get(name, 'none')})")
    assert unpinned == [], f"not pinned as installed, run `make constraints`: {unpinned}"
