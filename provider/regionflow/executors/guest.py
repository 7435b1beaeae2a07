"""What the RegionExecutor needs from its host, Airflow's scheduler process, in one place.

- `append_task_log`: a line in the task try's log, where the UI shows it (the local file, then the
  remote log IO when remote logging is on), for a task the executor fails, withdraws or tells about
  while no worker runs it.
- `task_instance_states` / `task_instance_finished`: reads of Airflow's metadata database through
  its ORM (the executor runs inside the scheduler, which owns that database; task processes cannot);
  `renew_queued_time`, its one write: the queued time of tries that wait for slots (`queued_stamps`).
- `RegionflowConfigError`: the one error the executor does raise into the scheduler, from its
  ``__init__``, when ``[regionflow]`` is wrong: it cannot start, and says why.
"""
from __future__ import annotations

import json
import logging
import os
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from airflow.exceptions import AirflowConfigException
from airflow.utils.state import TaskInstanceState

from ..core.errors import RegionflowError

FINISHED_STATES = frozenset({TaskInstanceState.SUCCESS, TaskInstanceState.FAILED, TaskInstanceState.UPSTREAM_FAILED,
                             TaskInstanceState.SKIPPED, TaskInstanceState.REMOVED})
# A granted try whose task instance (same try) is in one of these is done for good: this try never runs again
# (a retry or a clear is another try), so its slots can go back before its worker reports the end.
DONE_STATES = FINISHED_STATES | {TaskInstanceState.UP_FOR_RETRY}
# A waiting task instance in one of these states (same try) still wants its slots: SCHEDULED is the
# moment between Airflow re-queueing a try and the executor receiving it again.
STILL_QUEUED = frozenset({TaskInstanceState.QUEUED, TaskInstanceState.SCHEDULED})
# A granted try whose task instance (same try) is in none of these has ended, reported or not.
STILL_LIVE = frozenset({TaskInstanceState.QUEUED, TaskInstanceState.RUNNING, TaskInstanceState.RESTARTING})

class RegionflowConfigError(AirflowConfigException, RegionflowError):
    """``[regionflow]`` has a bad option, so the RegionExecutor cannot start. An AirflowConfigException,
    as Airflow's own config errors are; raised (not chained) from the executor's ``__init__``, so the
    scheduler exits and the last line of its output is this one line: the option, its value, where it
    was set (airflow.cfg or an ``AIRFLOW__REGIONFLOW__*`` variable) and the rule."""


def append_task_log(workload: Any, message: str, level: str = "error", last: bool = True) -> None:
    """Write `message` to this try's log through Airflow's task-log machinery, so the UI shows it; never raises.

    As Airflow's task supervisor does: a JSON line in the try's log file under ``[logging] base_log_folder``
    (where the UI reads a local log), then, with ``[logging] remote_logging`` on, the file handed to the
    configured remote log IO (S3, GCS, Elasticsearch, ...: Airflow's `RemoteLogIO.upload`), which appends it
    to the try's remote log. A try the executor fails or withdraws never has a task process to do that.
    `last` False: the try may still run; its supervisor appends to the same file and uploads it at the end,
    so the line is not uploaded now (it would reach the remote log twice)."""
    try:
        from airflow.configuration import conf

        if not workload.log_path:
            return
        path = os.path.join(conf.get("logging", "base_log_folder"), str(workload.log_path))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps({"timestamp": stamp, "level": level, "event": message}) + "\n")
        remote = _remote_task_log() if last and conf.getboolean("logging", "remote_logging", fallback=False) else None
        if remote is not None:
            remote.upload(str(workload.log_path), workload.ti)
    except Exception:  # noqa: BLE001 - a log line must not fail anything
        logging.getLogger(__name__).exception("regionflow: cannot write to the task log")


def _remote_task_log() -> Any:
    """Airflow's configured remote task log IO (None without one)."""
    from airflow.logging_config import get_remote_task_log

    return get_remote_task_log()


def task_instance_states(ti_ids: Iterable[str]) -> dict[str, tuple[Any, int]]:
    """(state, try_number) of each task instance id found in Airflow's metadata database."""
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import select

    wanted = [uuid.UUID(str(ti_id)) for ti_id in sorted(set(map(str, ti_ids)))]  # the column is a UUID
    found: dict[str, tuple[Any, int]] = {}
    with create_session() as session:
        for start in range(0, len(wanted), 500):
            query = select(TaskInstance.id, TaskInstance.state, TaskInstance.try_number).where(
                TaskInstance.id.in_(wanted[start:start + 500]))
            for ti_id, state, try_number in session.execute(query):
                found[str(ti_id)] = (state, int(try_number))
    return found


def renew_queued_time(ti_ids: Iterable[str]) -> None:
    """Set ``queued_dttm`` to now for those of the task instances that are still QUEUED (see `queued_stamps`:
    Airflow's stuck-in-queued check reads it)."""
    from datetime import UTC, datetime

    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import update

    wanted = [uuid.UUID(str(ti_id)) for ti_id in sorted(set(map(str, ti_ids)))]
    with create_session() as session:
        for start in range(0, len(wanted), 500):
            session.execute(update(TaskInstance)
                            .where(TaskInstance.id.in_(wanted[start:start + 500]),
                                   TaskInstance.state == TaskInstanceState.QUEUED)
                            .values(queued_dttm=datetime.now(UTC))
                            .execution_options(synchronize_session=False))


def task_instance_finished(ti_id: str, states: Callable[[Iterable[str]], Mapping[str, tuple[Any, int]]] =
                           task_instance_states) -> bool:
    """True when the task instance is gone or in a finished state (`states`: how its state is read)."""
    found = states([ti_id]).get(str(ti_id))
    return found is None or found[0] in FINISHED_STATES


__all__ = ["DONE_STATES", "FINISHED_STATES", "STILL_LIVE", "STILL_QUEUED", "append_task_log", "renew_queued_time",
           "task_instance_finished", "task_instance_states"]
