"""Packaging for airflow-provider-regionflow.

Sources live in provider/regionflow (import package ``regionflow``).
This file must not import the package itself.
"""
import os
import re
from pathlib import Path

from setuptools import find_packages, setup

# setup.cfg puts the egg-info in build/ (egg_base), not in provider/, which an editable install puts on
# sys.path: a second copy of the metadata there makes Airflow load the plugin and the provider twice.
os.makedirs(os.path.join(os.path.dirname(os.path.abspath(__file__)), "build"), exist_ok=True)

# pyspark and pyspark-client ship the same ``pyspark`` Python package and
# overwrite each other's files.  apache-airflow-providers-apache-spark requires
# pyspark-client, so both are pinned to the SAME exact version: the Python
# sources then match the JARs shipped by pyspark.  pyspark-client's newest
# release is 4.2.0, hence pyspark 4.2.0.  Bump both together (and keep
# tests/test_smoke_install.py green).
SPARK_VERSION = "4.2.0"

INSTALL_REQUIRES = [
    "apache-airflow>=3.3,<3.4",
    "apache-airflow-providers-apache-spark>=6.3.4,<7",
    # [connect]: the Spark Connect client (grpcio, ...) the session backend's servers are used with
    f"pyspark[connect]=={SPARK_VERSION}",
    f"pyspark-client=={SPARK_VERSION}",
    # pyspark-client wants pandas>=2.2; PySpark 4.2 warns that pandas 3 is not
    # fully supported yet.
    "pandas>=2.2,<3",
    # Airflow 3.3 needs sqlalchemy[asyncio]>=2.0.50; stay on the 2.0 series
    # that Airflow is developed and tested against (2.1 changes defaults).
    "SQLAlchemy>=2.0.50,<2.1",
    # the store's schema migrations (regionflow/store/migrations); Airflow 3.3 itself needs the same range
    "alembic>=1.13.1,<2",
]

# [tpch]: TPC-H data generated offline (CALL dbgen) and its official answers (tpch_answers()); the two
# wheels must carry the same version.
DUCKDB_VERSION = "1.5.5"
TPCH_REQUIRES = [f"duckdb=={DUCKDB_VERSION}", f"duckdb-extension-tpch=={DUCKDB_VERSION}"]

# [bench]: what benchmarks/ needs beyond the package: TPC-H data and answers, and matplotlib for the pictures
BENCH_REQUIRES = TPCH_REQUIRES + ["matplotlib>=3.8,<4"]

# k8s:// masters: Airflow's Spark provider submits to Kubernetes only with the cncf-kubernetes provider
KUBERNETES_REQUIRES = ["apache-airflow-providers-cncf-kubernetes>=10.25,<11"]

# PostgreSQL for the store and for Airflow (the HA test): SQLAlchemy's default driver, and asyncpg.
POSTGRES_REQUIRES = ["psycopg2-binary>=2.9,<3", "asyncpg>=0.30,<1"]  # asyncpg: Airflow 3's async engine

TEST_REQUIRES = TPCH_REQUIRES + KUBERNETES_REQUIRES + POSTGRES_REQUIRES + [
    "pytest>=8.3,<10",
    "pytest-timeout>=2.3,<3",
    "pytest-xdist>=3.6,<4",  # make test, make test-quick: the light tests on two workers (Makefile)
    "hypothesis>=6.100,<7",
    "statsd>=4,<5",  # Airflow's StatsD client: the pool-metrics test reads real StatsD packets
    "selenium>=4.20,<5",  # the UI plugin's browser tests drive Debian's chromium through its chromedriver
    # tests/test_lint.py: pinned, as a new release may bring new checks (mypy's settings are in setup.cfg)
    "ruff==0.17.6",
    "mypy==2.4.1",
]

# the version lives in one place, regionflow.__version__ (read as text: importing the package needs Airflow)
_INIT = Path(__file__).resolve().parent / "provider" / "regionflow" / "__init__.py"
VERSION = re.search(r'^__version__ = "([^"]+)"$', _INIT.read_text(encoding="utf-8"), re.MULTILINE).group(1)

setup(
    name="airflow-provider-regionflow",
    version=VERSION,
    description="Apache Airflow provider that runs DAG regions as Spark submissions",
    long_description="Apache Airflow provider that runs Airflow DAG regions as Spark submissions.",
    license="Apache-2.0",
    python_requires=">=3.11",
    package_dir={"": "provider"},
    packages=find_packages("provider"),
    package_data={
        "": ["*.json", "*.yaml", "*.yml"],
        "regionflow": ["static/*", "static/**/*", "spark/launch/resources/*.sh"],
    },
    include_package_data=True,
    zip_safe=False,
    install_requires=INSTALL_REQUIRES,
    extras_require={"test": TEST_REQUIRES, "tpch": TPCH_REQUIRES, "bench": BENCH_REQUIRES,
                    "kubernetes": KUBERNETES_REQUIRES,
                    "postgres": POSTGRES_REQUIRES},
    entry_points={
        "console_scripts": ["regionflow=regionflow.cli:main"],
        "apache_airflow_provider": ["provider_info=regionflow:get_provider_info"],
        "airflow.plugins": ["regionflow=regionflow.ui.plugin:RegionflowPlugin"],
    },
    classifiers=[
        "Framework :: Apache Airflow",
        "Framework :: Apache Airflow :: Provider",
        "Programming Language :: Python :: 3",
        "Programming Language :: Python :: 3.11",
        "License :: OSI Approved :: Apache Software License",
    ],
)
