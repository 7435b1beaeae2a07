"""Submitting one region (or shard of regions) as one Spark application.

This module owns everything between a slot grant and a finished spark-submit process:

- `build_submit_kwargs`: the keyword arguments of Airflow's `SparkSubmitHook`, sized to the granted
  slots (pure; no I/O, no Airflow, no PySpark import);
- (the ``--py-files`` zips of regionflow and the job's modules are `pyfiles.build_py_files`'s);
- `RegionSubmission`: runs the hook in the calling thread, optionally pinned to cpu cores, keeps the
  tail of the driver output, measures it, and can be killed from another thread without leaving a
  JVM or a Python driver behind; the result is a `SubmissionResult`;
- how Spark child processes are launched from here (`spark_home`, `spark_child_env`) and how their
  process groups are ended (`regionflow.processes`: `process_group_members`, `terminate_process_group`), shared with
  `standalone`.

How the master reaches the hook. `SparkSubmitHook` reads its master from an Airflow connection. With
``conn_id=None`` (the default) regionflow uses its own connection id per effective master,
``regionflow_<master slug>`` (e.g. ``regionflow_local_2``, ``regionflow_spark_127_0_0_1_7077``), and
defines it as the environment variable ``AIRFLOW_CONN_<ID>`` = ``{"conn_type": "spark", "host":
"<master>"}`` in this process right before the hook is built. Airflow 3.3 looks environment
variables up first in every context (the `regionflow run` CLI without a metadata database, the
dag processor, and task processes whose later backend is the execution API), so no database row and
no per-submission state are needed; the id is a pure function of the master, hence safe to share
between threads. A caller who needs connection extras (kerberos, a spark-binary, ...) passes
``conn_id`` (the hook's own default is ``spark_default``); that connection is used as is, and its
master must equal the host's sized master (checked before submitting).

Sizing: `slot_profile` is the profile each granted slot is sized to (`sizing.slot_size` of the unit's
requests); `regionflow.spark.sizing` is the one mapping from it to Spark conf (one executor per slot on
``spark://`` masters, one JVM of ``local[<slots>]`` on ``local`` masters). Besides,
``spark.ui.enabled=false`` always; for loopback masters ``spark.driver.bindAddress`` and
``spark.driver.host`` are 127.0.0.1 and ``SPARK_LOCAL_IP=127.0.0.1`` is set for the child.

The job's own Spark conf is passed through; a key regionflow sets (listed in the error) may only be
repeated with the same value, anything else is a `SubmitConfigError` naming the key.
"""
from __future__ import annotations

import collections
import contextlib
import importlib.util
import json
import logging
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from ..airflow_internals import capture_hook_log, hook_process
from ..core.errors import RegionflowError, SpecError
from ..core.resources import ResourceProfile
from ..processes import DEFAULT_KILL_GRACE_SECONDS, terminate_process_group
from .cluster_managers import exclusion_conf
from .masters import Master, MasterKind
from .sizing import SizedConf, sized_conf

log = logging.getLogger(__name__)

LOOPBACK = "127.0.0.1"
MANAGED_CONN_PREFIX = "regionflow_"
DEFAULT_TAIL_LINES = 200


_LOG4J_LINE_RE = re.compile(r"^\d\d/\d\d/\d\d \d\d:\d\d:\d\d (?:TRACE|DEBUG|INFO|WARN|ERROR|FATAL) ")
_TRACEBACK_START = "Traceback (most recent call last):"

# Hook keyword arguments that stand for a Spark conf key; the key is checked for conflicts, the
# keyword is what reaches spark-submit.
_HOOK_ARG_OF_CONF_KEY = {
    "spark.cores.max": "total_executor_cores",
    "spark.executor.cores": "executor_cores",
    "spark.executor.memory": "executor_memory",
    "spark.driver.memory": "driver_memory",
    "spark.app.name": "name",
}
_INT_HOOK_ARGS = ("total_executor_cores", "executor_cores")

# Environment variables the child needs and the user may not redefine differently.
_OWNED_ENV = ("SPARK_HOME", "SPARK_LOCAL_IP")


class SubmitConfigError(RegionflowError, ValueError):
    """Submission arguments are invalid: bad slots, master, conf conflict, missing module."""


class SparkNotInstalled(RegionflowError):
    """PySpark (which ships spark-submit) cannot be found in this Python environment."""


class SubmissionFailed(RegionflowError):
    """A Spark application ended unsuccessfully (raised only with ``raise_on_failure``)."""

    def __init__(self, message: str, result: SubmissionResult) -> None:
        super().__init__(message)
        self.result = result


