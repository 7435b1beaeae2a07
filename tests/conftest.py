"""Session-wide fixtures shared by the Spark and Airflow end-to-end tests, and the run's progress
lines: the machine's speed at the start and end, and a line per finished test module."""
import logging
import os
import time

import pytest
import suite_jvm_archive  # tests/suite_jvm_archive.py
import suite_order  # tests/suite_order.py
from suite_jvm_options import SUITE_JAVA_OPTIONS

# py4j logs from __del__ at interpreter exit, after logging's streams are closed; that noise would
# follow pytest's summary line in CI's output
logging.getLogger("py4j").setLevel(logging.WARNING)

ORDERS = "regionflow.examples.orders:job"

# Every JVM the suite starts runs with these options (tests/suite_jvm_options.py); a caller's own is kept as given.
os.environ.setdefault("JAVA_TOOL_OPTIONS", SUITE_JAVA_OPTIONS)
# spark-submit's JVMs map the classes a Connect server loads from the suite's class archive, when `make jvm-archive`
# wrote it (tests/suite_jvm_archive.py); the xdist workers inherit the variable from the controller.
if "SPARK_SUBMIT_OPTS" not in os.environ and (_submit_options := suite_jvm_archive.built_submit_options()):
    os.environ["SPARK_SUBMIT_OPTS"] = _submit_options
MEASURE_EVERY_S = 120.0


class ModuleProgress:
    """A line per test module when its last test ends: how many tests, how long, the minutes since the
    session started and, at most every `MEASURE_EVERY_S` seconds, the machine's speed then. A CI run
    stopped at its time limit prints no ``--durations`` table; these lines still say where the time went
    and whether the box slowed down."""

    def __init__(self, reporter):
        self.reporter = reporter
        self.session_started = time.monotonic()
        self.module, self.started, self.tests = None, 0.0, 0
        self.measured = self.session_started  # when the machine's speed was last measured: pytest_sessionstart

    def test_starts(self, nodeid):
        """Called as each test starts: a new module ends the previous one."""
        module = nodeid.split("::", 1)[0]
        if module != self.module:
            self.module_ends()
            self.module, self.started, self.tests = module, time.monotonic(), 0
        self.tests += 1

    def module_ends(self):
        """Write the line of the module running now, if any."""
        if self.module is None:
            return
        now = time.monotonic()
        line = (f"[{(now - self.session_started) / 60:5.1f} min] {self.module}: {self.tests} tests in "
                f"{now - self.started:.0f} s")
        if now - self.measured >= MEASURE_EVERY_S:  # the measurement itself is slow on a slow machine
            self.measured = now
            line += f"; {machine_speed(units=3, touch_mib=16)}"
        self.reporter.currentfspath = True  # so that write_line ends the line of progress dots (-q) first
        self.reporter.write_line(line)
        self.module = None


LONG = ("long: a scenario test that costs minutes because it starts many Spark applications (a spark-submit per "
        "region) or drives dozens of DAG runs; `make test` (CI) leaves it out, `make test-long` runs it, "
        "`make test-all` runs everything (CONTRIBUTING.md)")
HEAVY = ("heavy: starts Spark (a JVM), Airflow, PostgreSQL, Chromium or mypy processes, or needs a fixture that does; "
         "set by tests/conftest.py (HEAVY_MODULES, HEAVY_FIXTURES), or by hand on one test of a light module. "
         "`make test-quick` runs the rest (-m 'not heavy and not long'); a run without heavy tests refuses to "
         "start such a process (HeavyProcessGuard)")

