"""The Spark Connect client's modules, imported once in the scheduler so that region tasks inherit them.

A region task's process is a fork of a LocalExecutor worker, and the workers are forks of the scheduler
(multiprocessing's fork start method, the default on Linux; LocalExecutor forks all of them when it
starts). On the session backend every attempt runs a Spark Connect client in the task's own process, and
pyspark's Connect modules bring pandas, pyarrow, NumPy and gRPC with them: ~0.8 CPU-s to import on a
2-core box, paid by every task again. `RegionExecutor.start` imports them before LocalExecutor forks its
workers, so each task process finds them loaded (shared copy-on-write; LocalExecutor freezes the garbage
collector around the fork for that). The scheduler's memory grows by ~100 MB; the tasks' does not.

Importing opens no gRPC channel, so nothing of gRPC's runtime is forked. Where the start method is not fork,
or the backend is submit (its attempts run spark-submit, not a client), nothing is imported. A module that
fails to import is logged and left to the tasks, which then fail with the cause as they would have.
"""
from __future__ import annotations

import importlib
import time
from collections.abc import Callable, Sequence
from typing import Any

# What a session attempt imports in its task process, measured with `sys.modules` around one run of the
# orders example: these pull in the rest (pandas, pyarrow, grpc, the Connect protos), ~680 modules.
SESSION_CLIENT_MODULES = (
    "pyspark.sql.connect.session",
    "pyspark.sql.connect.dataframe",
    "pyspark.sql.connect.functions",
    "pyspark.sql.connect.readwriter",
    "pyspark.sql.connect.group",
    "pyspark.sql.connect.client.core",
    "pyspark.sql.connect.client.artifact",
    "pyspark.sql.connect.client.reattach",
    "pyspark.sql.functions",
    "pyspark.sql.types",
)


def preload_task_modules(backend: str, forks_workers: bool, log: Any,
                         import_module: Callable[[str], object] = importlib.import_module) -> Sequence[str]:
    """Import what the tasks of `backend` (``[regionflow] backend``) import, when the workers are forked
    (`forks_workers`); the modules imported. One that fails is logged as a warning and skipped."""
    if backend != "session" or not forks_workers:
        return ()
    loaded = []
    started = time.monotonic()
    for name in SESSION_CLIENT_MODULES:
        try:
            import_module(name)
        except Exception as error:  # noqa: BLE001 - the tasks import it themselves and fail with the cause
            log.warning("RegionExecutor: cannot preload %s for the region tasks (%s: %s); each task imports it",
                        name, type(error).__name__, error)
        else:
            loaded.append(name)
    log.info("RegionExecutor: the Spark Connect client's modules loaded for the region tasks in %.1f s",
             time.monotonic() - started)
    return tuple(loaded)
