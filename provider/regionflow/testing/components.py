"""The Airflow component processes of one embedded stack (`stack.EmbeddedAirflow`): how each is started,
killed, restarted and revived, which processes are the stack's, one-off ``airflow`` commands, and the
staged stop that leaves none behind.

Every process carries the stack's tag in its environment (`STACK_TAG_VARIABLE`), so the stop also finds
the processes that left the component process groups (task processes call ``setpgid``; BashOperator
starts a new session). The api-server stops last: terminated tasks report their end through the execution
API instead of retrying against a server that is gone.
"""
from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

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
from .airflow_config import LOOPBACK
from .errors import ComponentFailed, EmbeddedAirflowError

KNOWN_COMPONENTS = ("api-server", "scheduler", "dag-processor", "triggerer")
STACK_TAG_VARIABLE = "REGIONFLOW_EMBEDDED_STACK"
LOG_TAIL_LINES = 40

# The log server binds all interfaces (``host=""`` in ``airflow.utils.serve_logs``), so it is never
# started; see `stack`'s docstring.
_COMPONENT_ARGS: dict[str, tuple[str, ...]] = {
    "api-server": ("api-server", "--host", LOOPBACK),
    "scheduler": ("scheduler", "--skip-serve-logs"),
    "dag-processor": ("dag-processor",),
    "triggerer": ("triggerer", "--skip-serve-logs"),
}
# stop() order: the api-server last, so terminated tasks can still report through the execution API.
_STOP_STAGES: tuple[tuple[str, ...], ...] = (("scheduler", "triggerer", "dag-processor"), ("api-server",))
_IDLE_WORKER_TITLE = "LocalExecutor: <idle>"  # the end of local_executor._run_worker's title while it waits


@dataclass(frozen=True)
class RunningComponent:
    """One running Airflow component: its name, its process (a process-group leader), its log."""

    name: str
    process: subprocess.Popen
    log_path: str


