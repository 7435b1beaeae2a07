"""``regionflow version``: the versions found here against the supported ones, as text and as one JSON document."""
import json

import regionflow
from regionflow.cli import main
from regionflow.cli.version import SUPPORTED, versions


def test_this_environment_is_a_supported_one(capsys):
    assert main(["version", "--format", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["regionflow"] == regionflow.__version__
    assert set(document["components"]) == set(SUPPORTED)
    assert all(found["supported"] for found in document["components"].values()), document
    assert main(["version"]) == 0
    text = capsys.readouterr().out.splitlines()
    assert text[0] == f"regionflow {regionflow.__version__}" and all(line.endswith(": ok") for line in text[1:])


def test_a_java_other_than_17_is_named_unsupported_without_starting_it(tmp_path, monkeypatch, capsys):
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "java").write_text("#!/bin/sh\nexit 1\n")  # never run: the release file tells
    (tmp_path / "release").write_text('IMPLEMENTOR="test"\nJAVA_VERSION="11.0.2"\n')
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    java = versions()["components"]["java"]
    assert java == {"version": "11.0.2", "supported_versions": "==17.*", "supported": False}
    main(["version"])
    assert "  java 11.0.2: NOT SUPPORTED (supported: ==17.*)" in capsys.readouterr().out.splitlines()
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "none"))
    assert versions()["components"]["java"]["version"] is None
