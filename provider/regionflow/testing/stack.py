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
through the execution API instead of retrying against a server that is gone. The component processes
(start, kill, restart, revive, find, stop) are `components.ComponentProcesses`'; this class adds the
configuration, the database and the health waits.
"""
from __future__ import annotations

import atexit
import os
import sys
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

import httpx

from ..localfiles import tail
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
from .components import (
    KNOWN_COMPONENTS,
    LOG_TAIL_LINES,
    STACK_TAG_VARIABLE,
    ComponentProcesses,
    check_components,
)
from .errors import EmbeddedAirflowError, StartTimeout
from .migrated_db import MigratedDatabaseCache, migration_inputs, migration_key
from .readiness import execution_api_answers, health_or_none, unhealthy_components
from .rest_client import POLL_SECONDS, AirflowRestClient

DEFAULT_EXECUTOR = "regionflow.executors.RegionExecutor"
DEFAULT_COMPONENTS = KNOWN_COMPONENTS  # a stack runs every component unless told otherwise
# A bound for a stack that never gets healthy, not an expected time: a component that exits fails the
# start at once. On a throttled 2-core box a start took 5-10 min (migration, four Airflow interpreters
# and the execution API's first answer).
DEFAULT_START_TIMEOUT_S = 600.0


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
        start_servers: bool = True,
    ) -> None:
        """`home`: the Airflow home (created); `dags_folder`: the DAG bundle's folder; `executor`:
        ``[core] executor``; `regionflow_options`: the ``[regionflow]`` section, passed through as
        given; `extra_config`: ``{section: {key: value}}`` written last, over every default here;
        `components`: which Airflow components run (the api-server always); `plugins_folder`:
        default ``<home>/plugins``; `env`: extra environment for every component (e.g. Spark's);
        `setup_commands`: ``airflow`` commands (argv after ``airflow``) run in order after ``db
        migrate`` and before the components start (``["teams", "create", "ops"]``); `database_url`:
        Airflow's metadata database (default: SQLite in `home`; e.g. a PostgreSQL URL); `schedulers`:
        how many scheduler processes run (Airflow's HA setup needs a server database for more than one);
        `start_servers`: whether `start` starts the session backend's Spark Connect servers, as `regionflow
        session start` would beside an installation (False: the first region task granted a host starts its
        server, as in a plain installation; `stop` stops them either way).
        """
        if schedulers < 1 or (schedulers > 1 and (database_url or "sqlite").startswith("sqlite")):
            raise EmbeddedAirflowError(f"schedulers={schedulers}: one scheduler at least, and more than one "
                                       f"only on a server database (give database_url, e.g. PostgreSQL)")
        check_components(components)
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
        self.start_servers = start_servers
        self.timings: dict[str, float] = {}
        self._stack_tag = uuid.uuid4().hex
        self._port: int | None = None
        self._migration_inputs: dict[str, str | None] | None = None  # set by write_config
        self._processes = ComponentProcesses(self.home, self._stack_tag, self.log_path, self.child_env)
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
        if self._processes.running:
            raise EmbeddedAirflowError(f"the embedded Airflow in {self.home} is already started")
        deadline = time.monotonic() + timeout
        self.write_config()
        try:
            self.timings["db_migrate_s"] = self.migrate_database(deadline - time.monotonic())
            if not self.database_url:
                use_wal(self.database_path)
            for command in self.setup_commands:
                self._processes.run_airflow(command, deadline - time.monotonic())
            started = time.monotonic()
            deadline = started + timeout
            atexit.register(self.stop)
            for component in self.components:
                for _ in range(self.schedulers if component == "scheduler" else 1):
                    self._processes.spawn(component, port=self._port)
            # the servers' JVMs start while the components import Airflow (no region task runs before this
            # method returns); leaving the block waits for that start, so a failed health wait stops them too
            with ThreadPoolExecutor(1, thread_name_prefix="session-servers") as pool:
                servers = pool.submit(self._start_session_servers, timeout)

                def servers_failed() -> bool:  # then the start fails at once, not once the components are up
                    return servers.done() and servers.exception() is not None

                self._wait_until_healthy(deadline, timeout, servers_failed)
                if not servers_failed():
                    self.timings["start_to_healthy_s"] = round(time.monotonic() - started, 2)
            servers.result()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self, grace_seconds: float = 15.0) -> None:
        """Stop the stack and leave no process behind; idempotent.

        Stage by stage (`components.ComponentProcesses.stop`): SIGTERM, then wait up to `grace_seconds`;
        SIGKILL whatever is left at the end; the session servers stop meanwhile. The api-server goes last so
        that task processes, terminated with the scheduler, can still report their end through the execution
        API instead of retrying.
        """
        atexit.unregister(self.stop)
        started = time.monotonic()
        self.close_client()
        # the servers' JVMs end while the components do (each waits on its own processes' exits)
        with ThreadPoolExecutor(1, thread_name_prefix="session-servers") as pool:
            servers = pool.submit(self.session_servers.stop) if self.session_servers is not None else None
            if self._processes.stop(grace_seconds):
                self.timings["stop_s"] = round(time.monotonic() - started, 2)
        if servers is not None:
            servers.result()

    def __enter__(self) -> EmbeddedAirflow:
        # `with EmbeddedAirflow(...).start(timeout=...) as stack:` must not start twice.
        return self if self._processes.running else self.start()

    def __exit__(self, *exc_info: Any) -> None:
        self.stop()

    def pids(self) -> list[int]:
        """Live processes of the stack: component groups, their descendants, tagged processes."""
        return self._processes.pids()

    def pids_of(self, component: str) -> list[int]:
        """The pids of every running process of `component` (several schedulers, say)."""
        return self._processes.pids_of(component)

    def components_running(self) -> dict[str, int]:
        """Each running component and its process id."""
        return {component.name: component.process.pid for component in self._processes.running}

    def component_alive(self, component: str) -> bool:
        """Whether `component` was started and none of its processes has exited since."""
        started = [c for c in self._processes.running if c.name == component]
        return bool(started) and all(c.process.poll() is None for c in started)

    def log_tail(self, component: str, lines: int = LOG_TAIL_LINES) -> str:
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
            return self._processes.run_airflow(["db", "migrate"], timeout)
        return cache.provide(self.database_path, migration_key(self._migration_inputs),
                             lambda: self._processes.run_airflow(["db", "migrate"], timeout))

    def _start_session_servers(self, timeout: float) -> None:
        """With ``[regionflow] backend = session``, one Spark Connect server per host of the cluster, as
        `regionflow session start` would start them beside a real installation; stopped by `stop()`."""
        if self.session_servers is None or not self.start_servers:
            return
        began = time.monotonic()
        self.session_servers.start(timeout=max(timeout, 60.0))
        self.timings["session_servers_s"] = round(time.monotonic() - began, 2)

    def restart(self, component: str, env: Mapping[str, str] | None = None,
                timeout: float = DEFAULT_START_TIMEOUT_S) -> None:
        """Stop one running component (SIGTERM, then SIGKILL after 15 s) and start it again with `env`
        added to its environment, e.g. ``{"AIRFLOW__CORE__EXECUTOR": "LocalExecutor"}`` for the
        scheduler; returns once the stack is healthy again."""
        self._processes.restart(component, port=self._port, env=dict(env or {}))
        self._wait_until_healthy(time.monotonic() + timeout, timeout)

    def kill(self, component: str, index: int = 0) -> int:
        """kill -9 of one component's main process only (its children, such as LocalExecutor's workers
        and the tasks they run, are left as orphans, as when that process crashes); returns its pid.
        The stack's stop() still ends the orphans (they carry the stack's tag)."""
        return self._processes.kill(component, index)

    def revive(self, *components: str, timeout: float = DEFAULT_START_TIMEOUT_S) -> list[int]:
        """Start one more of each of `components` (after `kill`, say), as a supervisor would restart crashed
        ones; returns their pids once the stack is healthy again. Components killed together are revived
        together: the api-server's health answer counts the dag-processor's and triggerer's heartbeats."""
        self._processes.check_revivable(components)
        if "api-server" in components:
            self.close_client()  # its connections went with the old server
        revived = [self._processes.spawn(component, port=self._port) for component in components]
        self._wait_until_healthy(time.monotonic() + timeout, timeout)
        return [component.process.pid for component in revived]

    def _wait_until_healthy(self, deadline: float, timeout: float,
                            given_up: Callable[[], bool] = lambda: False) -> None:
        """Until every component is healthy by a heartbeat of this start and the execution API has
        answered once (see `readiness`), or `given_up()`; `StartTimeout` at `deadline`, `ComponentFailed` at
        an exit."""
        since = datetime.now(UTC)
        while not given_up():
            self._processes.fail_if_one_died()
            health = health_or_none(self._client())
            unhealthy = unhealthy_components(health, self.components, since)
            if not unhealthy:
                break
            self._fail_at(deadline, f"was not healthy within {timeout:.0f} s: {', '.join(unhealthy)} not healthy "
                                    f"(last health answer: {health})")
            time.sleep(POLL_SECONDS)
        started = time.monotonic()
        while not given_up() and not execution_api_answers(self._client(), deadline - time.monotonic()):
            self._processes.fail_if_one_died()
            self._fail_at(deadline, f"was healthy, but its execution API (/execution/health) did not answer within "
                                    f"{timeout:.0f} s of the start")
            time.sleep(POLL_SECONDS)
        if not given_up():
            self.timings["execution_api_first_answer_s"] = round(time.monotonic() - started, 2)

    def _fail_at(self, deadline: float, what: str) -> None:
        if time.monotonic() >= deadline:
            raise StartTimeout(f"the embedded Airflow in {self.home} {what}; raise the timeout on a busy machine "
                               f"or read the logs:\n{self.log_tails()}")


__all__ = ["DEFAULT_COMPONENTS", "DEFAULT_EXECUTOR", "KNOWN_COMPONENTS", "STACK_TAG_VARIABLE", "EmbeddedAirflow"]
