"""``regionflow version``: regionflow's version and the versions it runs with here, each against the range
regionflow supports (`SUPPORTED`), so a bug report carries them and a mismatch shows before it bites.

The ranges and why (also on the docs' getting-started page): Airflow 3.3 only, because the RegionExecutor
follows 3.3's executor and task-supervisor contracts and wraps a few private members that move between minor
releases (`regionflow.airflow_internals`); the Spark provider 6.x for its hooks and connection types; PySpark
and pyspark-client both exactly 4.2.0, because the Spark provider pulls in pyspark-client, which overwrites
pyspark's Python files: the two must be the same version for the Python side to match the JARs and the Spark
Connect server pyspark ships; Python 3.11, the one the suite runs on; Java 17, Spark 4's runtime.
"""
from __future__ import annotations

import argparse
import importlib.metadata as metadata
import json
import os
import platform
import re
import shutil
from typing import Any

from ..output import print_document

# component (a distribution, or "python" / "java") -> the versions regionflow supports (PEP 440 specifiers)
SUPPORTED: dict[str, str] = {
    "python": "==3.11.*",
    "apache-airflow": ">=3.3,<3.4",
    "apache-airflow-providers-apache-spark": ">=6.3.4,<7",
    "pyspark": "==4.2.0",
    "pyspark-client": "==4.2.0",  # the same as pyspark's: it overwrites pyspark's Python files
    "java": "==17.*",
}


def register(commands: Any) -> None:
    """Register ``version`` on the CLI's subcommands."""
    version = commands.add_parser("version", help="regionflow's version, and Python's, Airflow's, Spark's and "
                                                  "Java's here against the supported ones")
    version.add_argument("--format", choices=("text", "json"), default="text")
    version.set_defaults(handler=run_version)


def run_version(args: argparse.Namespace) -> int:
    document = versions()
    if args.format == "json":
        print_document(json.dumps(document, indent=2))
    else:
        print(f"regionflow {document['regionflow']}")
        for name, found in document["components"].items():
            mark = "ok" if found["supported"] else f"NOT SUPPORTED (supported: {found['supported_versions']})"
            print(f"  {name} {found['version'] or 'not found'}: {mark}")
    return 0


def versions() -> dict[str, Any]:
    """regionflow's version and, per component, the version found here and whether regionflow supports it."""
    from packaging.specifiers import SpecifierSet

    from .. import __version__

    components = {}
    for name, specifiers in SUPPORTED.items():
        found = _found(name)
        supported = found is not None and SpecifierSet(specifiers).contains(found, prereleases=True)
        components[name] = {"version": found, "supported_versions": specifiers, "supported": supported}
    return {"regionflow": __version__, "components": components}


def _found(source: str) -> str | None:
    if source == "python":
        return platform.python_version()
    if source == "java":
        return java_version()
    try:
        return metadata.version(source)
    except metadata.PackageNotFoundError:
        return None


def java_version() -> str | None:
    """The version of the ``java`` Spark would start (``$JAVA_HOME/bin/java``, else the one on PATH), read from
    its installation's ``release`` file rather than by starting a JVM."""
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    if not java or not os.path.exists(java):
        return None
    release = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(java))), "release")
    try:
        with open(release, encoding="utf-8") as handle:
            match = re.search(r'^JAVA_VERSION="([^"]+)"', handle.read(), re.MULTILINE)
    except OSError:
        return None
    return match.group(1) if match else None


__all__ = ["SUPPORTED", "java_version", "register", "run_version", "versions"]
