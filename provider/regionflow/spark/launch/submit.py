"""Submitting one region (or shard of regions) as one Spark application.

This module owns everything between a slot grant and a finished spark-submit process:

- (`build_submit_kwargs`, the keyword arguments of Airflow's `SparkSubmitHook` sized to the granted
  slots, is `submit_args`'s);
- (the ``--py-files`` zips of regionflow and the job's modules are `pyfiles.build_py_files`'s);
- `RegionSubmission`: runs the hook in the calling thread, optionally pinned to cpu cores, keeps the
  tail of the driver output, measures it, and can be killed from another thread without leaving a
  JVM or a Python driver behind; the result is a `SubmissionResult`;
- how a submission's process group is ended (`regionflow.processes`: `process_group_members`,
  `terminate_process_group`), shared with `standalone`.

The arguments themselves (master, sizing, conf) are `regionflow.spark.launch.submit_args`'s.
"""
from __future__ import annotations

import collections
import contextlib
import logging
import os
import re
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...airflow_internals import capture_hook_log, hook_process
from ...core.errors import RegionflowError
from ...processes import DEFAULT_KILL_GRACE_SECONDS, terminate_process_group
from .submit_args import SubmitConfigError, connection_env, managed_conn_id

log = logging.getLogger(__name__)

DEFAULT_TAIL_LINES = 200

_LOG4J_LINE_RE = re.compile(r"^\d\d/\d\d/\d\d \d\d:\d\d:\d\d (?:TRACE|DEBUG|INFO|WARN|ERROR|FATAL) ")
_TRACEBACK_START = "Traceback (most recent call last):"


class SubmissionFailed(RegionflowError):
    """A Spark application ended unsuccessfully (raised only with ``raise_on_failure``)."""

    def __init__(self, message: str, result: SubmissionResult) -> None:
        super().__init__(message)
        self.result = result


# ---- processes ---------------------------------------------------------------------------------


@contextlib.contextmanager
def pinned_cpus(cores: Sequence[int]) -> Iterator[None]:
    """Pin the calling thread (and so every process it starts) to `cores`; restore on exit.

    Linux sets affinity per thread and a child inherits its creating thread's mask, so pinning the
    submitting thread pins spark-submit, its JVM and the Python processes the JVM starts, and
    leaves the other threads of this process alone.
    """
    if not cores:
        yield
        return
    if not hasattr(os, "sched_setaffinity"):
        raise SubmitConfigError(f"cpu_affinity={tuple(cores)} needs Linux (os.sched_setaffinity); drop affinity")
    before = os.sched_getaffinity(0)
    wanted = set(cores)
    if not wanted <= before:
        raise SubmitConfigError(
            f"cpu_affinity={tuple(sorted(wanted))} names cores this process may not use "
            f"(allowed: {sorted(before)}); fix the host's affinity"
        )
    os.sched_setaffinity(0, wanted)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


# ---- the submission ----------------------------------------------------------------------------


SESSION_COMMAND_PREFIX = "session "  # `SessionSubmission`'s command: ``session <url> tag <tag>``


@dataclass(frozen=True)
class SubmissionResult:
    """How one spark-submit ended. `returncode` is None when no process ran to completion."""

    returncode: int | None
    seconds: float
    log_tail: tuple[str, ...]
    killed: bool
    command: str = ""
    error: str | None = None
    first_line_seconds: float | None = None
    host_lost: bool = False  # the run ended because its host went away (`error` says how)

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.killed and self.error is None

    @property
    def exit_text(self) -> str:
        """How spark-submit's process ended: its exit code, or the signal that killed it (Popen gives
        -N for signal N: a kill -9 of the driver's JVM is "killed by signal 9 (SIGKILL)")."""
        code = self.returncode
        if code is not None and code < 0:
            try:
                name = f"signal {-code} ({signal.Signals(-code).name})"
            except ValueError:
                name = f"signal {-code}"
            return f"spark-submit (the Spark driver) was killed by {name}"
        if self.command.startswith(SESSION_COMMAND_PREFIX):  # a client session on a server: no process of its own
            return f"the attempt's Spark Connect session ended with code {code}"
        return f"spark-submit exited with {code}"

    @property
    def traceback(self) -> str | None:
        """The driver's Python traceback found in the log tail, if any."""
        return extract_python_traceback(self.log_tail)

    def describe(self) -> str:
        if self.ok:
            return f"finished in {self.seconds:.1f} s"
        if self.killed:
            return f"killed after {self.seconds:.1f} s" + (f" ({self.error})" if self.error else "")
        reason = self.error or self.exit_text
        detail = self.traceback or "\n".join(self.log_tail[-20:])
        return f"{reason} after {self.seconds:.1f} s" + (f"\n{detail}" if detail else "")


