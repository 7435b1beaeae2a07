"""`pip install .` into a fresh virtual environment, then what Airflow says of the installed provider.

The rest of the suite runs on the editable install of the development venv; this test builds the wheel from
pyproject.toml and installs it, with the pins of constraints.txt, into a new venv (uv, from its cache: about a
minute here), and asks that venv's own ``airflow`` for the provider as a user would. It is marked ``long``
(``make test-long``); its cheaper sibling in ``make test`` is
``tests/test_packaging.py::test_airflow_loads_the_ui_plugin_once_with_no_import_error_and_the_provider_info_is_valid``,
which checks the same provider info on the development venv.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import regionflow
from regionflow.cli.airflow import get_cli_commands
from regionflow.config import OPTIONS, SECTION

ROOT = Path(__file__).resolve().parent.parent
pytestmark = [pytest.mark.long, pytest.mark.heavy, pytest.mark.timeout(900)]


def run(*argv: str | Path, env: dict[str, str] | None = None, cwd: Path | None = None) -> str:
    done = subprocess.run([os.fspath(arg) for arg in argv], capture_output=True, text=True, env=env, cwd=cwd,
                          stdin=subprocess.DEVNULL, timeout=600)
    assert done.returncode == 0, f"{argv}: {done.stdout[-3000:]}{done.stderr[-3000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def fresh(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """A new venv holding ``pip install -c constraints.txt .`` (not editable), and an environment for it: a new
    AIRFLOW_HOME, no PYTHONPATH, run from outside the repository (so nothing imports the sources)."""
    where = tmp_path_factory.mktemp("fresh")
    venv, source = where / "venv", where / "source"
    # built from a copy of the checkout's files (git's view: tracked and new, not ignored): a build in the
    # checkout itself would leave provider/*.egg-info there, a second copy of the metadata for the dev venv
    files = run("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", cwd=ROOT).split("\0")
    for name in filter(None, files):
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    uv = Path(sys.executable).parent / "uv"
    run(uv, "venv", "-q", "--python", sys.executable, venv)
    run(uv, "pip", "install", "-q", "--python", venv / "bin" / "python", "-c", ROOT / "constraints.txt", source)
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("AIRFLOW", "PYTHON", "VIRTUAL_ENV", "REGIONFLOW"))}
    env |= {"AIRFLOW_HOME": os.fspath(where / "home"), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "PATH": f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"}
    return venv, env


def test_the_installed_package_is_the_wheel_with_its_bundle_not_the_sources(fresh):
    venv, env = fresh
    where = run(venv / "bin" / "python", "-c", "import regionflow, regionflow.ui; print(regionflow.__file__); "
                "print(regionflow.__version__)", env=env, cwd=venv).split()
    assert Path(where[0]).is_relative_to(venv) and where[1] == regionflow.__version__, where
    assert (Path(where[0]).parent / "ui" / "static" / "regionflow.js").stat().st_size > 10_000
    version = json.loads(run(venv / "bin" / "regionflow", "version", "--format", "json", env=env, cwd=venv))
    assert version["regionflow"] == regionflow.__version__
    assert all(component["supported"] for component in version["components"].values()), version


def test_airflow_providers_get_lists_what_the_provider_brings(fresh):
    venv, env = fresh
    out = run(venv / "bin" / "airflow", "providers", "get", "airflow-provider-regionflow", "--full", "-o", "json",
              env=env, cwd=venv)
    [info] = json.loads(out)
    assert info["versions"] == [regionflow.__version__]
    assert info["executors"] == ["regionflow.executors.RegionExecutor"]
    assert info["cli"] == ["regionflow.cli.airflow.get_cli_commands"]
    assert sorted(info["config"][SECTION]["options"]) == sorted(option.name for option in OPTIONS)
    for kind, module in (("operators", "regionflow.operators.region"), ("sensors", "regionflow.sensors.speculation"),
                         ("triggers", "regionflow.triggers.inputs")):
        assert module in info[kind][0]["python-modules"], (kind, info[kind])
    plugins = json.loads(run(venv / "bin" / "airflow", "plugins", "-o", "json", env=env, cwd=venv))
    assert [plugin["name"] for plugin in plugins].count("regionflow") == 1, plugins
    listed = re.findall(r"^ {4}(\S+) {2,}", run(venv / "bin" / "airflow", "regionflow", "--help", env=env, cwd=venv),
                        re.MULTILINE)
    [group] = get_cli_commands()
    assert sorted(listed) == sorted(command.name for command in group.subcommands), listed
