"""The package's metadata (pyproject.toml) against the code and the installed distribution: the version in one
place, entry points that load, package data that exists, no second copy of the metadata on sys.path."""
import importlib
import importlib.metadata as md
import json
import tomllib
from pathlib import Path

import regionflow

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
DIST = "airflow-provider-regionflow"


def test_the_version_lives_in_regionflow_and_the_installed_metadata_carries_it():
    project = PYPROJECT["project"]
    assert "version" not in project and "version" in project["dynamic"]
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "regionflow.__version__"}
    assert md.version(DIST) == regionflow.__version__, "the venv's install is stale: run `make venv`"


def test_the_installed_requirements_are_pyprojects():
    """A requirement changed in pyproject.toml without a reinstall would test another package than ships."""
    from packaging.requirements import Requirement

    def key(text):
        requirement = Requirement(text)
        return requirement.name.lower(), frozenset(requirement.extras), str(requirement.specifier)

    installed = {key(text) for text in md.requires(DIST) or () if "extra ==" not in text}
    assert installed == {key(text) for text in PYPROJECT["project"]["dependencies"]}, \
        "the venv's install is stale: run `make venv`"


def test_every_entry_point_names_an_object_that_loads():
    project = PYPROJECT["project"]
    targets = {("console_scripts", name): target for name, target in project["scripts"].items()}
    targets |= {(group, name): target for group, names in project["entry-points"].items()
                for name, target in names.items()}
    assert set(targets) == {("console_scripts", "regionflow"), ("apache_airflow_provider", "provider_info"),
                            ("airflow.plugins", "regionflow")}
    for name, target in targets.items():
        module, _, attribute = target.partition(":")
        assert getattr(importlib.import_module(module), attribute) is not None, name
    info = regionflow.get_provider_info()
    assert info["package-name"] == PYPROJECT["project"]["name"] and info["versions"][0] == regionflow.__version__


def test_every_package_data_pattern_matches_a_file_and_the_licence_files_exist():
    setuptools = PYPROJECT["tool"]["setuptools"]
    source = ROOT / setuptools["package-dir"][""]
    for package, patterns in setuptools["package-data"].items():
        for pattern in patterns:
            assert list((source / package.replace(".", "/")).glob(pattern)), f"{package}: {pattern} matches nothing"
    for name in PYPROJECT["project"]["license-files"]:
        assert (ROOT / name).stat().st_size > 0, name
    assert "Apache License" in (ROOT / "LICENSE").read_text(encoding="utf-8")


def test_no_egg_info_beside_the_sources():
    """provider/ is on sys.path in an editable install: metadata there is a second copy of the distribution,
    and Airflow would load the plugin and the provider twice (the Makefile removes it after installing)."""
    assert sorted(path.name for path in (ROOT / "provider").glob("*.egg-info")) == [], \
        "remove provider/*.egg-info (a by-product of `pip install -e .`)"


def test_airflow_loads_the_ui_plugin_once_with_no_import_error_and_the_provider_info_is_valid():
    """The plugin comes from the ``airflow.plugins`` entry point only: get_provider_info() does not list it
    (Airflow loads those only with lazy_discover_providers off, and would then register it twice)."""
    import airflow
    import jsonschema
    from airflow import plugins_manager

    apps, _ = plugins_manager.get_fastapi_plugins()
    assert [app.get("url_prefix") for app in apps].count("/regionflow") == 1, apps
    assert plugins_manager.get_import_errors() == {}
    info = regionflow.get_provider_info()
    jsonschema.validate(info, json.loads((Path(airflow.__file__).parent / "provider_info.schema.json").read_text()))
    assert "plugins" not in info
    for kind in ("operators", "sensors", "triggers"):
        for module in info[kind][0]["python-modules"]:
            importlib.import_module(module)