def extract_python_traceback(lines: Sequence[str]) -> str | None:
    """The first Python traceback block in `lines`, up to the next Spark log line."""
    start = next((i for i, line in enumerate(lines) if line.strip() == _TRACEBACK_START), None)
    if start is None:
        return None
    block = [lines[start]]
    for line in lines[start + 1:]:
        if _LOG4J_LINE_RE.match(line):
            break
        block.append(line)
    return "\n".join(block)


class _CapturingLog:
    """Stands in for the hook's logger: keeps spark-submit's output lines, forwards everything.

    The hook logs each output line as a bare message and its own remarks with %-arguments; only
    the former are driver output. The hook's logger is shared by every hook instance, so this
    per-instance stand-in is what keeps concurrent submissions' tails apart.
    """

    def __init__(self, forward: Any, tail_lines: int, on_line: Callable[[str], None] | None,
                 started: float, forward_output: bool = True) -> None:
        self._forward = forward
        self._forward_output = forward_output
        self._on_line = on_line
        self._started = started
        self.tail: collections.deque[str] = collections.deque(maxlen=tail_lines)
        self.command = ""
        self.first_line_seconds: float | None = None

    def info(self, message: Any, *args: Any, **kwargs: Any) -> None:
        if args:
            self._note_remark(str(message), args)
        else:
            self._note_line(str(message))
        if self._forward_output:
            self._forward.info(message, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._forward, name)

    def _note_remark(self, message: str, args: tuple[Any, ...]) -> None:
        if message.startswith("Spark-Submit cmd"):
            self.command = str(args[0])

    def _note_line(self, line: str) -> None:
        if self.first_line_seconds is None:
            self.first_line_seconds = time.monotonic() - self._started
        self.tail.append(line)
        if self._on_line is not None:
            try:
                self._on_line(line)
            except Exception:  # noqa: BLE001 - a faulty observer must not break the submission
                log.exception("on_line callback failed for line %r", line)


_connection_lock = threading.Lock()


