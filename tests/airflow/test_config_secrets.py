"""`[regionflow] store_url` is sensitive, as Airflow's own ``sql_alchemy_conn``: Airflow masks it, and its value
may come from a command (``store_url_cmd``) or from the configured secrets backend (``store_url_secret``) instead
of airflow.cfg. Each check reads the configuration in a fresh Python process, as the scheduler does (Airflow
loads providers' configuration once per process); the secrets backend is Airflow's LocalFilesystemBackend."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from regionflow.config import check_option_names
from regionflow.core.errors import SpecError

READ = ("from airflow.configuration import conf\n"
        "from regionflow.config import RegionflowConfig\n"
        "print(RegionflowConfig.from_airflow().store_url)\n"
        "print(('regionflow', 'store_url') in conf.sensitive_config_values)\n")


def read_store_url(home, **variables):
    env = {key: value for key, value in os.environ.items() if not key.startswith("AIRFLOW__")}
    env.update(AIRFLOW_HOME=str(home), AIRFLOW__CORE__LOAD_EXAMPLES="False", **variables)
    done = subprocess.run([sys.executable, "-c", READ], env=env, capture_output=True, text=True, timeout=300,
                          cwd=str(home))
    assert done.returncode == 0, done.stderr[-3000:]
    url, sensitive = done.stdout.strip().splitlines()[-2:]
    return url, sensitive == "True"


def test_the_store_url_comes_from_a_command_and_is_sensitive(tmp_path):
    url = f"sqlite:///{tmp_path}/from-command.db"
    assert read_store_url(tmp_path, AIRFLOW__REGIONFLOW__STORE_URL_CMD=f"echo {url}") == (url, True)


def test_the_store_url_comes_from_the_secrets_backend(tmp_path):
    url = f"postgresql://regionflow:pw@db.internal/regionflow-{tmp_path.name}"
    configs = tmp_path / "configs.json"
    configs.write_text(json.dumps({"regionflow_store_url": url}))
    assert read_store_url(
        tmp_path,
        AIRFLOW__SECRETS__BACKEND="airflow.secrets.local_filesystem.LocalFilesystemBackend",
        AIRFLOW__SECRETS__BACKEND_KWARGS=json.dumps({"configs_file_path": str(configs)}),
        AIRFLOW__REGIONFLOW__STORE_URL_SECRET="regionflow_store_url") == (url, True)


def test_only_a_sensitive_option_has_command_and_secret_variants():
    check_option_names(["store_url_cmd", "STORE_URL_SECRET", "hosts"])
    with pytest.raises(SpecError, match=r"\[regionflow\] hosts_cmd is not an option of regionflow"):
        check_option_names(["hosts_cmd"])