# Modules whose tests start those processes themselves or share a module fixture that does (a stack, a server),
# and single tests (module::function) that do in a module that otherwise does not.
HEAVY_MODULES = frozenset({
    "airflow/test_airflow_cli.py", "airflow/test_conformance.py", "airflow/test_e2e.py", "airflow/test_e2e_session.py",
    "airflow/test_e2e_session_faults.py", "airflow/test_e2e_speculation.py", "airflow/test_embedded.py",
    "airflow/test_executor_config.py", "airflow/test_ha_postgres.py", "airflow/test_multi_machine.py",
    "airflow/test_readme_quickstart.py", "airflow/test_store_db_manager.py",
    "airflow/test_store_restart.py", "airflow/test_ui_access.py", "airflow/test_ui_plugin.py",
    "spark/test_connect.py", "spark/test_disk_full.py", "spark/test_run.py", "spark/test_server_oom.py",
    "spark/test_standalone.py",
    "test_cli_output.py", "test_lint.py", "test_smoke_install.py::test_venv_spark_submit_version",
})
# Fixtures that start those processes: the session's PostgreSQL, Spark Connect servers and standalone cluster, the
# reference run, the PySpark app of tests/spark/conftest.py and tests/spark/test_store.py's SparkSession.
HEAVY_FIXTURES = frozenset({"postgres", "orders_reference", "standalone_cluster", "event_servers", "shared_servers",
                            "tiny_app", "spark", "shared_stack"})
TESTS_DIR = os.path.dirname(os.path.abspath(__file__))


def pytest_configure(config):
    """Registers the ``long`` and ``heavy`` markers (see `LONG`, `HEAVY`)."""
    config.addinivalue_line("markers", LONG)
    config.addinivalue_line("markers", HEAVY)


def is_heavy(item) -> bool:
    """Whether `item` starts Spark, Airflow, PostgreSQL, Chromium or mypy processes (see `HEAVY`)."""
    module = os.path.relpath(str(item.path), TESTS_DIR)
    callspec = getattr(item, "callspec", None)
    return (module in HEAVY_MODULES or f"{module}::{getattr(item, 'originalname', item.name)}" in HEAVY_MODULES
            or item.get_closest_marker("heavy") is not None
            or not HEAVY_FIXTURES.isdisjoint(getattr(item, "fixturenames", ()))
            or (callspec is not None and callspec.params.get("store_url") == "postgresql"))


def pytest_addoption(parser):
    parser.addoption("--longest-first", action="store_true",
                     help="run the test modules longest first, by tests/module_seconds.json (tests/suite_order.py); "
                          "with --dist loadfile, also pass --no-loadscope-reorder")


@pytest.hookimpl(tryfirst=True)  # before -m deselects
def pytest_collection_modifyitems(config, items):
    """Every test is heavy or quick: mark the heavy ones (`is_heavy`). With ``--longest-first``, the modules
    go longest first (`suite_order`)."""
    for item in items:
        if is_heavy(item) and item.get_closest_marker("heavy") is None:
            item.add_marker(pytest.mark.heavy)
    if config.getoption("longest_first"):
        suite_order.longest_first(items)


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadfile`` with the modules that share an Airflow stack as one unit (`suite_order`)."""
    if config.getvalue("dist") == "loadfile":
        return suite_order.GroupedLoadFileScheduling(config, log)
    return None


def pytest_runtest_logreport(report):
    """Under pytest-xdist, the controller's record of each worker's modules (`suite_order.WorkerTimeline`)."""
    node = getattr(report, "node", None)  # set by xdist's controller on a worker's report
    if node is not None:
        timeline = node.config.stash.setdefault(TIMELINE, suite_order.WorkerTimeline())
        timeline.report(node.gateway.id, report.nodeid, report.duration)


def pytest_collection_finish(session):
    """A run without heavy tests (``make test-quick``, the light half of ``make test``) refuses to start a
    heavy process: a test that would is missing from `HEAVY_MODULES` or `HEAVY_FIXTURES`."""
    if session.items and not any(item.get_closest_marker("heavy") for item in session.items):
        HeavyProcessGuard.install()


class HeavyProcessGuard:
    """Makes ``subprocess.Popen`` refuse the programs of `HEAVY` (pyspark, Airflow's components, selenium and
    the tests start theirs through it) with an error naming the fix."""

    PROGRAMS = frozenset({"java", "spark-submit", "spark-class", "pyspark", "initdb", "pg_ctl", "postgres",
                          "runuser", "chromium", "chromedriver", "airflow"})
    MODULES = frozenset({"airflow", "mypy"})  # python -m <module>
    installed = False

    @classmethod
    def heavy(cls, args) -> bool:
        argv = [os.fsdecode(arg) if isinstance(arg, bytes | os.PathLike) else str(arg)
                for arg in ([args] if isinstance(args, str | bytes | os.PathLike) else args)]
        words = argv[0].split() if len(argv) == 1 else argv  # a shell=True command line
        return bool(words) and (os.path.basename(words[0]) in cls.PROGRAMS
                or any(flag == "-m" and module in cls.MODULES for flag, module in zip(words, words[1:], strict=False)))

    @classmethod
    def install(cls) -> None:
        import subprocess

        if cls.installed:
            return
        cls.installed = True
        original = subprocess.Popen.__init__

        def guarded(self, args, *rest, **kwargs):
            if cls.heavy(args):
                raise RuntimeError(f"a test run without heavy tests started {args!r}: mark the test heavy "
                                   f"(tests/conftest.py: HEAVY_MODULES, HEAVY_FIXTURES or @pytest.mark.heavy)")
            original(self, args, *rest, **kwargs)

        subprocess.Popen.__init__ = guarded


def pytest_sessionstart(session):
    """Print `machine_speed` first in the output (also under ``-q``, which hides report headers)."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(machine_speed())
        session.config.stash[PROGRESS] = ModuleProgress(reporter)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    """`ModuleProgress`: count the test, and close the previous module's line at a module change
    (returns None: pytest's own protocol runs the test)."""
    progress = item.config.stash.get(PROGRESS, None)
    if progress is not None:
        progress.test_starts(item.nodeid)


