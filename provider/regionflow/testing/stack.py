"""An embedded, real Airflow 3.3 stack on 127.0.0.1 for the demo, the end-to-end tests and users' DAG tests.

`EmbeddedAirflow` owns one Airflow home: its ``airflow.cfg`` (written by `airflow_config`, the only place
of its configuration: SQLite metadata DB, executor, fast loops, generated secrets, the simple auth
manager's admin password file), the ``airflow db migrate`` that prepares it, the component processes
(api-server, scheduler, dag-processor and triggerer: deferrable operators need the triggerer) with their
logs in ``<home>/logs/<component>.log``, and a client of the public REST API v2 (`rest_client`).

Everything stays on loopback: the api-server binds 127.0.0.1, and the scheduler and the triggerer
run with ``--skip-serve-logs`` because Airflow's worker log server binds every interface (``host=""``
in ``airflow.utils.serve_logs``) with no option to change it, whatever the executor's
``serve_logs``. The api-server reads task logs from the shared local ``[logging] base_log_folder``
instead; ``[core] hostname_callable`` answers 127.0.0.1, so its attempt to fetch a running task's
log from the (absent) log server never leaves loopback either.

Every process of the stack carries a tag in its environment, so `stop()` also finds the processes
that left the component process groups (task processes call ``setpgid``; BashOperator starts a new
session) and leaves none behind. It stops the api-server last: terminated tasks report their end
through the execution API instead of retrying against a server that is gone.
"""
from __future__ import annotations

import atexit
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx

from ..localfiles import tail
from ..processes import (
    ProcessInfo,
    command_line,
    descendants,
    reap,
    signal_group,
    signal_pids,
    start_ticks,
    tagged_processes,
    wait_until,
)
from ..spark.servers.session_servers import free_port
from .airflow_config import (
    LOOPBACK,
    config_sections,
    ensure_admin_password,
    render_config,
    stack_secrets,
    use_wal,
    write_private,
)
from .errors import ComponentFailed, EmbeddedAirflowError, StartTimeout
from .migrated_db import MigratedDatabaseCache, migration_inputs, migration_key
from .readiness import execution_api_answers, health_or_none, unhealthy_components
from .rest_client import POLL_SECONDS, AirflowRestClient

DEFAULT_EXECUTOR = "regionflow.executors.RegionExecutor"
DEFAULT_COMPONENTS = ("api-server", "scheduler", "dag-processor", "triggerer")
KNOWN_COMPONENTS = ("api-server", "scheduler", "dag-processor", "triggerer")
STACK_TAG_VARIABLE = "REGIONFLOW_EMBEDDED_STACK"
# A bound for a stack that never gets healthy, not an expected time: a component that exits fails the
# start at once. On a throttled 2-core box a start took 5-10 min (migration, four Airflow interpreters
# and the execution API's first answer).
DEFAULT_START_TIMEOUT_S = 600.0

# The log server binds all interfaces, so it is never started; see the module docstring.
_COMPONENT_ARGS: dict[str, tuple[str, ...]] = {
    "api-server": ("api-server", "--host", LOOPBACK),
    "scheduler": ("scheduler", "--skip-serve-logs"),
    "dag-processor": ("dag-processor",),
    "triggerer": ("triggerer", "--skip-serve-logs"),
}
# stop() order: the api-server last, so terminated tasks can still report through the execution API.
_STOP_STAGES: tuple[tuple[str, ...], ...] = (("scheduler", "triggerer", "dag-processor"), ("api-server",))
_LOG_TAIL_LINES = 40
_IDLE_WORKER_TITLE = "LocalExecutor: <idle>"  # the end of local_executor._run_worker's title while it waits


@dataclass(frozen=True)
class _Component:
    """One running Airflow component: its name, its process (a process-group leader), its log."""

    name: str
    process: subprocess.Popen
    log_path: str


