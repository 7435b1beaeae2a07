"""The UI plugin's bundle as the package ships it (built from ui/ by `make ui`; `make ui-check` in CI proves
it is what the sources build): every React app the plugin registers is a component the bundle puts under
its name, and React and Chakra come from Airflow's UI, not from the bundle."""
from __future__ import annotations

import re
from pathlib import Path

from regionflow.ui.plugin import BUNDLE_URL, URL_PREFIX, RegionflowPlugin

BUNDLE = Path(__file__).resolve().parents[1] / "provider" / "regionflow" / "ui" / "static" / "regionflow.js"


def test_each_react_app_is_registered_by_the_bundle_under_its_name():
    text = BUNDLE.read_text(encoding="utf-8")
    names = [app["name"] for app in RegionflowPlugin.react_apps]
    assert len(set(names)) == len(names) and {app["bundle_url"] for app in RegionflowPlugin.react_apps} == {BUNDLE_URL}
    registered = set(re.findall(r'"(regionflow [a-z ]+)"\s*:', text))
    assert registered == set(names), (registered, names)
    assert BUNDLE_URL == f"{URL_PREFIX}/static/{BUNDLE.name}"


def test_the_bundle_takes_react_and_chakra_from_airflows_ui():
    text = BUNDLE.read_text(encoding="utf-8")
    head = text[:600]
    for name in ("AirflowPlugin", "ReactJSXRuntime", "ChakraUI", "React"):
        assert f".{name}" in head, name  # UMD globals, not bundled copies
    assert "react.production" not in text and len(text) < 200_000
