"""``regionflow schema job|hosts|config``: the JSON Schema of an input kind, for editors and CI."""
from __future__ import annotations

import argparse
import json
from typing import Any


def register(commands: Any) -> None:
    """Register ``schema`` on the CLI's subcommands."""
    schema = commands.add_parser("schema", help="print the JSON Schema of a job spec, a host list or the "
                                                "[regionflow] options (for editors and CI of your files)")
    schema.add_argument("kind", choices=("job", "hosts", "config"))
    schema.set_defaults(handler=run_schema)


def run_schema(args: argparse.Namespace) -> int:
    print(json.dumps(schema_of(args.kind), indent=2))
    return 0


def schema_of(kind: str) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of one input kind, from its declared model."""
    from ..config import config_schema
    from ..core.jobspec import JOB
    from ..scheduling.hostspec import HOST

    dialect = {"$schema": "https://json-schema.org/draft/2020-12/schema"}
    if kind == "job":
        return dialect | JOB.json_schema()
    if kind == "hosts":
        return dialect | {"title": "hosts", "description": "[regionflow] hosts as JSON: a list of hosts (the text "
                          "form 'a:slots=2,cpu=2;b:2' names the same fields)", "type": "array",
                          "items": HOST.json_schema(), "minItems": 1}
    return dialect | config_schema()


__all__ = ["register", "run_schema", "schema_of"]
