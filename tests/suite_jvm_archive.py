"""A class-data-sharing (AppCDS) archive of the classes a Spark Connect server loads, for the suite's spark-submit
JVMs (Connect servers and the submit backend's drivers).

A Spark JVM spends most of its start loading and verifying ~15,000 classes from ``pyspark/jars``. Java 17 can
map them from an archive written by an earlier JVM instead (``-XX:SharedArchiveFile``; JEP 350's dynamic
archive). `build` writes one: a Connect server started with ``-XX:ArchiveClassesAtExit``, one run of the example
job's reference on it, then a graceful stop (the JVM writes the archive as it exits). tests/conftest.py then
gives every SparkSubmit JVM of the session the archive through ``SPARK_SUBMIT_OPTS`` (which spark-submit puts
on its driver's command line, not on the launcher JVM's in front of it, whose class path differs). A JVM whose
class path or JDK does not match the archive's ignores it and loads its classes as before; its warning goes to
stderr (``-Xlog:all=warning:stderr``), never into a driver's stdout.

The archive is ~170 MB under ``build/jvm``, named by what it depends on (the JDK, pyspark's version and the
suite's JVM options), so a changed JDK or pyspark gets a new one. `make test` builds it once per checkout
(``make jvm-archive``, ~45 s); what it saves: benchmarks/suite_jvm.py and CONTRIBUTING.md ("Tests").

Usage: .venv/bin/python tests/suite_jvm_archive.py [--check]   (prints the archive's path; --check: build nothing,
exit 1 if it is missing)
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable

from suite_jvm_options import SUITE_JAVA_OPTIONS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ARCHIVE_DIR = os.path.join(ROOT, "build", "jvm")
ORDERS = "regionflow.examples.orders:job"
DUMP_GRACE_S = 300.0  # writing the archive at exit takes ~30 s on 2 busy cores; a SIGKILL before it writes nothing


def archive_key() -> str:
    """What the archive is valid for: the JDK (``java`` on the PATH: its home, its release file and libjvm.so),
    pyspark's version, the suite's JVM options. Read from files: no JVM starts for it."""
    import pyspark

    java = shutil.which("java")
    if java is None:
        raise FileNotFoundError("no java on the PATH")
    home = os.path.dirname(os.path.dirname(os.path.realpath(java)))
    parts = [home, pyspark.__version__, SUITE_JAVA_OPTIONS]
    for name in ("release", os.path.join("lib", "server", "libjvm.so")):
        try:
            stat = os.stat(os.path.join(home, name))
        except OSError:
            continue
        parts.append(f"{name} {stat.st_size} {stat.st_mtime_ns}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def archive_path() -> str:
    return os.path.join(ARCHIVE_DIR, f"spark-connect-{archive_key()}.jsa")


def submit_options(path: str) -> str:
    """``SPARK_SUBMIT_OPTS`` of the suite's spark-submit JVMs: the archive at `path`, the JVM's warnings to stderr."""
    return f"-XX:SharedArchiveFile={path} -Xlog:disable -Xlog:all=warning:stderr"


def built_submit_options() -> str | None:
    """`submit_options` of the archive if it was built, else None (none built, or no JDK here)."""
    try:
        path = archive_path()
    except (OSError, ImportError):
        return None
    return submit_options(path) if os.path.exists(path) else None


def build(path: str) -> None:
    """Write the archive at `path`: a Connect server's life (start, one reference run, graceful stop) in a child
    process with ``-XX:ArchiveClassesAtExit``; the file appears whole or not at all."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    work = tempfile.mkdtemp(prefix="rf-jvm-archive-", dir=os.path.dirname(path))
    partial = os.path.join(work, "archive.jsa")
    env = {**os.environ, "JAVA_TOOL_OPTIONS": SUITE_JAVA_OPTIONS,
           "SPARK_SUBMIT_OPTS": f"-XX:ArchiveClassesAtExit={partial} -Xlog:disable -Xlog:all=error:stderr"}
    try:
        subprocess.run([sys.executable, os.path.abspath(__file__), "--one-server", work], env=env, check=True,
                       timeout=900)
        if not os.path.exists(partial):
            raise RuntimeError(f"the Connect server wrote no class archive at {partial}")
        os.replace(partial, path)
        for name in os.listdir(os.path.dirname(path)):  # archives of an earlier JDK or pyspark: ~170 MB each
            if name.startswith("spark-connect-") and name.endswith(".jsa") and name != os.path.basename(path):
                os.remove(os.path.join(os.path.dirname(path), name))
    finally:
        shutil.rmtree(work, ignore_errors=True)


def server_round(work: str, slots: int, jobs: int, mark: Callable[[str], object] = lambda part: None,
                 stop_grace_s: float = 10.0) -> list[tuple[int, int]]:
    """In this process: a Connect server of `slots` slots, `jobs` reference runs of the example job on it, its stop
    (given `stop_grace_s` to exit); ``mark("started")`` and ``mark("ran")`` between the parts. The runs' distinct
    (rows, checksum), sorted. benchmarks/suite_jvm.py times its parts; `build` has its JVM write the archive."""
    from regionflow.core.graph import load_job
    from regionflow.core.plan import Plan
    from regionflow.scheduling.hosts import Cluster
    from regionflow.spark.servers.client_env import no_client_marks
    from regionflow.spark.servers.session_servers import SessionServers
    from regionflow.units.reference import run_reference
    from regionflow.units.runner import RunOptions

    servers = SessionServers(Cluster.local_default(slots), os.path.join(work, "sessions"), base_port=None)
    rows = set()
    with no_client_marks():
        try:
            servers.start()
            mark("started")
            for number in range(jobs):
                options = RunOptions(data_dir=os.path.join(work, f"run-{number}"), cluster=servers.cluster,
                                     progress=None, servers=servers)
                totals = run_reference(ORDERS, Plan(load_job(ORDERS)), options).sinks["totals"]
                rows.add((totals["rows"], totals["checksum"]))
            mark("ran")
        finally:
            for name in list(servers.servers):
                servers.server(name).stop(grace_seconds=stop_grace_s)
    return sorted(rows)


def main(argv: list[str]) -> int:
    if argv[:1] == ["--one-server"]:
        server_round(argv[1], slots=2, jobs=1, stop_grace_s=DUMP_GRACE_S)
        return 0
    path = archive_path()
    if not os.path.exists(path):
        if argv[:1] == ["--check"]:
            print(f"no class archive at {path}: make jvm-archive", file=sys.stderr)
            return 1
        print(f"writing the suite's JVM class archive {path} (once per JDK and pyspark) ...", file=sys.stderr,
              flush=True)
        build(path)
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
