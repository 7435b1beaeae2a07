"""What ``airflow regionflow status | plan | hosts | gc | session ...`` run (defined in `regionflow.cli.airflow`).

Each command reads the ``[regionflow]`` section (`RegionflowConfig.from_airflow`) and prints what the
``regionflow`` command line prints for the same store, job, hosts, data dir or servers:
`regionflow.cli.status.status_output`, `regionflow.cli.plan.plan_output`, `regionflow.cli.status.hosts_output`,
`regionflow.cli.gc.gc_document`, `regionflow.cli.session.session_document`; in Airflow's ``-o/--output``
(`rendered`). An expected failure (a bad
``[regionflow]`` option, a DAG that does not exist or is not a regionflow DAG, a missing store or run)
is one line on stderr, ``airflow regionflow <command>: error: ...``, and exit status 2; no traceback.
"""
from __future__ import annotations

import argparse
import contextlib
import functools
import json
import logging
import os
import sys
from collections.abc import Callable
from typing import Any

from ..core.errors import RegionflowError, SpecError
from ..core.graph import JobGraph

EXIT_ERROR = 2


def _one_line_errors(command: Callable[[argparse.Namespace], str]) -> Callable[[argparse.Namespace], None]:
    """Run `command` and print the text it returns on stdout (a command's exit status other than 0, as
    ``session status`` with a server down, comes as `CommandExit` after its text). While it runs,
    Airflow's log lines are dropped unless ``--verbose`` (its `suppress_logs_and_warning`, as for its own
    list commands: parsing the DAGs folder logs every other file's import error with a traceback) and
    anything written goes to stderr, so ``-o json`` output stays JSON. A `RegionflowError` is one line on
    stderr and exit status 2."""
    from airflow.utils.cli import suppress_logs_and_warning

    @functools.wraps(command)
    def run(args: argparse.Namespace) -> None:
        output: list[str] = []

        @suppress_logs_and_warning
        def quietly(args: argparse.Namespace) -> None:
            with contextlib.redirect_stdout(sys.stderr):
                output.append(command(args))

        _logs_to_stderr()
        status = 0
        try:
            quietly(args)
        except RegionflowError as error:
            print(f"airflow regionflow {command.__name__.replace('_', ' ')}: error: {error}", file=sys.stderr)
            raise SystemExit(EXIT_ERROR) from None
        except CommandExit as done:
            output.append(done.text)
            status = done.status
        try:
            print(output[0], flush=True)
        except BrokenPipeError:  # the reader (e.g. `| head`) went away: not an error of ours
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        if status:
            raise SystemExit(status)

    return run


class CommandExit(Exception):
    """A command's `text` to print, then exit with `status`."""

    def __init__(self, text: str, status: int) -> None:
        super().__init__(text)
        self.text, self.status = text, status


def text_or_json(output: str) -> str:
    """The format to ask a ``regionflow`` output function for, for Airflow's ``--output`` `output`."""
    return "json" if output in ("json", "yaml") else "text"


def rendered(text: str, output: str) -> str:
    """`text` (from an output function asked for `text_or_json(output)`) as ``--output`` `output`: YAML is
    the JSON document in YAML; ``table`` and ``plain`` are the text, which has no borders."""
    if output != "yaml":
        return text
    import yaml

    return yaml.safe_dump(json.loads(text), sort_keys=False).rstrip("\n")


def _logs_to_stderr() -> None:
    """Stdlib log handlers writing to stdout write to stderr (as Airflow does for its own commands'
    ``--output``)."""
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.StreamHandler) and handler.stream is sys.stdout:
            handler.setStream(sys.stderr)


def _config() -> Any:
    from ..config import RegionflowConfig

    return RegionflowConfig.from_airflow()


@_one_line_errors
def status(args: argparse.Namespace) -> str:
    """``airflow regionflow status [DAG_ID RUN_ID]``: `regionflow status` for ``[regionflow] store_url``
    and ``hosts``."""
    from .status import status_output

    config = _config()
    return rendered(status_output(config.store_url, config.cluster, args.dag_id, args.run_id,
                                  text_or_json(args.output)), args.output)


@_one_line_errors
def hosts(args: argparse.Namespace) -> str:
    """``airflow regionflow hosts``: the hosts of ``[regionflow] hosts``, one per line."""
    from .status import hosts_output

    return rendered(hosts_output(_config().cluster, text_or_json(args.output)), args.output)


@_one_line_errors
def plan(args: argparse.Namespace) -> str:
    """``airflow regionflow plan DAG_ID``: the plan of the DAG's regionflow job, as `regionflow plan` prints it."""
    from .common import mode_option
    from .plan import plan_output

    config = _config()  # a bad [regionflow] option is named here, not as the DAG file's import error
    mode = mode_option(args.mode)
    return rendered(plan_output(dag_job(args.dag_id), mode, text_or_json(args.output), inputs=args.inputs,
                                max_shards=config.max_shards), args.output)


