"""One embedded Airflow stack for the test modules of `suite_order.SHARED_STACK_MODULES`, instead of one each.

A stack's start costs ~45 CPU-seconds (api-server ~12, scheduler, dag-processor and triggerer ~3-5 each, the
host's Spark Connect server ~10): on two cores that is ~20 s of the suite's wall time per module that does not
need a stack of its own. The modules here need the same cluster (one host, 4 slots, the session backend) and
differ only in what the scheduler reads (``[regionflow] partition_retention``, ``[core] parallelism``, the queued
timeout): each module says its DAG files and its scheduler's environment (`ModuleStack`), and the scheduler alone
is restarted when that environment changes between modules (~5 CPU-seconds). The xdist scheduler keeps these
modules on one worker (`suite_order.GroupedLoadFileScheduling`); the stack stops once the last of them that this
session runs has ended, so it does not idle through the worker's other modules.
"""
from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from suite_order import SHARED_STACK_MODULES, module_of

from regionflow.testing import EmbeddedAirflow
from regionflow.testing.conformance import STACK_CONFIG

# The stack's [regionflow] options, the same for every module.
OPTIONS = {"hosts": "localhost:slots=4", "max_shards": "1", "backend": "session", "elastic_wait": "2"}


def embedded_stack(home: str) -> EmbeddedAirflow:
    """The shared stack in `home`, not started. No DAG of these modules runs on its schedule (`STACK_CONFIG`:
    orders_daily's runs are its backfill's and one triggered run; Airflow's examples are triggered)."""
    dags = os.path.join(home, "dags")
    os.makedirs(dags, exist_ok=True)
    options = {**OPTIONS, "data_dir": os.path.join(home, "data")}
    return EmbeddedAirflow(home, dags, regionflow_options=options, extra_config=STACK_CONFIG)


@dataclass(frozen=True)
class ModuleStack:
    """What one module needs of the shared stack: `dag_files` copied into its DAG folder (``{name: source}``)
    and `scheduler_env` (``AIRFLOW__...`` variables over ``airflow.cfg``, for the scheduler and the task
    processes it starts)."""

    dag_files: Mapping[str, str]
    scheduler_env: Mapping[str, str] = field(default_factory=dict)


class SharedStack:
    """The shared stack of one pytest session (one xdist worker): started by the first module that asks for it,
    stopped when the last module that will use it ends (`remaining`: the node ids of those modules). `make_stack`
    builds the stack in `home` (`embedded_stack`)."""

    def __init__(self, home: str, remaining: Sequence[str],
                 make_stack: Callable[[str], EmbeddedAirflow] = embedded_stack) -> None:
        self.home = home
        self.remaining = set(remaining)
        self.make_stack = make_stack
        self.stack: EmbeddedAirflow | None = None
        self._scheduler: tuple[int, dict[str, str]] | None = None  # (pid, env) of the scheduler this class started

    @contextmanager
    def module(self, module: str, needs: ModuleStack) -> Iterator[EmbeddedAirflow]:
        """The stack for the test module `module` (its node id, ``tests/...py``), configured as `needs` says."""
        if module not in SHARED_STACK_MODULES:
            raise AssertionError(f"{module} uses the shared stack: add it to suite_order.SHARED_STACK_MODULES so "
                                 f"that xdist runs it on the same worker as the others")
        stack = self._started()
        for name, source in needs.dag_files.items():
            shutil.copy(source, os.path.join(stack.dags_folder, name))
        self._configure_scheduler(stack, dict(needs.scheduler_env))
        try:
            yield stack
        finally:
            self.remaining.discard(module)
            if not self.remaining:
                self.stop()

    def stop(self) -> None:
        """Stop the stack (idempotent); its Spark Connect server goes with it."""
        stack, self.stack = self.stack, None
        if stack is not None:
            stack.stop()
            assert [status.state for status in stack.session_servers.status()] == ["down"]

    def _started(self) -> EmbeddedAirflow:
        if self.stack is None:
            stack = self.make_stack(self.home)
            stack.start()  # stops whatever it started when it fails: the next module tries again
            [pid] = stack.pids_of("scheduler")
            self.stack, self._scheduler = stack, (pid, {})
        return self.stack

    def _configure_scheduler(self, stack: EmbeddedAirflow, env: dict[str, str]) -> None:
        """Restart the scheduler with `env` unless it runs with it: a module that restarted the scheduler itself
        (the conformance tests switch executors) left one whose environment is not known here."""
        [pid] = stack.pids_of("scheduler")
        if self._scheduler == (pid, env):
            return
        stack.restart("scheduler", env=env)
        [pid] = stack.pids_of("scheduler")
        self._scheduler = (pid, env)


def modules_to_run(items: Sequence) -> list[str]:
    """The shared-stack modules among the session's collected `items` (pytest items)."""
    return sorted({module_of(item.nodeid) for item in items} & set(SHARED_STACK_MODULES))
