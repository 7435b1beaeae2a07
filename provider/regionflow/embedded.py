"""An embedded, real Airflow 3.3 stack on 127.0.0.1 for the demo and the end-to-end tests.

`EmbeddedAirflow` owns one Airflow home: its ``airflow.cfg`` (SQLite metadata DB, executor, fast
loops, generated secrets, the simple auth manager's admin password file), the ``airflow db migrate``
that prepares it, the component processes (api-server, scheduler, dag-processor and triggerer, as in a
real installation: deferrable operators need the triggerer) with their logs in
``<home>/logs/<component>.log``, and a small client of the public REST API v2 (token, DAGs, import
errors, runs, task instances, task logs, marking and clearing task instances).

Configuration lives in ``<home>/airflow.cfg`` only. Every child gets ``AIRFLOW_HOME`` and
``AIRFLOW_CONFIG`` pointing at it and no inherited ``AIRFLOW__SECTION__KEY`` variables, because
those override the file: a developer's shell (or the Makefile's ``AIRFLOW__CORE__LOAD_EXAMPLES``)
cannot then change the stack, and any process started later with the same ``AIRFLOW_HOME`` (task
processes, Spark drivers, a developer's ``airflow`` CLI) reads exactly the same settings.

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
import configparser
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

import httpx

from .core.errors import RegionflowError
from .processes import live_processes, signal_group, signal_pids, start_ticks

LOOPBACK = "127.0.0.1"
DEFAULT_EXECUTOR = "regionflow.executors.RegionExecutor"
DEFAULT_COMPONENTS = ("api-server", "scheduler", "dag-processor", "triggerer")
KNOWN_COMPONENTS = ("api-server", "scheduler", "dag-processor", "triggerer")
ADMIN_USER = "admin"
STACK_TAG_VARIABLE = "REGIONFLOW_EMBEDDED_STACK"
# Airflow's SQLite metadata database: its connections wait this long for a lock (pysqlite's default
# is 5 s), named by ``[database] sql_alchemy_connect_args``.
SQLITE_CONNECT_ARGS = {"timeout": 30}
TERMINAL_RUN_STATES = frozenset({"success", "failed"})

# The log server binds all interfaces, so it is never started; see the module docstring.
_COMPONENT_ARGS: dict[str, tuple[str, ...]] = {
    "api-server": ("api-server", "--host", LOOPBACK),
    "scheduler": ("scheduler", "--skip-serve-logs"),
    "dag-processor": ("dag-processor",),
    "triggerer": ("triggerer", "--skip-serve-logs"),
}
# Key of each component in GET /api/v2/monitor/health.
_HEALTH_KEYS = {"scheduler": "scheduler", "dag-processor": "dag_processor", "triggerer": "triggerer"}
# stop() order: the api-server last, so terminated tasks can still report through the execution API.
_STOP_STAGES: tuple[tuple[str, ...], ...] = (("scheduler", "triggerer", "dag-processor"), ("api-server",))
_LOG_TAIL_LINES = 40
_POLL_SECONDS = 0.5
_TRIGGER_TRIES = 3
API_TIMEOUT_S = 120.0
_PAGE = 100


class EmbeddedAirflowError(RegionflowError):
    """The embedded Airflow stack failed; the message names the component and its log file."""


class ComponentFailed(EmbeddedAirflowError):
    """A component (or ``airflow db migrate``) exited while it should be running or succeed."""

    def __init__(self, component: str, log_path: str, message: str) -> None:
        super().__init__(message)
        self.component = component
        self.log_path = log_path


class StartTimeout(EmbeddedAirflowError):
    """The stack did not become healthy within the start timeout."""


class ApiError(EmbeddedAirflowError):
    """A REST API call answered with an unexpected status."""

    def __init__(self, method: str, url: str, status: int, body: str, log_path: str) -> None:
        super().__init__(
            f"api-server: {method} {url} answered {status}: {body[:2000]} (api-server log: {log_path})"
        )
        self.status = status


class WaitTimeout(EmbeddedAirflowError):
    """A DAG, an import error or a DAG run did not reach the awaited state in time."""


@dataclass(frozen=True)
class _Component:
    """One running Airflow component: its name, its process (a process-group leader), its log."""

    name: str
    process: subprocess.Popen
    log_path: str


@dataclass(frozen=True)
class _ProcessInfo:
    pid: int
    ppid: int
    pgid: int
    tagged: bool


class EmbeddedAirflow:
    """A real Airflow stack (SQLite, simple auth manager) on 127.0.0.1; a context manager."""

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
        self._running: list[_Component] = []
        self._token: str | None = None
        self._http: httpx.Client | None = None
        self.session_servers = self._session_servers()

    def _session_servers(self) -> Any:
        """The Spark Connect servers of the session backend, the default (None with ``backend = submit``); free ports
        unless ``session_base_port`` is given."""
        if (str(self.regionflow_options.get("backend") or "").strip().lower() or "session") != "session":
            return None
        from .config import RegionflowConfig
        from .spark.backends import configured_servers
        from .spark.connect import free_port

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
        """Airflow's SQLite metadata database (WAL mode, see `_migrate`)."""
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
        self._port = _free_port()
        config = self._config_sections(self._secrets())
        _write_private(self.config_path, _render_config(config))
        self._ensure_admin_password()
        return self.config_path

    def _config_sections(self, keys: Mapping[str, str]) -> dict[str, dict[str, str]]:
        api_url = f"http://{LOOPBACK}:{self._port}"
        sections: dict[str, dict[str, str]] = {
            "core": {
                "executor": self.executor,
                "dags_folder": self.dags_folder,
                "plugins_folder": self.plugins_folder,
                "load_examples": "False",
                "parallelism": str(self.parallelism),
                # The executor, not Airflow, is the gate: held tasks are QUEUED and count here.
                "max_active_tasks_per_dag": str(max(64, self.parallelism)),
                "max_active_runs_per_dag": "16",
                "default_pool_task_slot_count": str(max(128, self.parallelism)),
                "execution_api_server_url": f"{api_url}/execution/",
                "fernet_key": keys["fernet_key"],
                # ti.hostname is where the api-server fetches a running task's served log from;
                # 127.0.0.1 keeps that fetch on loopback (it fails fast: nothing serves logs).
                "hostname_callable": "regionflow.embedded.loopback_hostname",
                "auth_manager": "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager",
                "simple_auth_manager_users": f"{ADMIN_USER}:admin",
                "simple_auth_manager_all_admins": "False",
                "simple_auth_manager_passwords_file": self.passwords_path,
                # Two shared cores: parsing a regionflow DAG (plan + imports) can be slow.
                "dagbag_import_timeout": "120",
                # A rewritten DAG file reaches the database within seconds, not 30 s.
                "min_serialized_dag_update_interval": "5",
            },
            "database": {"sql_alchemy_conn": self.database_url} if self.database_url else {
                "sql_alchemy_conn": f"sqlite:///{self.database_path}",
                "sql_alchemy_connect_args": "regionflow.embedded.SQLITE_CONNECT_ARGS",
            },
            "logging": {
                "base_log_folder": self.logs_dir,
                "dag_processor_child_process_log_directory": os.path.join(self.logs_dir, "dag_processor"),
                # Nothing serves these (--skip-serve-logs); own ports keep the api-server's fallback
                # fetch of a running task's log away from another stack's 8793 on this machine.
                "worker_log_server_port": str(_free_port()),
                "trigger_log_server_port": str(_free_port()),
                "colored_console_log": "False",
            },
            "api": {
                "host": LOOPBACK,
                "port": str(self._port),
                "base_url": api_url,
                "workers": "1",
                "secret_key": keys["secret_key"],
                "expose_config": "False",
            },
            "api_auth": {"jwt_secret": keys["jwt_secret"]},
            "scheduler": {
                "scheduler_heartbeat_sec": "2",
                "scheduler_idle_sleep_time": "0.5",
                "enable_health_check": "False",
                # Only matters if extra_config turns the health check server on.
                "scheduler_health_check_server_host": LOOPBACK,
            },
            "dag_processor": {
                # A new file in the dags folder is listed within ~2 s and parsed right away.
                "refresh_interval": "2",
                "bundle_refresh_check_interval": "1",
                # Changed files are re-parsed at once whatever this says (mtime); unchanged ones every 30 s.
                "min_file_process_interval": "30",
                "parsing_processes": "1",
                "dag_file_processor_timeout": "180",
                "print_stats_interval": "0",
            },
            "workers": {
                # A busy SQLite database can answer a task's execution API call slowly.
                "execution_api_timeout": "30",
                # The task supervisor waits up to this long in select() between checks of its task
                # process. When the process closes its sockets before it has exited (Python's shutdown
                # after the task is done, slower with pyspark's Connect client loaded), nothing wakes
                # the select and the task's end reaches the executor up to 5 s (the default) late,
                # measured here on about half of the region tasks. 2 s caps that wait; the cost is a
                # heartbeat call per running task every 2 s, SQLite writes through the api-server's
                # one worker (1 s halves the wait but doubles those writes).
                "min_heartbeat_interval": "2",
            },
        }
        if self.regionflow_options:
            sections["regionflow"] = {str(k): str(v) for k, v in self.regionflow_options.items()}
        for section, options in self.extra_config.items():
            sections.setdefault(section, {}).update({str(k): str(v) for k, v in options.items()})
        return sections

    def _secrets(self) -> dict[str, str]:
        """Secrets of an existing airflow.cfg (the DB's fernet key must not change), else new ones."""
        previous = _read_config(self.config_path)
        wanted = {"fernet_key": ("core", _fernet_key), "secret_key": ("api", _token),
                  "jwt_secret": ("api_auth", _jwt_secret)}
        return {
            key: previous.get(section, key, fallback="") or make()
            for key, (section, make) in wanted.items()
        }

    def _ensure_admin_password(self) -> None:
        # Written before the api-server starts, so the auth manager finds the user and never
        # generates (and prints) a password of its own.
        passwords = _read_json(self.passwords_path)
        if passwords.get(ADMIN_USER):
            return
        passwords[ADMIN_USER] = secrets.token_urlsafe(24)
        _write_private(self.passwords_path, json.dumps(passwords) + "\n")

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

    def start(self, timeout: float = 180.0) -> EmbeddedAirflow:
        """Write the config, migrate the DB, start the components; return once all are healthy.

        Raises `ComponentFailed` when ``db migrate`` or a component exits, `StartTimeout` when the
        stack is not healthy `timeout` seconds after the call; either way nothing is left running.
        """
        if self._running:
            raise EmbeddedAirflowError(f"the embedded Airflow in {self.home} is already started")
        deadline = time.monotonic() + timeout
        self.write_config()
        try:
            self.timings["db_migrate_s"] = self._migrate(deadline - time.monotonic())
            if not self.database_url:
                _use_wal(self.database_path)
            for command in self.setup_commands:
                self._airflow_command(command, deadline - time.monotonic())
            started = time.monotonic()
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
        self._close_client()
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
                _wait_until(lambda: not left(), 10.0)
        for component in self._running:
            _reap(component.process)
        if self._running:
            self.timings["stop_s"] = round(time.monotonic() - started, 2)
        self._running = []

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
        signal_pids(stage_pids(), signal.SIGTERM)
        _wait_until(lambda: not stage_pids(), grace_seconds)

    def _close_client(self) -> None:
        # Before the SIGTERM: uvicorn's graceful shutdown waits for open keep-alive connections.
        self._token = None
        if self._http is not None:
            self._http.close()
            self._http = None

    def __enter__(self) -> EmbeddedAirflow:
        # `with EmbeddedAirflow(...).start(timeout=...) as stack:` must not start twice.
        return self if self._running else self.start()

    def __exit__(self, *exc_info: Any) -> None:
        self.stop()

    def pids(self) -> list[int]:
        """Live processes of the stack: component groups, their descendants, tagged processes."""
        return sorted(self._processes())

    def _processes(self) -> dict[int, _ProcessInfo]:
        table = _process_table(self._stack_tag)
        leaders = {component.process.pid for component in self._running}
        found = {info.pid for info in table.values() if info.tagged or info.pgid in leaders}
        return {pid: table[pid] for pid in found | _descendants(table, leaders | found)}

    def _tagged_pids(self) -> list[int]:
        return [info.pid for info in _process_table(self._stack_tag).values() if info.tagged]

    def pids_of(self, component: str) -> list[int]:
        """The pids of every running process of `component` (several schedulers, say)."""
        return [c.process.pid for c in self._running if c.name == component]

    def components_running(self) -> dict[str, int]:
        """Each running component and its process id."""
        return {component.name: component.process.pid for component in self._running}

    def log_tail(self, component: str, lines: int = _LOG_TAIL_LINES) -> str:
        return _tail(self.log_path(component), lines)

    def log_tails(self) -> str:
        return "\n".join(
            f"--- {name} ({self.log_path(name)}) ---\n{self.log_tail(name)}" for name in self.components
        )

    def _migrate(self, timeout: float) -> float:
        """Run ``airflow db migrate``; return how long it took in seconds."""
        return self._airflow_command(["db", "migrate"], timeout)

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
                                                  f"{_tail(log_path)}")
        return round(time.monotonic() - started, 2)

    def _start_session_servers(self, timeout: float) -> None:
        """With ``[regionflow] backend = session``, one Spark Connect server per host of the cluster, as
        `regionflow session start` would start them beside a real installation; stopped by `stop()`."""
        if self.session_servers is None:
            return
        began = time.monotonic()
        self.session_servers.start(timeout=max(timeout, 60.0))
        self.timings["session_servers_s"] = round(time.monotonic() - began, 2)

    def restart(self, component: str, env: Mapping[str, str] | None = None, timeout: float = 120.0) -> None:
        """Stop one running component (SIGTERM, then SIGKILL after 15 s) and start it again with `env`
        added to its environment, e.g. ``{"AIRFLOW__CORE__EXECUTOR": "LocalExecutor"}`` for the
        scheduler; returns once the stack is healthy again."""
        matching: list[_Component | None] = [c for c in self._running if c.name == component]
        [old] = matching or [None]
        if old is None:
            raise EmbeddedAirflowError(f"{component} is not running in the embedded Airflow in {self.home}")
        signal_group(old.process.pid, signal.SIGTERM)
        if not _wait_until(lambda: old.process.poll() is not None, 15.0):
            signal_group(old.process.pid, signal.SIGKILL)
        _reap(old.process)
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
        _reap(victim.process)
        self._running = [c for c in self._running if c is not victim]
        return victim.process.pid

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
        since = datetime.now(UTC)
        while True:
            self._fail_if_a_component_died()
            health = self._health_or_none()
            unhealthy = self._unhealthy_components(health, since)
            if not unhealthy:
                return
            if time.monotonic() >= deadline:
                raise StartTimeout(
                    f"the embedded Airflow in {self.home} was not healthy within {timeout:.0f} s: "
                    f"{', '.join(unhealthy)} not healthy (last health answer: {health}); raise the "
                    f"timeout on a busy machine or read the logs:\n{self.log_tails()}"
                )
            time.sleep(_POLL_SECONDS)

    def _health_or_none(self) -> dict[str, Any] | None:
        try:
            response = self._client().get("/api/v2/monitor/health", timeout=5)
        except httpx.HTTPError:
            return None
        return response.json() if response.status_code == 200 else None

    def _unhealthy_components(self, health: Mapping[str, Any] | None, since: datetime) -> list[str]:
        if health is None:
            return ["api-server"]
        return [
            name for name in self.components
            if name in _HEALTH_KEYS and not _healthy_since(health.get(_HEALTH_KEYS[name]) or {}, since)
        ]

    def _fail_if_a_component_died(self) -> None:
        for component in self._running:
            code = component.process.poll()
            if code is not None:
                raise ComponentFailed(
                    component.name, component.log_path,
                    f"the Airflow {component.name} exited with code {code}; its log ({component.log_path}) "
                    f"ends with:\n{_tail(component.log_path)}",
                )

    # ---- REST API v2 -----------------------------------------------------------------------

    def admin_password(self) -> str:
        password = _read_json(self.passwords_path).get(ADMIN_USER)
        if not password:
            raise EmbeddedAirflowError(f"api-server: no password for {ADMIN_USER!r} in {self.passwords_path}")
        return password

    def token(self) -> str:
        """A JWT of the admin user from POST /auth/token (cached; renewed after a 401)."""
        if self._token is None:
            body = {"username": ADMIN_USER, "password": self.admin_password()}
            response = self._client().post("/auth/token", json=body)
            self._check(response, (200, 201))
            self._token = response.json()["access_token"]
        return self._token

    def wait_for_dag(self, dag_id: str, timeout: float = 120.0) -> dict[str, Any]:
        """The DAG as GET /api/v2/dags/{dag_id} shows it, once the dag-processor has parsed it."""
        deadline = time.monotonic() + timeout
        while True:
            response = self._call("GET", f"/api/v2/dags/{_q(dag_id)}", ok=(200, 404))
            if response.status_code == 200:
                return response.json()
            if time.monotonic() >= deadline:
                raise WaitTimeout(
                    f"dag-processor: DAG {dag_id!r} not parsed within {timeout:.0f} s from {self.dags_folder}; "
                    f"import errors: {self.import_errors()}; dag-processor log "
                    f"({self.log_path('dag-processor')}) ends with:\n{self.log_tail('dag-processor')}"
                )
            time.sleep(_POLL_SECONDS)

    def import_errors(self) -> list[dict[str, Any]]:
        """Every import error (filename, stack_trace, ...) from GET /api/v2/importErrors."""
        return self._paged("/api/v2/importErrors", "import_errors")

    def wait_for_import_error(self, file_name: str, timeout: float = 120.0) -> dict[str, Any]:
        """The import error of the DAG file whose path ends with `file_name`, once it is reported."""
        deadline = time.monotonic() + timeout
        while True:
            for error in self.import_errors():
                if str(error.get("filename", "")).endswith(file_name):
                    return error
            if time.monotonic() >= deadline:
                raise WaitTimeout(
                    f"dag-processor: no import error for {file_name!r} within {timeout:.0f} s; dag-processor "
                    f"log ({self.log_path('dag-processor')}) ends with:\n{self.log_tail('dag-processor')}"
                )
            time.sleep(_POLL_SECONDS)

    def create_pool(self, name: str, slots: int, description: str = "") -> None:
        """An Airflow pool (the benchmarks compare Airflow pools with the slot pool)."""
        self._call("POST", "/api/v2/pools", ok=(200, 201),
                   json={"name": name, "slots": slots, "description": description, "include_deferred": False})

    def unpause(self, dag_id: str) -> None:
        self._call("PATCH", f"/api/v2/dags/{_q(dag_id)}", json={"is_paused": False},
                   params={"update_mask": "is_paused"})

    def trigger(self, dag_id: str, conf: Mapping[str, Any] | None = None, run_id: str | None = None) -> str:
        """Create a manual DAG run (logical_date null, as 3.x allows); return its run id.

        SQLite answers "database is locked" when the machine is very busy, which the api-server turns
        into a 500; the run id is fixed before the first try, so trying again cannot create a second run.
        """
        run_id = run_id or (f"manual__{datetime.now(UTC).strftime('%Y-%m-%dT%H:%M:%S.%f')}"
                            f"_{uuid.uuid4().hex[:6]}")
        body: dict[str, Any] = {"logical_date": None, "conf": dict(conf or {}), "dag_run_id": run_id}
        for attempt in range(_TRIGGER_TRIES):
            try:
                self._call("POST", f"/api/v2/dags/{_q(dag_id)}/dagRuns", json=body)
                return run_id
            except ApiError as error:
                if error.status == 409 and attempt:  # an earlier try did create it
                    return run_id
                if error.status < 500 or attempt == _TRIGGER_TRIES - 1:
                    raise
            except httpx.TimeoutException:
                if attempt == _TRIGGER_TRIES - 1:
                    raise
            time.sleep(2.0 * (attempt + 1))
        return run_id

    def set_task_state(self, dag_id: str, run_id: str, task_id: str, state: str, map_index: int = -1) -> None:
        """Mark a task instance ``success`` or ``failed``, as the UI's "Mark as" does."""
        path = f"/api/v2/dags/{_q(dag_id)}/dagRuns/{_q(run_id)}/taskInstances/{_q(task_id)}"
        if map_index >= 0:
            path += f"/{map_index}"
        self._call("PATCH", path, json={"new_state": state}, params={"update_mask": "new_state"})

    def clear_task(self, dag_id: str, run_id: str, task_ids: Sequence[str]) -> None:
        """Clear task instances of a run (a new try each), as the UI's "Clear" does."""
        body = {"dry_run": False, "dag_run_id": run_id, "task_ids": list(task_ids), "only_failed": False,
                "reset_dag_runs": True}
        self._call("POST", f"/api/v2/dags/{_q(dag_id)}/clearTaskInstances", json=body)

    def health(self) -> dict[str, Any]:
        """GET /api/v2/monitor/health: metadatabase, scheduler, dag_processor, triggerer."""
        return self._call("GET", "/api/v2/monitor/health").json()

    def dag_runs(self, dag_id: str) -> list[dict[str, Any]]:
        return self._paged(f"/api/v2/dags/{_q(dag_id)}/dagRuns", "dag_runs")

    def dag_run(self, dag_id: str, run_id: str) -> dict[str, Any]:
        return self._call("GET", f"/api/v2/dags/{_q(dag_id)}/dagRuns/{_q(run_id)}").json()

    def wait_for_run(self, dag_id: str, run_id: str, timeout: float = 300.0) -> str:
        """Poll the DAG run until it is ``success`` or ``failed``; return that state."""
        deadline = time.monotonic() + timeout
        while True:
            state = self.dag_run(dag_id, run_id).get("state")
            if state in TERMINAL_RUN_STATES:
                return state
            if time.monotonic() >= deadline:
                states = [(ti["task_id"], ti["map_index"], ti["state"]) for ti in self.task_instances(dag_id, run_id)]
                raise WaitTimeout(
                    f"scheduler: run {run_id!r} of {dag_id!r} still {state!r} after {timeout:.0f} s; task "
                    f"instances: {states}; scheduler log ({self.log_path('scheduler')}) ends with:\n"
                    f"{self.log_tail('scheduler')}"
                )
            time.sleep(_POLL_SECONDS)

    def task_instances(self, dag_id: str, run_id: str) -> list[dict[str, Any]]:
        """Every task instance of the run, mapped ones included (one entry per map_index)."""
        path = f"/api/v2/dags/{_q(dag_id)}/dagRuns/{_q(run_id)}/taskInstances"
        return self._paged(path, "task_instances", order_by="id")

    def task_log(self, dag_id: str, run_id: str, task_id: str, try_number: int, map_index: int = -1) -> str:
        """The task log of one try as text, one line per log event."""
        path = f"/api/v2/dags/{_q(dag_id)}/dagRuns/{_q(run_id)}/taskInstances/{_q(task_id)}/logs/{try_number}"
        params = {"map_index": map_index, "full_content": "true"}
        response = self._call("GET", path, params=params, headers={"Accept": "application/json"})
        return "\n".join(_log_line(event) for event in response.json().get("content", []))

    def _paged(self, path: str, key: str, **params: Any) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        while True:
            page = self._call("GET", path, params={**params, "limit": _PAGE, "offset": len(items)}).json()
            items.extend(page.get(key, []))
            if not page.get(key) or len(items) >= page.get("total_entries", 0):
                return items

    def _call(self, method: str, path: str, *, ok: Iterable[int] = (200,), **kwargs: Any) -> httpx.Response:
        response = self._authorized(method, path, **kwargs)
        if response.status_code == 401:
            self._token = None
            response = self._authorized(method, path, **kwargs)
        self._check(response, tuple(ok))
        return response

    def _authorized(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        headers = {**kwargs.pop("headers", {}), "Authorization": f"Bearer {self.token()}"}
        return self._client().request(method, path, headers=headers, **kwargs)

    def _check(self, response: httpx.Response, ok: tuple[int, ...]) -> None:
        if response.status_code not in ok:
            raise ApiError(response.request.method, str(response.request.url), response.status_code,
                           response.text, self.log_path("api-server"))

    def _client(self) -> httpx.Client:
        # trust_env=False: an HTTP(S)_PROXY of the environment must not see loopback traffic.
        if self._http is None:
            # 120 s: on SQLite, a write on the api-server's event loop (the audit log of a trigger) and
            # one of the execution API can lock each other until the 30 s busy timeout, and the one
            # worker answers nothing meanwhile; a 30 s client timeout turned that into a failed call.
            self._http = httpx.Client(base_url=self.api_url, timeout=API_TIMEOUT_S, trust_env=False)
        return self._http


# ---- helpers ----------------------------------------------------------------------------------


def _healthy_since(entry: Mapping[str, Any], since: datetime) -> bool:
    """Healthy, and by a heartbeat of this start: the health endpoint reports the most recent job,
    which on a restarted home may be the previous, stopped process's for up to 30 s."""
    heartbeat = next((value for key, value in entry.items() if key.startswith("latest_") and value), None)
    if entry.get("status") != "healthy" or heartbeat is None:
        return False
    beat = datetime.fromisoformat(heartbeat)
    return (beat if beat.tzinfo else beat.replace(tzinfo=UTC)) >= since


def loopback_hostname() -> str:
    """``[core] hostname_callable`` of the embedded stack: every component runs on this machine."""
    return LOOPBACK


def _check_components(components: Sequence[str]) -> None:
    unknown = [name for name in components if name not in KNOWN_COMPONENTS]
    if unknown:
        raise EmbeddedAirflowError(f"unknown component(s) {unknown}; choose from {list(KNOWN_COMPONENTS)}")
    if "api-server" not in components:
        raise EmbeddedAirflowError("the api-server is required: it serves the execution API and the health check")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((LOOPBACK, 0))
        return probe.getsockname()[1]


def _token() -> str:
    return secrets.token_urlsafe(32)


def _jwt_secret() -> str:
    # 64 bytes: PyJWT warns about shorter HMAC keys for the SHA-512 family.
    return secrets.token_urlsafe(64)


def _fernet_key() -> str:
    from cryptography.fernet import Fernet

    return Fernet.generate_key().decode()


def _render_config(sections: Mapping[str, Mapping[str, str]]) -> str:
    # '%' must be doubled: Airflow reads airflow.cfg with interpolation.
    blocks = []
    for section, options in sections.items():
        lines = [f"[{section}]"] + [f"{key} = {value.replace('%', '%%')}" for key, value in options.items()]
        blocks.append("\n".join(lines))
    return ("# Written by regionflow.embedded.EmbeddedAirflow; rewritten on every start.\n\n"
            + "\n\n".join(blocks) + "\n")


def _read_config(path: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(path, encoding="utf-8")
    return parser


def _write_private(path: str, text: str) -> None:
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.chmod(path, 0o600)


def _read_json(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return {}


def _tail(path: str, lines: int = _LOG_TAIL_LINES) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return "".join(handle.readlines()[-lines:])
    except OSError:
        return "(no log)"


def _q(segment: str) -> str:
    return quote(segment, safe="")


def _log_line(event: Any) -> str:
    if not isinstance(event, dict):
        return str(event)
    parts = [str(event.get(key)) for key in ("timestamp", "level") if event.get(key)]
    return " ".join([*parts, str(event.get("event", ""))])


def _process_table(tag: str) -> dict[int, _ProcessInfo]:
    """Every live (non-zombie) process of this user, and whether it carries `tag`."""
    marker = f"{STACK_TAG_VARIABLE}={tag}".encode()
    table = {}
    for pid, parent, group in live_processes():
        try:
            with open(f"/proc/{pid}/environ", "rb") as handle:
                tagged = marker in handle.read().split(b"\0")
        except OSError:
            continue
        table[pid] = _ProcessInfo(pid, parent, group, tagged)
    return table


def _descendants(table: Mapping[int, _ProcessInfo], roots: set[int]) -> set[int]:
    children: dict[int, list[int]] = {}
    for info in table.values():
        children.setdefault(info.ppid, []).append(info.pid)
    found, stack = set(), list(roots)
    while stack:
        for child in children.get(stack.pop(), []):
            if child not in found:
                found.add(child)
                stack.append(child)
    return found


def _wait_until(condition: Any, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)
    return True


def _use_wal(database: str) -> None:
    """Switch a SQLite file to WAL (persistent): readers stop blocking the writer, so Airflow's own
    writes and regionflow's store, task processes and the API server's reads contend far less."""
    import sqlite3

    connection = sqlite3.connect(database, timeout=30)
    try:
        connection.execute("PRAGMA journal_mode = WAL")
    finally:
        connection.close()


def _reap(process: subprocess.Popen) -> None:
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=5)


__all__ = [
    "EmbeddedAirflow", "EmbeddedAirflowError", "ComponentFailed", "StartTimeout", "ApiError", "WaitTimeout",
    "STACK_TAG_VARIABLE",
]