# ---- Spark installation and child environment ---------------------------------------------------


@lru_cache(maxsize=1)
def spark_home() -> str:
    """The directory of the installed pyspark package, which is a complete SPARK_HOME."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.origin:
        raise SparkNotInstalled(
            f"pyspark is not installed in {sys.executable}'s environment; install "
            "airflow-provider-regionflow (it pins pyspark) or pip install pyspark"
        )
    return os.path.dirname(os.path.abspath(spec.origin))


def spark_submit_binary() -> str:
    """Absolute path of the spark-submit script bundled with pyspark."""
    return os.path.join(spark_home(), "bin", "spark-submit")


def spark_child_env(*, loopback: bool = True) -> dict[str, str]:
    """Environment a Spark child process needs, independent of PATH and of the `python3` on it."""
    env = {
        "SPARK_HOME": spark_home(),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    }
    if loopback:
        env["SPARK_LOCAL_IP"] = LOOPBACK
    return env


# ---- submit arguments --------------------------------------------------------------------------


def build_submit_kwargs(
    *,
    application: str,
    application_args: list[str],
    master: str,
    slots: int,
    slot_profile: ResourceProfile,
    job_conf: Mapping[str, str] | None,
    py_files: Sequence[str],
    name: str,
    conn_id: str | None = None,
    env_vars: Mapping[str, str] | None = None,
    excluded_nodes: Sequence[str] = (),
    pod_template_file: str | None = None,
) -> dict[str, Any]:
    """Keyword arguments of `SparkSubmitHook` running `application` on `slots` slots of `master`.

    See the module docstring for the sizing rules and for how the master reaches the hook.
    `excluded_nodes` are nodes of a YARN or Kubernetes master the executors must avoid (the job's
    blocklist, `cluster_managers`); Kubernetes takes them through `pod_template_file`.
    """
    _check_application(application)
    _check_slots(slots)
    target = sized_master(master, slots)
    sized = _owned_conf(target, slots, slot_profile, _app_name(name))
    try:
        sized.owned.update(exclusion_conf(target, excluded_nodes, pod_template_file))
    except ValueError as error:
        raise SubmitConfigError(f"master {master!r}: {error}; write it with cluster_managers.write_pod_template") \
            from None
    conf = _merged_conf(sized, job_conf)
    kwargs: dict[str, Any] = {
        "conn_id": conn_id or managed_conn_id(target.url),
        "conf": {key: value for key, value in conf.items() if key not in _HOOK_ARG_OF_CONF_KEY},
        "application_args": [str(arg) for arg in application_args],
        "py_files": _joined_py_files(py_files),
        "env_vars": _merged_env(target, env_vars),
        "spark_binary": spark_submit_binary(),
    }
    kwargs.update(_hook_args(conf))
    return kwargs


def managed_conn_id(master: str) -> str:
    """regionflow's Airflow connection id for `master`: ``regionflow_`` + a slug of the master."""
    return MANAGED_CONN_PREFIX + re.sub(r"[^a-z0-9]+", "_", master.lower()).strip("_")


def connection_env(master: str) -> tuple[str, str]:
    """Name and value of the ``AIRFLOW_CONN_*`` variable that defines `managed_conn_id(master)`."""
    return (f"AIRFLOW_CONN_{managed_conn_id(master).upper()}",
            json.dumps({"conn_type": "spark", "host": master}))


def _check_application(application: str) -> None:
    if not isinstance(application, str) or not application.endswith(".py"):
        raise SubmitConfigError(
            f"application {application!r} is not a Python file; regionflow submits PySpark programs "
            "(a path ending in .py)"
        )


def _check_slots(slots: int) -> None:
    if isinstance(slots, bool) or not isinstance(slots, int) or slots < 1:
        raise SubmitConfigError(f"slots={slots!r} is not valid; a submission needs a whole number of slots >= 1")


def sized_master(master: str, slots: int) -> Master:
    """`master` parsed (`regionflow.spark.masters`) for a submission of `slots` slots (``local[slots]`` for a
    local master); a `SubmitConfigError` names an unsupported one, or a missing provider it needs."""
    try:
        parsed = Master.parse(master).sized(slots)
    except SpecError as error:
        raise SubmitConfigError(str(error)) from None
    if parsed.kind is MasterKind.KUBERNETES and not kubernetes_provider_installed():
        raise SubmitConfigError(
            f"master {master!r}: Airflow's Spark provider submits to Kubernetes only with "
            "apache-airflow-providers-cncf-kubernetes installed; pip install 'airflow-provider-regionflow[kubernetes]'")
    return parsed


