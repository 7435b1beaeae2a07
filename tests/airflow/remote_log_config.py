"""A ``[logging] logging_config_class`` with a remote task log other than Airflow's default file handler, for
tests/airflow/test_task_log_remote.py: Airflow's default logging config plus ``REMOTE_TASK_LOG``, a
`RemoteLogIO` (Airflow's protocol, as S3's or GCS's) whose remote store is a directory
(``$RF_TEST_REMOTE_LOGS``). Like S3's, an upload appends the local file to the remote log and removes the
local copy; nothing outside this machine can be reached here."""
from __future__ import annotations

import os
from copy import deepcopy

from airflow.config_templates.airflow_local_settings import DEFAULT_LOGGING_CONFIG

LOGGING_CONFIG = deepcopy(DEFAULT_LOGGING_CONFIG)


class DirectoryRemoteLogIO:
    processors = ()

    def __init__(self) -> None:
        self.uploads: list[tuple[str, str | None]] = []  # (relative path, task id)

    @property
    def remote_dir(self) -> str:
        return os.environ["RF_TEST_REMOTE_LOGS"]

    def upload(self, path, ti=None) -> None:
        from airflow.configuration import conf

        local = os.path.join(conf.get("logging", "base_log_folder"), str(path))
        with open(local, encoding="utf-8") as handle:
            text = handle.read()
        remote = os.path.join(self.remote_dir, str(path))
        os.makedirs(os.path.dirname(remote), exist_ok=True)
        with open(remote, "a", encoding="utf-8") as handle:
            handle.write(text)
        os.remove(local)
        self.uploads.append((str(path), getattr(ti, "task_id", None)))

    def read(self, relative_path, ti):
        with open(os.path.join(self.remote_dir, relative_path), encoding="utf-8") as handle:
            return [self.remote_dir], [handle.read()]


REMOTE_TASK_LOG = DirectoryRemoteLogIO()
