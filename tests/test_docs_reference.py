"""The generated reference pages (docs/reference/*.md) match the code: an option or a command added, renamed or
re-described without `make docs` fails here, naming the page and the fix."""
import importlib.util
from pathlib import Path

DOCS = Path(__file__).resolve().parent.parent / "docs"


def _reference():
    spec = importlib.util.spec_from_file_location("docs_reference", DOCS / "reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_generated_reference_pages_match_the_code():
    assert _reference().stale() == [], "run `make docs` (python docs/reference.py) and commit docs/reference/"


def test_every_option_and_command_is_on_its_page():
    from regionflow.cli import build_parser
    from regionflow.config import OPTIONS

    reference = _reference()
    configuration = reference.configuration_page()
    assert all(f"\n## {option.name}\n" in configuration for option in OPTIONS)
    cli = reference.cli_page()
    commands = [action for action in build_parser()._actions if hasattr(action, "choices") and action.choices]
    names = [name for action in commands for name in action.choices]
    assert names and all(f"\n### regionflow {name}\n" in cli for name in names)
    for name in ("status", "plan", "hosts", "gc", "session start", "session stop", "session status"):
        assert f" airflow regionflow {name}\n" in cli, name