def pytest_sessionfinish(session):
    """`ModuleProgress`: the last module's line."""
    progress = session.config.stash.get(PROGRESS, None)
    if progress is not None:
        progress.module_ends()


def pytest_terminal_summary(terminalreporter):
    """Each xdist worker's modules (`suite_order`), then `machine_speed` again: the box may have changed."""
    timeline = terminalreporter.config.stash.get(TIMELINE, None)
    if timeline is not None:
        for line in timeline.lines():
            terminalreporter.write_line(line)
        if suite_order.wants_update() and terminalreporter.config.getoption("longest_first"):  # the run it orders
            suite_order.update_table(timeline.measured())
            terminalreporter.write_line(f"module seconds written to {suite_order.TABLE}")
    terminalreporter.write_line(machine_speed())


PROGRESS = pytest.StashKey[ModuleProgress]()
TIMELINE = pytest.StashKey[suite_order.WorkerTimeline]()


def machine_speed(units=10, touch_mib=64):
    """How fast this machine is right now, so a slow CI run can be told from a slow suite: `units` of
    pure-Python work (about 24 ms each on a quiet 2-core box of this kind), then the time to first-touch
    `touch_mib` MiB of fresh memory (256 page faults a MiB; JVM, Airflow and pyspark starts fault in
    hundreds of MiB)."""
    import mmap
    import statistics

    from rfbench.machine import cpu_unit_times

    times = cpu_unit_times(units)
    memory = mmap.mmap(-1, touch_mib << 20)
    started = time.perf_counter()
    for offset in range(0, len(memory), 4096):
        memory[offset] = 1
    touch_ms = (time.perf_counter() - started) * 1000
    memory.close()
    return (f"machine speed: CPU unit median {statistics.median(times):.0f} ms, max {max(times):.0f} ms "
            f"(quiet box ~24 ms); first touch of {touch_mib} MiB {touch_ms:.0f} ms")


