"""Session-wide fixtures shared by the Spark and Airflow end-to-end tests."""
import logging

import pytest

# py4j logs from __del__ at interpreter exit, after logging's streams are closed; that noise would
# follow pytest's summary line in CI's output
logging.getLogger("py4j").setLevel(logging.WARNING)

ORDERS = "regionflow.examples.orders:job"


@pytest.fixture(scope="session")
def orders_reference(tmp_path_factory):
    """Rows and checksum of the example job's sink from one plain PySpark run (the ground truth)."""
    from regionflow.core.graph import load_job
    from regionflow.core.plan import Plan
    from regionflow.scheduling.hosts import Cluster
    from regionflow.spark.runner import RunOptions, run_reference

    options = RunOptions(data_dir=str(tmp_path_factory.mktemp("reference")), cluster=Cluster.local_default(2),
                         progress=None)
    totals = run_reference(ORDERS, Plan(load_job(ORDERS)), options).sinks["totals"]
    assert totals["rows"] > 0
    return totals


@pytest.fixture(scope="session")
def postgres():
    """One PostgreSQL server for the whole session (Debian's postgresql, see tests/postgres.py)."""
    import shutil
    import tempfile

    from postgres import PostgresServer

    directory = tempfile.mkdtemp(prefix="regionflow-pg-")  # not under pytest's root-only tmp dirs
    server = PostgresServer(directory)
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request, tmp_path):
    """A new, empty store URL: a SQLite file, or a database on the session's PostgreSQL server."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/regionflow.db"
    return request.getfixturevalue("postgres").new_database()
