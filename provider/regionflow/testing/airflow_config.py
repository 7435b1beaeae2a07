"""The ``airflow.cfg`` of the embedded Airflow stack, and the files and secrets beside it.

Configuration lives in ``<home>/airflow.cfg`` only. Every child gets ``AIRFLOW_HOME`` and
``AIRFLOW_CONFIG`` pointing at it and no inherited ``AIRFLOW__SECTION__KEY`` variables, because
those override the file: a developer's shell (or the Makefile's ``AIRFLOW__CORE__LOAD_EXAMPLES``)
cannot then change the stack, and any process started later with the same ``AIRFLOW_HOME`` (task
processes, Spark drivers, a developer's ``airflow`` CLI) reads exactly the same settings.

This module writes it: the sections (`config_sections`), the secrets kept across restarts of one
home (`stack_secrets`: the metadata database's fernet key must not change), the simple auth
manager's admin password file (mode 0600, never logged), and SQLite's WAL mode for the metadata
database.
"""
from __future__ import annotations

import configparser
import json
import os
import secrets
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..spark.servers.session_servers import free_port

if TYPE_CHECKING:
    from .stack import EmbeddedAirflow

LOOPBACK = "127.0.0.1"
ADMIN_USER = "admin"
# Airflow's SQLite metadata database: its connections wait this long for a lock (pysqlite's default
# is 5 s), named by ``[database] sql_alchemy_connect_args``.
SQLITE_CONNECT_ARGS = {"timeout": 30}


def loopback_hostname() -> str:
    """``[core] hostname_callable`` of the embedded stack: every component runs on this machine."""
    return LOOPBACK