class ComponentProcesses:
    """The processes of one stack: its running components (each the leader of its own process group), the
    groups of killed ones, and every process tagged with `tag`. `home`: the stack's Airflow home (the
    processes' working directory, named in errors); `log_path`: a component's (or command's) log file;
    `child_env`: the environment of every process."""

    def __init__(self, home: str, tag: str, log_path: Callable[[str], str],
                 child_env: Callable[[], dict[str, str]]) -> None:
        self.home = home
        self.tag = tag
        self._log_path = log_path
        self._child_env = child_env
        self.running: list[RunningComponent] = []
        # process groups of components killed by `kill`: their orphans (LocalExecutor's workers) stay in
        # them, and setproctitle may have overwritten the environment that held the stack's tag
        self._killed_groups: set[int] = set()

    # ---- starting --------------------------------------------------------------------------

    def spawn(self, component: str, *, port: int | None, env: dict[str, str] | None = None) -> RunningComponent:
        """Start `component` (the api-server on `port`) with `env` added to its environment."""
        log_path = self._log_path(component)
        command = [sys.executable, "-m", "airflow", *_COMPONENT_ARGS[component]]
        if component == "api-server":
            command += ["--port", str(port)]
        with open(log_path, "ab") as log_file:
            process = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT,
                env={**self._child_env(), **(env or {})}, cwd=self.home, start_new_session=True,
            )
        started = RunningComponent(component, process, log_path)
        self.running.append(started)
        return started

    def run_airflow(self, argv: Sequence[str], timeout: float) -> float:
        """Run ``airflow <argv>`` with the stack's environment; return how long it took in seconds.
        `ComponentFailed` (with the end of its log) when it fails or runs over `timeout`."""
        name = "-".join(argv[:2])  # the log's name: db-migrate, teams-create
        log_path = self._log_path(name)
        started = time.monotonic()
        with open(log_path, "ab") as log_file:
            try:
                code: int | None = subprocess.run(
                    [sys.executable, "-m", "airflow", *argv], stdin=subprocess.DEVNULL,
                    stdout=log_file, stderr=subprocess.STDOUT, env=self._child_env(), cwd=self.home,
                    timeout=max(timeout, 1.0), start_new_session=True,
                ).returncode
            except subprocess.TimeoutExpired:
                code = None
        if code != 0:
            outcome = f"exited with code {code}" if code is not None else f"ran over the {timeout:.0f} s left"
            command = " ".join(["airflow", *argv])
            raise ComponentFailed(name, log_path, f"{command} {outcome}; its log ({log_path}) ends with:\n"
                                                  f"{tail(log_path, LOG_TAIL_LINES)}")
        return round(time.monotonic() - started, 2)

    def fail_if_one_died(self) -> None:
        """`ComponentFailed`, with the end of its log, when a running component has exited."""
        for component in self.running:
            code = component.process.poll()
            if code is not None:
                raise ComponentFailed(
                    component.name, component.log_path,
                    f"the Airflow {component.name} exited with code {code}; its log ({component.log_path}) "
                    f"ends with:\n{tail(component.log_path, LOG_TAIL_LINES)}",
                )

    # ---- faults ----------------------------------------------------------------------------

    def restart(self, component: str, *, port: int | None, env: dict[str, str] | None = None) -> None:
        """Stop one running component (SIGTERM, then SIGKILL after 15 s) and start it again with `env`."""
        matching: list[RunningComponent | None] = [c for c in self.running if c.name == component]
        [old] = matching or [None]
        if old is None:
            raise EmbeddedAirflowError(f"{component} is not running in the embedded Airflow in {self.home}")
        signal_group(old.process.pid, signal.SIGTERM)
        if not wait_until(lambda: old.process.poll() is not None, 15.0):
            signal_group(old.process.pid, signal.SIGKILL)
        reap(old.process)
        self.running = [c for c in self.running if c is not old]
        self.spawn(component, port=port, env=env)

    def kill(self, component: str, index: int = 0) -> int:
        """kill -9 of one component's main process only (its children are left as orphans); its pid."""
        matching = [c for c in self.running if c.name == component]
        if index >= len(matching):
            raise EmbeddedAirflowError(f"no {component} #{index} runs in the embedded Airflow in {self.home}")
        victim = matching[index]
        signal_pids([victim.process.pid], signal.SIGKILL)
        self._killed_groups.add(victim.process.pid)  # a component leads its own group (start_new_session)
        reap(victim.process)
        self.running = [c for c in self.running if c is not victim]
        return victim.process.pid

    def check_revivable(self, components: Iterable[str]) -> None:
        """`EmbeddedAirflowError` for an unknown component, or a second api-server."""
        components = list(components)
        _check_known(components)
        if "api-server" in components and any(c.name == "api-server" for c in self.running):
            raise EmbeddedAirflowError(f"the api-server already runs in the embedded Airflow in {self.home}")

    # ---- finding ---------------------------------------------------------------------------

    def pids(self) -> list[int]:
        """Live processes of the stack: component groups, their descendants, tagged processes."""
        return sorted(self._table())

    def pids_of(self, component: str) -> list[int]:
        return [c.process.pid for c in self.running if c.name == component]

    def _table(self) -> dict[int, ProcessInfo]:
        table = tagged_processes(STACK_TAG_VARIABLE, self.tag)
        leaders = {component.process.pid for component in self.running} | self._killed_groups
        found = {info.pid for info in table.values() if info.tagged or info.pgid in leaders}
        return {pid: table[pid] for pid in found | descendants(table, leaders | found)}

    def _tagged_pids(self) -> list[int]:
        return [info.pid for info in tagged_processes(STACK_TAG_VARIABLE, self.tag).values() if info.tagged]

    # ---- stopping --------------------------------------------------------------------------

    def stop(self, grace_seconds: float) -> bool:
        """End every process of the stack, stage by stage (`_STOP_STAGES`): SIGTERM, then wait up to
        `grace_seconds`; SIGKILL whatever is left at the end. Idempotent; whether components were running."""
        if self.running or self._tagged_pids():
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
        for component in self.running:
            reap(component.process)
        were_running = bool(self.running)
        self.running = []
        self._killed_groups = set()
        return were_running

    def _remember(self, seen: dict[int, str]) -> None:
        for pid in self.pids():
            start = start_ticks(pid)
            if start is not None:
                seen.setdefault(pid, start)

    def _terminate_stage(self, stage: tuple[str, ...], later: set[str], grace_seconds: float) -> None:
        """SIGTERM `stage`: its components' groups and every other process of the stack outside the
        groups of `later` components (task processes run in groups or sessions of their own)."""
        spared = {c.process.pid for c in self.running if c.name in later}

        def stage_pids() -> list[int]:
            return [pid for pid, info in self._table().items() if info.pgid not in spared]

        for component in self.running:
            if component.name in stage:
                signal_group(component.process.pid, signal.SIGTERM)
        pids = stage_pids()
        signal_pids(pids, signal.SIGTERM)
        # LocalExecutor's idle workers outlive SIGTERM and the scheduler waits for them: every stop took both
        # stages' grace (30 s). An idle one holds no task and is killed at once; a busy one gets the grace.
        signal_pids([pid for pid in pids if command_line(pid).endswith(_IDLE_WORKER_TITLE)], signal.SIGKILL)
        wait_until(lambda: not stage_pids(), grace_seconds)


def _check_known(components: Sequence[str]) -> None:
    unknown = [name for name in components if name not in KNOWN_COMPONENTS]
    if unknown:
        raise EmbeddedAirflowError(f"unknown component(s) {unknown}; choose from {list(KNOWN_COMPONENTS)}")


def check_components(components: Sequence[str]) -> None:
    """`EmbeddedAirflowError` for an unknown component or a stack without the api-server."""
    _check_known(components)
    if "api-server" not in components:
        raise EmbeddedAirflowError("the api-server is required: it serves the execution API and the health check")


__all__ = ["KNOWN_COMPONENTS", "LOG_TAIL_LINES", "STACK_TAG_VARIABLE", "ComponentProcesses", "RunningComponent",
           "check_components"]