class RegionSubmission:
    """One spark-submit of `application`, run in the calling thread by `run()`.

    `hook_kwargs` are `build_submit_kwargs`'s result. `kill()` may be called from any thread, also
    before `run()`; it ends the whole process group of spark-submit (its JVM, the Python driver and
    Python workers), then lets the hook clean up cluster-side drivers.
    """

    def __init__(
        self,
        application: str,
        hook_kwargs: Mapping[str, Any],
        *,
        cpu_affinity: Sequence[int] = (),
        tail_lines: int = DEFAULT_TAIL_LINES,
        raise_on_failure: bool = False,
        kill_grace_seconds: float = DEFAULT_KILL_GRACE_SECONDS,
        on_line: Callable[[str], None] | None = None,
        forward_output: bool = True,
    ) -> None:
        self.application = application
        self.forward_output = forward_output  # False: driver lines go to on_line and the tail only
        self.hook_kwargs = dict(hook_kwargs)
        self.cpu_affinity = tuple(cpu_affinity)
        self.raise_on_failure = raise_on_failure
        self.kill_grace_seconds = kill_grace_seconds
        self._tail_lines = tail_lines
        self._on_line = on_line
        self._lock = threading.Lock()
        self._started = False
        self._kill_requested = threading.Event()
        self._done = threading.Event()
        self._hook: Any = None
        self._signalled = False
        self.result: SubmissionResult | None = None

    @property
    def pid(self) -> int | None:
        """Process id of spark-submit (its JVM) once started; also its process group id."""
        process = self._process()
        return process.pid if process is not None else None

    @property
    def master(self) -> str | None:
        return self.hook_kwargs.get("conf", {}).get("spark.master")

    @property
    def server_url(self) -> str | None:
        """None: a spark-submit attempt runs on no Spark Connect server."""
        return None

    def master_lost(self) -> None:
        """Nothing beyond the run: its application ends with its spark-submit."""

    def run(self) -> SubmissionResult:
        """Submit, wait for the application to end, return (or raise, see `raise_on_failure`)."""
        with self._lock:
            if self._started:
                raise SubmitConfigError(f"submission of {self.application} was already run; build a new one")
            self._started = True
        try:
            if self._kill_requested.is_set():
                result = SubmissionResult(None, 0.0, (), killed=True)
            else:
                result = self._submit()
        finally:
            self._done.set()
        self.result = result
        if self.raise_on_failure and not result.ok:
            raise SubmissionFailed(f"Spark application {self.hook_kwargs.get('name', self.application)} "
                                   f"{result.describe()}", result)
        return result

    def kill(self, *, wait: bool = True, timeout: float = 60.0) -> None:
        """End the application; with `wait`, return once every process of it is gone."""
        self._kill_requested.set()
        with self._lock:
            if not self._started:
                return
        deadline = time.monotonic() + timeout
        while self.pid is None and not self._done.is_set() and time.monotonic() < deadline:
            time.sleep(0.05)
        if self.pid is not None:
            if terminate_process_group(self.pid, self.kill_grace_seconds):
                self._signalled = True
            self._hook_on_kill()
        if wait:
            self._done.wait(max(0.0, deadline - time.monotonic()))

    # -- internals --

    def _submit(self) -> SubmissionResult:
        hook = self.make_hook()
        started = time.monotonic()
        capture = _CapturingLog(hook.log, self._tail_lines, self._on_line, started, self.forward_output)
        capture_hook_log(hook, capture)  # a stand-in logger sees every line spark-submit prints
        self._hook = hook
        error = None
        try:
            with pinned_cpus(self.cpu_affinity):
                # Its own session: the JVM, the Python driver and workers share one process group to end.
                hook.submit(self.application, start_new_session=True)
        except Exception as exc:  # noqa: BLE001 - turned into the result; the exit code says more
            error = None if self._process_exited() else f"{type(exc).__name__}: {exc}"
        finally:
            self._reap_leftovers()
        return SubmissionResult(
            returncode=self._returncode(),
            seconds=time.monotonic() - started,
            log_tail=tuple(capture.tail),
            killed=self._kill_requested.is_set() and (self._signalled or self._returncode() != 0),
            command=capture.command,
            error=error,
            first_line_seconds=capture.first_line_seconds,
        )

    def make_hook(self) -> Any:
        """Build the `SparkSubmitHook`, defining regionflow's connection for the master first."""
        from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

        master = self.master
        conn_id = self.hook_kwargs.get("conn_id")
        # The hook resolves its connection while it is built; the lock keeps env var and lookup paired.
        with _connection_lock:
            if master and conn_id == managed_conn_id(master):
                name, value = connection_env(master)
                os.environ[name] = value
            hook = SparkSubmitHook(**self.hook_kwargs)
        resolved = getattr(hook, "_connection", {}).get("master")
        if master and resolved != master:
            raise SubmitConfigError(
                f"connection {conn_id!r} points at master {resolved!r} but this submission is sized for "
                f"{master!r}; fix the connection's host or leave conn_id unset so regionflow defines it"
            )
        return hook

    def _process(self) -> Any:
        hook = self._hook
        return hook_process(hook) if hook is not None else None

    def _process_exited(self) -> bool:
        process = self._process()
        return process is not None and process.poll() is not None

    def _returncode(self) -> int | None:
        process = self._process()
        return process.returncode if process is not None else None

    def _reap_leftovers(self) -> None:
        pgid = self.pid
        if pgid is not None and terminate_process_group(pgid, self.kill_grace_seconds) \
                and not self._kill_requested.is_set():
            log.warning("killed processes left behind by %s (process group %s)", self.application, pgid)

    def _hook_on_kill(self) -> None:
        try:
            self._hook.on_kill()
        except Exception:  # noqa: BLE001 - the processes are gone already; cleanup is best effort
            log.exception("SparkSubmitHook.on_kill failed for %s", self.application)


__all__ = [
    "SubmissionFailed", "SubmissionResult", "RegionSubmission", "pinned_cpus", "extract_python_traceback",
]