def config_sections(stack: EmbeddedAirflow, port: int, keys: Mapping[str, str]) -> dict[str, dict[str, str]]:
    """The sections of the stack's ``airflow.cfg``: its paths, executor and database, fast loops, the
    secrets `keys` (fernet_key, secret_key, jwt_secret), then ``[regionflow]`` and `extra_config` over
    them; the api-server on 127.0.0.1:`port`."""
    api_url = f"http://{LOOPBACK}:{port}"
    sections: dict[str, dict[str, str]] = {
        "core": {
            "executor": stack.executor,
            "dags_folder": stack.dags_folder,
            "plugins_folder": stack.plugins_folder,
            "load_examples": "False",
            "parallelism": str(stack.parallelism),
            # The executor, not Airflow, is the gate: held tasks are QUEUED and count here.
            "max_active_tasks_per_dag": str(max(64, stack.parallelism)),
            "max_active_runs_per_dag": "16",
            "default_pool_task_slot_count": str(max(128, stack.parallelism)),
            "execution_api_server_url": f"{api_url}/execution/",
            "fernet_key": keys["fernet_key"],
            # ti.hostname is where the api-server fetches a running task's served log from;
            # 127.0.0.1 keeps that fetch on loopback (it fails fast: nothing serves logs).
            "hostname_callable": "regionflow.testing.airflow_config.loopback_hostname",
            "auth_manager": "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager",
            "simple_auth_manager_users": f"{ADMIN_USER}:admin",
            "simple_auth_manager_all_admins": "False",
            "simple_auth_manager_passwords_file": stack.passwords_path,
            # Two shared cores: parsing a regionflow DAG (plan + imports) can be slow.
            "dagbag_import_timeout": "120",
            # A rewritten DAG file reaches the database within seconds, not 30 s.
            "min_serialized_dag_update_interval": "5",
        },
        "database": {"sql_alchemy_conn": stack.database_url} if stack.database_url else {
            "sql_alchemy_conn": f"sqlite:///{stack.database_path}",
            "sql_alchemy_connect_args": "regionflow.testing.airflow_config.SQLITE_CONNECT_ARGS",
        },
        "logging": {
            "base_log_folder": stack.logs_dir,
            "dag_processor_child_process_log_directory": os.path.join(stack.logs_dir, "dag_processor"),
            # Nothing serves these (--skip-serve-logs); own ports keep the api-server's fallback
            # fetch of a running task's log away from another stack's 8793 on this machine.
            "worker_log_server_port": str(free_port()),
            "trigger_log_server_port": str(free_port()),
            "colored_console_log": "False",
        },
        "api": {
            "host": LOOPBACK,
            "port": str(port),
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
            # A changed file is parsed again at once whatever the interval says (its mtime is newer than its last
            # parse: the modified_time sort mode); an unchanged one only after 10 min. Parsing a regionflow DAG
            # file costs about a CPU-second on two cores: at 30 s, a module's 5 files were parsed 85 times in
            # 8.5 min, a sixth of a core for results that never changed.
            "file_parsing_sort_mode": "modified_time",
            "min_file_process_interval": "600",
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
    if stack.regionflow_options:
        sections["regionflow"] = {str(k): str(v) for k, v in stack.regionflow_options.items()}
    for section, options in stack.extra_config.items():
        sections.setdefault(section, {}).update({str(k): str(v) for k, v in options.items()})
    return sections


def stack_secrets(config_path: str) -> dict[str, str]:
    """Secrets of an existing airflow.cfg (the DB's fernet key must not change), else new ones."""
    previous = read_config(config_path)
    wanted = {"fernet_key": ("core", _fernet_key), "secret_key": ("api", _token),
              "jwt_secret": ("api_auth", _jwt_secret)}
    return {
        key: previous.get(section, key, fallback="") or make()
        for key, (section, make) in wanted.items()
    }


def ensure_admin_password(passwords_path: str) -> None:
    """Give the admin user a password in the simple auth manager's file unless it has one. Written
    before the api-server starts, so the auth manager finds the user and never generates (and prints)
    a password of its own."""
    passwords = read_json(passwords_path)
    if passwords.get(ADMIN_USER):
        return
    passwords[ADMIN_USER] = secrets.token_urlsafe(24)
    write_private(passwords_path, json.dumps(passwords) + "\n")



def render_config(sections: Mapping[str, Mapping[str, str]]) -> str:
    """`sections` as airflow.cfg text ('%' doubled: Airflow reads the file with interpolation)."""
    blocks = []
    for section, options in sections.items():
        lines = [f"[{section}]"] + [f"{key} = {value.replace('%', '%%')}" for key, value in options.items()]
        blocks.append("\n".join(lines))
    return ("# Written by regionflow.testing.EmbeddedAirflow; rewritten on every start.\n\n"
            + "\n\n".join(blocks) + "\n")


def read_config(path: str) -> configparser.ConfigParser:
    """An airflow.cfg as written (no interpolation); empty when the file is missing."""
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(path, encoding="utf-8")
    return parser


def write_private(path: str, text: str) -> None:
    """Write `text` to `path` readable by this user only (0600)."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.chmod(path, 0o600)


def read_json(path: str) -> dict[str, Any]:
    """A JSON object file, or {} when it is missing or unreadable."""
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def use_wal(database: str) -> None:
    """Switch a SQLite file to WAL (persistent): readers stop blocking the writer, so Airflow's own
    writes and regionflow's store, task processes and the API server's reads contend far less."""
    import sqlite3

    connection = sqlite3.connect(database, timeout=30)
    try:
        connection.execute("PRAGMA journal_mode = WAL")
    finally:
        connection.close()


def _token() -> str:
    return secrets.token_urlsafe(32)


def _jwt_secret() -> str:
    # 64 bytes: PyJWT warns about shorter HMAC keys for the SHA-512 family.
    return secrets.token_urlsafe(64)


def _fernet_key() -> str:
    from cryptography.fernet import Fernet

    return Fernet.generate_key().decode()


__all__ = ["ADMIN_USER", "LOOPBACK", "SQLITE_CONNECT_ARGS", "config_sections", "ensure_admin_password",
           "loopback_hostname", "read_config", "read_json", "render_config", "stack_secrets",
           "use_wal", "write_private"]
