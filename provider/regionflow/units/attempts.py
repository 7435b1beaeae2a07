"""An attempt of a unit on the backend ``[regionflow] backend`` names: the one place where the region task
and the executor's speculative copies build their `Attempt` (`regionflow run` passes the backend it
started itself)."""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..config import RegionflowConfig
from ..scheduling.hosts import Host
from ..spark.data.store import PartitionStore
from ..spark.data.task import UnitTask
from ..spark.launch.attempt import Attempt, AttemptRecorder, Backend
from ..spark.launch.backends import configured_backend


def new_attempt(task: UnitTask, task_path: str, host: Host, slots: int, backend: Backend,
                partitions: PartitionStore, *, recorder: AttemptRecorder | None = None,
                on_line: Callable[[str], None] | None = None, **watch: Any) -> Attempt:
    """An attempt of `task` on `host` with `slots` slots run by `backend` (watch options: ``watch_interval``,
    ``host_lost_timeout``, ``parent_pid``)."""
    return Attempt(task, task_path, host, slots, backend, partitions, recorder=recorder, on_line=on_line, **watch)


def attempt_on_config(config: RegionflowConfig, task: UnitTask, task_path: str, host: Host, slots: int,
                      partitions: PartitionStore, *, job_conf: Mapping[str, str],
                      py_files: Callable[[], Sequence[str]], recorder: AttemptRecorder | None = None,
                      on_line: Callable[[str], None] | None = None, forward_output: bool = True,
                      **watch: Any) -> Attempt:
    """`new_attempt` on the configured backend (`py_files` is only called by the submit backend)."""
    backend = configured_backend(config, job_conf, py_files, forward_output=forward_output)
    return new_attempt(task, task_path, host, slots, backend, partitions, recorder=recorder, on_line=on_line,
                       **watch)


__all__ = ["attempt_on_config", "new_attempt"]