@pytest.fixture(scope="module", autouse=True)
def no_connect_client_marks_between_modules():
    """A module that built a Spark Connect client session in this process (pyspark then sets
    ``SPARK_CONNECT_MODE_ENABLED``) leaves no such mark for the next module of this worker: any module may follow
    any under ``--dist loadfile``, and a classic session, or a spark-submit inheriting the environment, would
    become a Connect client without a URL (``CONNECT_URL_NOT_SET``; a suite run had the standalone tests follow the
    multi-machine module). Cleared when a module starts; `no_client_marks` puts that back after its own fixtures end."""
    from regionflow.spark.servers.client_env import CONNECT_CLIENT_VARIABLES, no_client_marks

    for variable in CONNECT_CLIENT_VARIABLES:
        os.environ.pop(variable, None)
    with no_client_marks():
        yield


@pytest.fixture(scope="session", autouse=True)
def migrated_airflow_databases(tmp_path_factory):
    """Every embedded Airflow stack of the session on SQLite copies one freshly migrated database
    instead of running ``airflow db migrate`` itself (see regionflow.testing.migrated_db)."""
    from regionflow.testing.migrated_db import MigratedDatabaseCache
    from regionflow.testing.stack import EmbeddedAirflow

    # under pytest-xdist, every worker's base temp sits in one directory of the run: the workers share the cache
    # (it takes a lock), so the run migrates once, not once per worker
    shared = os.environ.get("PYTEST_XDIST_WORKER") is not None
    directory = (tmp_path_factory.getbasetemp().parent / "airflow-databases" if shared
                 else tmp_path_factory.mktemp("airflow-databases"))
    EmbeddedAirflow.migrated_databases = MigratedDatabaseCache(str(directory))
    yield EmbeddedAirflow.migrated_databases
    EmbeddedAirflow.migrated_databases = None


@pytest.fixture(scope="session")
def event_servers(tmp_path_factory):
    """One Spark Connect server (4 slots) for the whole test session, with its event log on: the reference
    run, the vertex-level and TPC-H tests share it through ``RunOptions(servers=...)`` and count Spark jobs
    from the log. Yields ``(servers, events_dir)``. Its start leaves no Connect-client marks in this process
    (a later spark-submit or Airflow stack started from here would become a Connect client)."""
    from regionflow.scheduling.hosts import Cluster
    from regionflow.spark.servers.client_env import CONNECT_CLIENT_VARIABLES, no_client_marks
    from regionflow.spark.servers.session_servers import SessionServers
    from rfbench.spark_counts import event_log_conf

    work = tmp_path_factory.mktemp("event-servers")
    events = work / "events"
    events.mkdir()
    servers = SessionServers(Cluster.local_default(4), str(work / "sessions"), base_port=None,
                             conf=event_log_conf(str(events)))
    with no_client_marks():
        servers.start()
    yield servers, str(events)
    servers.stop()
    for variable in CONNECT_CLIENT_VARIABLES:  # later classic sessions of this process stay classic
        os.environ.pop(variable, None)


@pytest.fixture(scope="session")
def orders_reference(tmp_path_factory, event_servers):
    """Rows and checksum of the example job's sink from one plain PySpark run (the ground truth): the same
    vertex functions as one program, no regions, in a client session of the session's Spark Connect server
    (a spark-submit of its own cost 20-40 s here; the session took 8 s)."""
    from regionflow.core.graph import load_job
    from regionflow.core.plan import Plan
    from regionflow.spark.servers.client_env import no_client_marks
    from regionflow.units.reference import run_reference
    from regionflow.units.runner import RunOptions

    servers, _ = event_servers
    options = RunOptions(data_dir=str(tmp_path_factory.mktemp("reference")), cluster=servers.cluster,
                         progress=None, servers=servers)
    with no_client_marks():
        totals = run_reference(ORDERS, Plan(load_job(ORDERS)), options).sinks["totals"]
    assert totals["rows"] > 0
    return totals


@pytest.fixture(scope="session")
def postgres():
    """One PostgreSQL server for the whole session (Debian's postgresql, see tests/postgres.py)."""
    from postgres import throwaway_server

    with throwaway_server() as server:
        yield server


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request, tmp_path):
    """A new, empty store URL: a SQLite file, or a database on the session's PostgreSQL server."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/regionflow.db"
    return request.getfixturevalue("postgres").new_database()