def kubernetes_provider_installed() -> bool:
    """Whether Airflow's cncf-kubernetes provider (which the Spark hook needs for k8s:// masters) is installed."""
    try:
        return importlib.util.find_spec("airflow.providers.cncf.kubernetes") is not None
    except ImportError:
        return False


def _app_name(name: str) -> str:
    if not isinstance(name, str) or not name.strip():
        raise SubmitConfigError(f"name={name!r} is empty; give the submission the region's name")
    name = name.strip()
    return name if name.startswith("regionflow") else f"regionflow {name}"


def _owned_conf(target: Master, slots: int, profile: ResourceProfile, app_name: str) -> SizedConf:
    conf = {"spark.master": target.url, "spark.app.name": app_name, "spark.ui.enabled": "false"}
    if target.loopback:
        conf["spark.driver.bindAddress"] = LOOPBACK
        conf["spark.driver.host"] = LOOPBACK
    sized = sized_conf(target, slots, profile)
    return SizedConf({**conf, **sized.owned}, sized.proposed)


def _merged_conf(sized: SizedConf, job_conf: Mapping[str, Any] | None) -> dict[str, str]:
    """The grant's conf with the job's: the job may override proposed keys, not owned ones."""
    owned = sized.owned
    merged = {**sized.proposed, **owned}
    for key, value in (job_conf or {}).items():
        text = _conf_text(key, value)
        if key in owned and not _same_conf_value(owned[key], text):
            raise SubmitConfigError(
                f"job conf sets {key}={text} but regionflow sets {key}={owned[key]} from the slot grant; "
                f"drop {key} from the job conf (regionflow owns: {', '.join(sorted(owned))})"
            )
        merged[key] = text
    return merged


def _conf_text(key: Any, value: Any) -> str:
    if not isinstance(key, str) or not key.strip():
        raise SubmitConfigError(f"job conf key {key!r} is not a Spark conf name such as 'spark.sql.shuffle.partitions'")
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        raise SubmitConfigError(f"job conf {key} has no value; give it one or drop it")
    return str(value)


def _same_conf_value(owned: str, given: str) -> bool:
    return owned.strip().lower() == given.strip().lower()


def _hook_args(conf: Mapping[str, str]) -> dict[str, Any]:
    args: dict[str, Any] = {}
    for key, arg in _HOOK_ARG_OF_CONF_KEY.items():
        if key not in conf:
            continue
        if arg in _INT_HOOK_ARGS and not conf[key].isdigit():
            raise SubmitConfigError(f"job conf {key}={conf[key]} is not a whole number of cores; fix or drop it")
        args[arg] = int(conf[key]) if arg in _INT_HOOK_ARGS else conf[key]
    return args


def _joined_py_files(py_files: Sequence[str]) -> str | None:
    if isinstance(py_files, str):
        raise SubmitConfigError(f"py_files={py_files!r} must be a list of paths, not one string")
    for path in py_files:
        if "," in path:
            raise SubmitConfigError(f"py file {path!r} contains a comma, which spark-submit's --py-files cannot carry; "
                                    "move it to a directory without commas")
    return ",".join(py_files) or None


def _merged_env(target: Master, env_vars: Mapping[str, str] | None) -> dict[str, str]:
    env = spark_child_env(loopback=target.loopback)
    for key, value in (env_vars or {}).items():
        if key in _OWNED_ENV and key in env and env[key] != str(value):
            raise SubmitConfigError(
                f"env var {key}={value} conflicts with regionflow's {key}={env[key]}; drop {key} from env_vars"
            )
        env[key] = str(value)
    return env


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
    def traceback(self) -> str | None:
        """The driver's Python traceback found in the log tail, if any."""
        return extract_python_traceback(self.log_tail)

    def describe(self) -> str:
        if self.ok:
            return f"finished in {self.seconds:.1f} s"
        if self.killed:
            return f"killed after {self.seconds:.1f} s"
        reason = self.error or f"spark-submit exited with {self.returncode}"
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
    "SubmitConfigError", "SparkNotInstalled", "SubmissionFailed", "SubmissionResult", "RegionSubmission",
    "build_submit_kwargs", "managed_conn_id", "connection_env", "spark_home",
    "spark_submit_binary", "spark_child_env", "pinned_cpus", "extract_python_traceback",
]