class EmbeddedAirflow(AirflowRestClient):
    """A real Airflow stack (SQLite, simple auth manager) on 127.0.0.1; a context manager."""

    # Where fresh SQLite databases are kept and copied from instead of migrating each stack's own (a
    # test session sets it once; see `migrated_db`). None: every stack runs ``airflow db migrate``.
    migrated_databases: MigratedDatabaseCache | None = None

    def __init__(
        self,
        home: str,
        dags_folder: str,
        *,
        executor: str = DEFAULT_EXECUTOR,
        regionflow_options: Mapping[str, str] | None = None,
        extra_config: Mapping[str, Mapping[str, str]] | None = None,
        parallelism: int = 32,
        components: Sequence[str] = DEFAULT_COMPONENTS,
        plugins_folder: str | None = None,
        env: Mapping[str, str] | None = None,
        setup_commands: Sequence[Sequence[str]] = (),
        database_url: str | None = None,
        schedulers: int = 1,
    ) -> None:
        """`home`: the Airflow home (created); `dags_folder`: the DAG bundle's folder; `executor`:
        ``[core] executor``; `regionflow_options`: the ``[regionflow]`` section, passed through as
        given; `extra_config`: ``{section: {key: value}}`` written last, over every default here;
        `components`: which Airflow components run (the api-server always); `plugins_folder`:
        default ``<home>/plugins``; `env`: extra environment for every component (e.g. Spark's);
        `setup_commands`: ``airflow`` commands (argv after ``airflow``) run in order after ``db
        migrate`` and before the components start (``["teams", "create", "ops"]``); `database_url`:
        Airflow's metadata database (default: SQLite in `home`; e.g. a PostgreSQL URL); `schedulers`:
        how many scheduler processes run (Airflow's HA setup needs a server database for more than one).
        """
        if schedulers < 1 or (schedulers > 1 and (database_url or "sqlite").startswith("sqlite")):
            raise EmbeddedAirflowError(f"schedulers={schedulers}: one scheduler at least, and more than one "
                                       f"only on a server database (give database_url, e.g. PostgreSQL)")
        _check_components(components)
        self.home = os.path.abspath(home)
        self.dags_folder = os.path.abspath(dags_folder)
        self.executor = executor
        self.regionflow_options = dict(regionflow_options or {})
        self.extra_config = {section: dict(options) for section, options in (extra_config or {}).items()}
        self.parallelism = parallelism
        self.components = tuple(components)
        self.plugins_folder = os.path.abspath(plugins_folder or os.path.join(self.home, "plugins"))
        self.extra_env = dict(env or {})
        self.setup_commands = [list(command) for command in setup_commands]
        self.database_url = database_url
        self.schedulers = schedulers
        self.timings: dict[str, float] = {}
        self._stack_tag = uuid.uuid4().hex
        self._port: int | None = None
        self._migration_inputs: dict[str, str | None] | None = None  # set by write_config
        self._running: list[_Component] = []
        # process groups of components killed by `kill`: their orphans (LocalExecutor's workers) stay in
        # them, and setproctitle may have overwritten the environment that held the stack's tag
        self._killed_groups: set[int] = set()
        self._token: str | None = None
        self._http: httpx.Client | None = None
        self.session_servers = self._session_servers()

    def _session_servers(self) -> Any:
        """The Spark Connect servers of the session backend, the default (None with ``backend = submit``); free ports
        unless ``session_base_port`` is given."""
        if (str(self.regionflow_options.get("backend") or "").strip().lower() or "session") != "session":
            return None
        from ..config import RegionflowConfig
        from ..spark.launch.backends import configured_servers
        if not self.regionflow_options.get("session_base_port"):
            self.regionflow_options["session_base_port"] = str(free_port())
        self.regionflow_options.setdefault("session_state_dir", os.path.join(self.home, "regionflow-sessions"))
        return configured_servers(RegionflowConfig.from_values(lambda name: self.regionflow_options.get(name),
                                                               self.home))

    # ---- paths -----------------------------------------------------------------------------

    @property
    def config_path(self) -> str:
        return os.path.join(self.home, "airflow.cfg")

    @property
    def passwords_path(self) -> str:
        """The simple auth manager's password file (JSON, mode 0600); the password is never logged."""
        return os.path.join(self.home, "simple_auth_manager_passwords.json")

    @property
    def logs_dir(self) -> str:
        return os.path.join(self.home, "logs")

    def log_path(self, component: str) -> str:
        return os.path.join(self.logs_dir, f"{component}.log")

    @property
    def database_path(self) -> str:
        """Airflow's SQLite metadata database (WAL mode, see `start`)."""
        return os.path.join(self.home, "airflow.db")

    @property
    def api_url(self) -> str:
        if self._port is None:
            raise EmbeddedAirflowError("api-server: no port yet; call write_config() or start() first")
        return f"http://{LOOPBACK}:{self._port}"

    # ---- configuration ---------------------------------------------------------------------

    def write_config(self) -> str:
        """Write ``<home>/airflow.cfg`` (a fresh api port each time, secrets kept); return its path."""
        for folder in (self.home, self.logs_dir, self.dags_folder, self.plugins_folder):
            os.makedirs(folder, mode=0o700, exist_ok=True)
        self._port = free_port()
        config = config_sections(self, self._port, stack_secrets(self.config_path))
        write_private(self.config_path, render_config(config))
        ensure_admin_password(self.passwords_path)
        self._migration_inputs = migration_inputs(config)
        return self.config_path

    def child_env(self) -> dict[str, str]:
        """Environment of every component: no inherited AIRFLOW__ overrides, this home, the tag."""
        env = {key: value for key, value in os.environ.items() if not key.startswith("AIRFLOW__")}
        venv_bin = os.path.dirname(sys.executable)
        env.update({
            "AIRFLOW_HOME": self.home,
            "AIRFLOW_CONFIG": self.config_path,
            "PATH": venv_bin + os.pathsep + env.get("PATH", ""),
            "PYTHONUNBUFFERED": "1",
            STACK_TAG_VARIABLE: self._stack_tag,
        })
        env.update(self.extra_env)
        return env

    # ---- lifecycle -------------------------------------------------------------------------

    def start(self, timeout: float = DEFAULT_START_TIMEOUT_S) -> EmbeddedAirflow:
        """Write the config, migrate the DB, start the components; return once all are healthy.

        `timeout` bounds two steps apart: the database's migration (with the setup commands), then the
        components' start until all are healthy (with the session servers). The first is the longest
        step of a first start on a slow machine, and a later start copies its result (`migrate_database`).
        Raises `ComponentFailed` when ``db migrate`` or a component exits, `StartTimeout` when the
        stack is not healthy in time; either way nothing is left running.
        """
        if self._running:
            raise EmbeddedAirflowError(f"the embedded Airflow in {self.home} is already started")
        deadline = time.monotonic() + timeout
        self.write_config()
        try:
            self.timings["db_migrate_s"] = self.migrate_database(deadline - time.monotonic())
            if not self.database_url:
                use_wal(self.database_path)
            for command in self.setup_commands:
                self._airflow_command(command, deadline - time.monotonic())
            started = time.monotonic()
            deadline = started + timeout
            atexit.register(self.stop)
            for component in self.components:
                copies = self.schedulers if component == "scheduler" else 1
                self._running.extend(self._spawn(component) for _ in range(copies))
            self._wait_until_healthy(deadline, timeout)
            self.timings["start_to_healthy_s"] = round(time.monotonic() - started, 2)
            self._start_session_servers(deadline - time.monotonic())
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self, grace_seconds: float = 15.0) -> None:
        """Stop the stack and leave no process behind; idempotent.

        Stage by stage (`_STOP_STAGES`): SIGTERM, then wait up to `grace_seconds`; SIGKILL whatever
        is left at the end. The api-server goes last so that task processes, terminated with the
        scheduler, can still report their end through the execution API instead of retrying.
        """
        atexit.unregister(self.stop)
        started = time.monotonic()
        self.close_client()
        if self.session_servers is not None:
            self.session_servers.stop()
        if self._running or self._tagged_pids():
            # Every process seen as the stack's, by pid and start time: one whose parent dies first is
            # reparented and, without the tag in its environment, no longer found by pids(); it is still
            # the stack's and killed at the end.
            seen: dict[int, str] = {}
            for index, stage in enumerate(_STOP_STAGES):
                self._remember(seen)
                later = {name for names in _STOP_STAGES[index + 1:] for name in names}
                self._terminate_stage(stage, later, grace_seconds)

            def left() -> list[int]:
                return sorted(set(self.pids()) | {pid for pid, start in seen.items() if start_ticks(pid) == start})

            if left():
                signal_pids(left(), signal.SIGKILL)
                wait_until(lambda: not left(), 10.0)
        for component in self._running:
            reap(component.process)
        if self._running:
            self.timings["stop_s"] = round(time.monotonic() - started, 2)
        self._running = []
        self._killed_groups = set()

    def _remember(self, seen: dict[int, str]) -> None:
        for pid in self.pids():
            start = start_ticks(pid)
            if start is not None:
                seen.setdefault(pid, start)

    def _terminate_stage(self, stage: tuple[str, ...], later: set[str], grace_seconds: float) -> None:
        """SIGTERM `stage`: its components' groups and every other process of the stack outside the
        groups of `later` components (task processes run in groups or sessions of their own)."""
        spared = {c.process.pid for c in self._running if c.name in later}

        def stage_pids() -> list[int]:
            return [pid for pid, info in self._processes().items() if info.pgid not in spared]

        for component in self._running:
            if component.name in stage:
                signal_group(component.process.pid, signal.SIGTERM)
        pids = stage_pids()
        signal_pids(pids, signal.SIGTERM)
        # LocalExecutor's idle workers outlive SIGTERM and the scheduler waits for them: every stop took both
        # stages' grace (30 s). An idle one holds no task and is killed at once; a busy one gets the grace.
        signal_pids([pid for pid in pids if command_line(pid).endswith(_IDLE_WORKER_TITLE)], signal.SIGKILL)
        wait_until(lambda: not stage_pids(), grace_seconds)

    def __enter__(self) -> EmbeddedAirflow:
        # `with EmbeddedAirflow(...).start(timeout=...) as stack:` must not start twice.
        return self if self._running else self.start()

    def __exit__(self, *exc_info: Any) -> None:
        self.stop()

    def pids(self) -> list[int]:
        """Live processes of the stack: component groups, their descendants, tagged processes."""
        return sorted(self._processes())

    def _processes(self) -> dict[int, ProcessInfo]:
        table = tagged_processes(STACK_TAG_VARIABLE, self._stack_tag)
        leaders = {component.process.pid for component in self._running} | self._killed_groups
        found = {info.pid for info in table.values() if info.tagged or info.pgid in leaders}
        return {pid: table[pid] for pid in found | descendants(table, leaders | found)}

    def _tagged_pids(self) -> list[int]:
        return [info.pid for info in tagged_processes(STACK_TAG_VARIABLE, self._stack_tag).values() if info.tagged]

    def pids_of(self, component: str) -> list[int]:
        """The pids of every running process of `component` (several schedulers, say)."""
        return [c.process.pid for c in self._running if c.name == component]

    def components_running(self) -> dict[str, int]:
        """Each running component and its process id."""
        return {component.name: component.process.pid for component in self._running}

    def log_tail(self, component: str, lines: int = _LOG_TAIL_LINES) -> str:
        return tail(self.log_path(component), lines)

    def log_tails(self) -> str:
        return "\n".join(
            f"--- {name} ({self.log_path(name)}) ---\n{self.log_tail(name)}" for name in self.components
        )

    def migrate_database(self, timeout: float = DEFAULT_START_TIMEOUT_S) -> float:
        """Run ``airflow db migrate`` (after `write_config`), or copy a fresh database from
        `migrated_databases` (SQLite only); return how long it took in seconds. `start` calls it."""
        cache = type(self).migrated_databases
        if cache is None or self.database_url or self._migration_inputs is None:
            return self._airflow_command(["db", "migrate"], timeout)
        return cache.provide(self.database_path, migration_key(self._migration_inputs),
                             lambda: self._airflow_command(["db", "migrate"], timeout))

    def _airflow_command(self, argv: Sequence[str], timeout: float) -> float:
        """Run ``airflow <argv>`` with the stack's config; return how long it took in seconds.
        `ComponentFailed` (with the end of its log) when it fails or runs over `timeout`."""
        name = "-".join(argv[:2])  # the log's name: db-migrate, teams-create
        log_path = self.log_path(name)
        started = time.monotonic()
        with open(log_path, "ab") as log_file:
            try:
                code: int | None = subprocess.run(
                    [sys.executable, "-m", "airflow", *argv], stdin=subprocess.DEVNULL,
                    stdout=log_file, stderr=subprocess.STDOUT, env=self.child_env(), cwd=self.home,
                    timeout=max(timeout, 1.0), start_new_session=True,
                ).returncode
            except subprocess.TimeoutExpired:
                code = None
        if code != 0:
            outcome = f"exited with code {code}" if code is not None else f"ran over the {timeout:.0f} s left"
            command = " ".join(["airflow", *argv])
            raise ComponentFailed(name, log_path, f"{command} {outcome}; its log ({log_path}) ends with:\n"
                                                  f"{tail(log_path, _LOG_TAIL_LINES)}")
        return round(time.monotonic() - started, 2)

    def _start_session_servers(self, timeout: float) -> None:
        """With ``[regionflow] backend = session``, one Spark Connect server per host of the cluster, as
        `regionflow session start` would start them beside a real installation; stopped by `stop()`."""
        if self.session_servers is None:
            return
        began = time.monotonic()
        self.session_servers.start(timeout=max(timeout, 60.0))
        self.timings["session_servers_s"] = round(time.monotonic() - began, 2)

    def restart(self, component: str, env: Mapping[str, str] | None = None,
                timeout: float = DEFAULT_START_TIMEOUT_S) -> None:
        """Stop one running component (SIGTERM, then SIGKILL after 15 s) and start it again with `env`
        added to its environment, e.g. ``{"AIRFLOW__CORE__EXECUTOR": "LocalExecutor"}`` for the
        scheduler; returns once the stack is healthy again."""
        matching: list[_Component | None] = [c for c in self._running if c.name == component]
        [old] = matching or [None]
        if old is None:
            raise EmbeddedAirflowError(f"{component} is not running in the embedded Airflow in {self.home}")
        signal_group(old.process.pid, signal.SIGTERM)
        if not wait_until(lambda: old.process.poll() is not None, 15.0):
            signal_group(old.process.pid, signal.SIGKILL)
        reap(old.process)
        self._running = [c for c in self._running if c is not old] + [self._spawn(component, env)]
        self._wait_until_healthy(time.monotonic() + timeout, timeout)

    def kill(self, component: str, index: int = 0) -> int:
        """kill -9 of one component's main process only (its children, such as LocalExecutor's workers
        and the tasks they run, are left as orphans, as when that process crashes); returns its pid.
        The stack's stop() still ends the orphans (they carry the stack's tag)."""
        matching = [c for c in self._running if c.name == component]
        if index >= len(matching):
            raise EmbeddedAirflowError(f"no {component} #{index} runs in the embedded Airflow in {self.home}")
        victim = matching[index]
        signal_pids([victim.process.pid], signal.SIGKILL)
        self._killed_groups.add(victim.process.pid)  # a component leads its own group (start_new_session)
        reap(victim.process)
        self._running = [c for c in self._running if c is not victim]
        return victim.process.pid

    def revive(self, *components: str, timeout: float = DEFAULT_START_TIMEOUT_S) -> list[int]:
        """Start one more of each of `components` (after `kill`, say), as a supervisor would restart crashed
        ones; returns their pids once the stack is healthy again. Components killed together are revived
        together: the api-server's health answer counts the dag-processor's and triggerer's heartbeats."""
        for component in components:
            if component not in KNOWN_COMPONENTS:
                raise EmbeddedAirflowError(f"unknown component {component!r}; choose from {list(KNOWN_COMPONENTS)}")
        if "api-server" in components and any(c.name == "api-server" for c in self._running):
            raise EmbeddedAirflowError(f"the api-server already runs in the embedded Airflow in {self.home}")
        if "api-server" in components:
            self.close_client()  # its connections went with the old server
        revived = [self._spawn(component) for component in components]
        self._running.extend(revived)
        self._wait_until_healthy(time.monotonic() + timeout, timeout)
        return [component.process.pid for component in revived]

    def _spawn(self, component: str, env: Mapping[str, str] | None = None) -> _Component:
        log_path = self.log_path(component)
        command = [sys.executable, "-m", "airflow", *_COMPONENT_ARGS[component]]
        if component == "api-server":
            command += ["--port", str(self._port)]
        with open(log_path, "ab") as log_file:
            process = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT,
                env={**self.child_env(), **(env or {})}, cwd=self.home, start_new_session=True,
            )
        return _Component(component, process, log_path)

    def _wait_until_healthy(self, deadline: float, timeout: float) -> None:
        """Until every component is healthy by a heartbeat of this start and the execution API has
        answered once (see `readiness`); `StartTimeout` at `deadline`, `ComponentFailed` at an exit."""
        since = datetime.now(UTC)
        while True:
            self._fail_if_a_component_died()
            health = health_or_none(self._client())
            unhealthy = unhealthy_components(health, self.components, since)
            if not unhealthy:
                break
            self._fail_at(deadline, f"was not healthy within {timeout:.0f} s: {', '.join(unhealthy)} not healthy "
                                    f"(last health answer: {health})")
            time.sleep(POLL_SECONDS)
        started = time.monotonic()
        while not execution_api_answers(self._client(), deadline - time.monotonic()):
            self._fail_if_a_component_died()
            self._fail_at(deadline, f"was healthy, but its execution API (/execution/health) did not answer within "
                                    f"{timeout:.0f} s of the start")
            time.sleep(POLL_SECONDS)
        self.timings["execution_api_first_answer_s"] = round(time.monotonic() - started, 2)

    def _fail_at(self, deadline: float, what: str) -> None:
        if time.monotonic() >= deadline:
            raise StartTimeout(f"the embedded Airflow in {self.home} {what}; raise the timeout on a busy machine "
                               f"or read the logs:\n{self.log_tails()}")

    def _fail_if_a_component_died(self) -> None:
        for component in self._running:
            code = component.process.poll()
            if code is not None:
                raise ComponentFailed(
                    component.name, component.log_path,
                    f"the Airflow {component.name} exited with code {code}; its log ({component.log_path}) "
                    f"ends with:\n{tail(component.log_path, _LOG_TAIL_LINES)}",
                )

# ---- helpers ----------------------------------------------------------------------------------


def _check_components(components: Sequence[str]) -> None:
    unknown = [name for name in components if name not in KNOWN_COMPONENTS]
    if unknown:
        raise EmbeddedAirflowError(f"unknown component(s) {unknown}; choose from {list(KNOWN_COMPONENTS)}")
    if "api-server" not in components:
        raise EmbeddedAirflowError("the api-server is required: it serves the execution API and the health check")



__all__ = ["DEFAULT_COMPONENTS", "DEFAULT_EXECUTOR", "KNOWN_COMPONENTS", "STACK_TAG_VARIABLE", "EmbeddedAirflow"]