@_one_line_errors
def gc(args: argparse.Namespace) -> str:
    """``airflow regionflow gc``: `regionflow gc` for ``[regionflow] data_dir`` and ``store_url``; what is
    older than ``--older-than`` (default: ``[regionflow] partition_retention``)."""
    from .gc import gc_document, gc_text

    config = _config()
    older_than = config.partition_retention if args.older_than is None else args.older_than
    document = gc_document(config.data_dir, config.store_url, older_than, args.dry_run)
    return _document_as(document, gc_text, args.output)


def _session(args: argparse.Namespace, action: str) -> str:
    """``airflow regionflow session ACTION``: `regionflow session ACTION` for the servers of ``[regionflow]
    hosts`` (state files in ``session_state_dir``, ports from ``session_base_port``, drivers on
    ``bind_address``)."""
    from ..spark.servers.connect import DEFAULT_START_TIMEOUT_S
    from ..spark.servers.session_servers import SessionServers
    from .session import session_document, session_exit, session_text

    config = _config()
    servers = SessionServers(config.cluster, config.session_state_dir, config.session_base_port,
                             bind_address=config.bind_address)
    timeout = getattr(args, "timeout", None) or DEFAULT_START_TIMEOUT_S
    document = session_document(servers, action, args.host, timeout)
    text = _document_as(document["servers"], lambda _: session_text(document), args.output)
    status = session_exit(document)
    if status:
        raise CommandExit(text, status)
    return text


@_one_line_errors
def session_start(args: argparse.Namespace) -> str:
    return _session(args, "start")


@_one_line_errors
def session_stop(args: argparse.Namespace) -> str:
    return _session(args, "stop")


@_one_line_errors
def session_status(args: argparse.Namespace) -> str:
    return _session(args, "status")


def _document_as(document: Any, text: Callable[[Any], str], output: str) -> str:
    """`document` as ``--output`` `output`: JSON, YAML, else `text(document)`."""
    if output in ("json", "yaml"):
        return rendered(json.dumps(document, indent=2), output)
    return text(document)


def dag_job(dag_id: str) -> JobGraph:
    """The job that ``regionflow.transform(dag)`` built for DAG `dag_id`, parsing the DAG's file: the one
    the metadata database knows for it (any bundle), else the DAGs folder. A DAG that is not there, does
    not import or is not transformed by regionflow raises `SpecError` saying which and what fixes it."""
    from airflow import settings
    from airflow.models import DagBag

    from ..units.dags import attached_job

    known = _dag_file_in_db(dag_id)
    for where in ([known] if known else []) + [settings.DAGS_FOLDER]:  # the file, else the folder (it moved)
        bag = DagBag(dag_folder=where, load_op_links=False)
        dag = bag.dags.get(dag_id)
        if dag is not None:
            break
    if dag is None:
        raise SpecError(_not_found(dag_id, where, bag.import_errors))
    graph = attached_job(dag)
    if graph is None:
        raise SpecError(f"DAG {dag_id!r} ({dag.fileloc}) is not a regionflow DAG: its file does not call "
                        f"regionflow.transform(dag); declare its Spark work as SparkVertexOperators and call "
                        f"regionflow.transform(dag) after them")
    return graph


def _dag_file_in_db(dag_id: str) -> str | None:
    """The DAG's file as the metadata database knows it (parsed by the dag-processor), if it exists here."""
    from airflow.models import DagModel
    from sqlalchemy.exc import SQLAlchemyError

    try:
        model = DagModel.get_current(dag_id)
    except SQLAlchemyError:  # no metadata database (yet): the DAGs folder is all there is
        return None
    fileloc = getattr(model, "fileloc", None) if model is not None else None
    return fileloc if fileloc and os.path.exists(fileloc) else None


def _not_found(dag_id: str, where: str, import_errors: dict[str, str]) -> str:
    if import_errors:
        path, error = sorted(import_errors.items())[0]
        last = [line.strip() for line in str(error).splitlines() if line.strip()]
        more = f" (and {len(import_errors) - 1} more file(s))" if len(import_errors) > 1 else ""
        return (f"DAG {dag_id!r} was not found in {where}; {path} failed to import{more}: "
                f"{last[-1] if last else 'no message'}; fix that file (see `airflow dags list-import-errors`) "
                f"or check the DAG id")
    return (f"DAG {dag_id!r} was not found in {where}; check the DAG id (`airflow dags list`) and "
            f"[core] dags_folder")


__all__ = ["CommandExit", "dag_job", "gc", "hosts", "plan", "rendered", "session_start", "session_status",
           "session_stop", "status", "text_or_json"]
