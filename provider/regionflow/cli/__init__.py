"""The `regionflow` command line: plan, simulate, run, schema, status, session, gc, migrate-store, version.

`build_parser` builds the one parser; each command group's module registers its subcommands
(``register``) and holds their handlers, which import what they need (PySpark, the runner, SQLAlchemy,
Airflow) when they run, so ``regionflow --help`` imports none of it. ``airflow regionflow ...`` is
defined beside it: `regionflow.cli.airflow` (the provider's ``cli`` entry) and
`regionflow.cli.airflow_handlers`.

Every expected failure is a `RegionflowError`; the CLI prints its message (no traceback) and exits 2.
"""
from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Sequence

from ..core.errors import RegionflowError
from ..output import document_only

EXIT_USAGE = 2


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "handler"):
        parser.print_help()
        return EXIT_USAGE
    try:
        with document_only(getattr(args, "format", None) == "json"):  # stdout: the one JSON document
            return args.handler(args) or 0
    except RegionflowError as error:
        if getattr(args, "debug", False):
            traceback.print_exc()
        print(f"regionflow: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        # the reader (e.g. `| head`) went away: not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def build_parser() -> argparse.ArgumentParser:
    """The parser of the `regionflow` command, its subcommands in the order ``--help`` lists them."""
    # absolute, not `from . import`: mypy's cache from when regionflow.cli was a module (cli.py) misreads that
    from regionflow.cli import gc, plan, run, schema, session, status, store, version

    parser = argparse.ArgumentParser(prog="regionflow", description="Flink's batch scheduler for Airflow + Spark")
    parser.add_argument("--debug", action="store_true", help="with an error, also print its Python traceback")
    commands = parser.add_subparsers(title="commands")
    plan.register(commands)  # plan, simulate
    run.register(commands)
    schema.register(commands)
    status.register(commands)
    session.register(commands)
    gc.register(commands)
    store.register(commands)  # migrate-store
    version.register(commands)
    return parser


__all__ = ["EXIT_USAGE", "build_parser", "main"]
