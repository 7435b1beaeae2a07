"""Fixtures for the Spark submission tests: a standalone cluster (session-scoped, started only by
tests that request it), a tiny PySpark app, and a fake spark-submit for millisecond tests of the
real `SparkSubmitHook` path.
"""
from __future__ import annotations

import os
import stat
import sys
import textwrap
from collections.abc import Iterator

import pytest

from regionflow.spark.servers.standalone import StandaloneCluster

TINY_APP = textwrap.dedent(
    """
    import json, os, sys, time

    from pyspark.sql import SparkSession

    out_path, mode = sys.argv[1], sys.argv[2]
    spark = SparkSession.builder.getOrCreate()
    print("tiny-app: session started", flush=True)
    if mode == "sleep":
        while True:
            time.sleep(0.2)
    count = spark.range(1000).count()
    print(f"tiny-app: counted {count}", flush=True)
    if mode.startswith(("hold:", "twice:")):
        deadline = time.time() + 60
        while not os.path.exists(mode.split(":", 1)[1]) and time.time() < deadline:
            time.sleep(0.1)
    if mode.startswith("twice:"):  # a second job, which needs executors again
        count = spark.range(100000).repartition(4).count()
    result = {"count": count, "master": spark.sparkContext.master,
              "affinity": sorted(os.sched_getaffinity(0))}
    with open(out_path, "w") as handle:
        json.dump(result, handle)
    spark.stop()
    """
)

# Stands in for spark-submit: skips the `--option value` pairs the hook passes and runs the
# application with the same Python, so the hook, the logging capture, process groups, affinity and
# kills are exercised for real in milliseconds.
FAKE_SPARK_SUBMIT = textwrap.dedent(
    """
    import runpy, sys

    args = sys.argv[1:]
    options = {}
    while args and args[0].startswith("--"):
        if args[0] == "--verbose":
            args = args[1:]
            continue
        options.setdefault(args[0], []).append(args[1])
        args = args[2:]
    print("fake-spark-submit master=" + options["--master"][0], flush=True)
    sys.argv = args
    runpy.run_path(args[0], run_name="__main__")
    """
)


@pytest.fixture(scope="session")
def spark_scripts_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("spark-scripts"))


@pytest.fixture(scope="session")
def tiny_app(spark_scripts_dir: str) -> str:
    """A PySpark app: ``tiny_app.py OUT MODE``; MODE ``count``, ``sleep``, ``hold:<file>`` or ``twice:<file>``
    (count, wait for the file, count again)."""
    path = os.path.join(spark_scripts_dir, "tiny_app.py")
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(TINY_APP)
    return path


@pytest.fixture(scope="session")
def fake_spark_submit(spark_scripts_dir: str) -> str:
    path = os.path.join(spark_scripts_dir, "fake-spark-submit")
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(f"#!{sys.executable}\n{FAKE_SPARK_SUBMIT}")
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


@pytest.fixture(scope="session")
def standalone_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    """One master and two 2-core, 1 GiB workers on 127.0.0.1 for the whole session."""
    work_dir = str(tmp_path_factory.mktemp("standalone"))
    with StandaloneCluster(workers=2, cores_per_worker=2, memory_per_worker="1g", work_dir=work_dir) as cluster:
        yield cluster


@pytest.fixture
def shared_servers(event_servers):
    """`event_servers` (tests/conftest.py) for one test; afterwards this process's classic Spark sessions stay
    classic."""
    from regionflow.spark.servers.client_env import CONNECT_CLIENT_VARIABLES

    yield event_servers
    for variable in CONNECT_CLIENT_VARIABLES:
        os.environ.pop(variable, None)
