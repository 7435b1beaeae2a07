"""``airflow regionflow status | plan DAG_ID | hosts | gc | session start|stop|status``: the provider's ``cli``
entry (`get_cli_commands`).

Airflow imports this module (and the light `regionflow.cli` package) on every ``airflow`` command to
build its parser, so it holds only the command definitions: each command's function is loaded
(`lazy_load_command`) from `regionflow.cli.airflow_handlers` when that command runs. The commands read
regionflow's settings from the ``[regionflow]`` section and print what the ``regionflow`` command line
prints for them. Each takes Airflow's ``-o/--output``: ``json`` is the document ``regionflow ... --format json``
prints, ``yaml`` the same document in YAML, ``table`` (the default) and ``plain`` the text, which has no borders.
"""
from __future__ import annotations

from airflow.cli.cli_config import (
    ARG_OUTPUT,
    ARG_VERBOSE,
    ActionCommand,
    Arg,
    CLICommand,
    GroupCommand,
    lazy_load_command,
)

_COMMANDS = "regionflow.cli.airflow_handlers"
_SECTION = r"\[regionflow]"  # Airflow's help is rich markup, where a bare [regionflow] is a style tag
_MODES = "all-blocking | forward-pipelined-only | pointwise-pipelined-only | all-pipelined"

ARG_STATUS_DAG_ID = Arg(("dag_id",), nargs="?", default=None, metavar="DAG_ID",
                        help="with RUN_ID: show that DAG run's attempts, copies and speculation figures instead")
ARG_STATUS_RUN_ID = Arg(("run_id",), nargs="?", default=None, metavar="RUN_ID", help="the DAG run (with DAG_ID)")
ARG_PLAN_DAG_ID = Arg(("dag_id",), metavar="DAG_ID", help="a DAG that calls regionflow.transform(dag)")
ARG_MODE = Arg(("--mode",), default=None, help=f"preview another exchange mode: {_MODES} (default: the DAG's own)")
ARG_INPUTS = Arg(("--inputs",), action="store_true", help="also list the producer subtasks each subtask reads")
ARG_OLDER_THAN = Arg(("--older-than",), type=float, default=None, metavar="SECONDS",
                     help=f"only runs unchanged this long (default: {_SECTION} partition_retention)")
ARG_DRY_RUN = Arg(("--dry-run",), action="store_true", help="list what would be removed, remove nothing")
ARG_HOST = Arg(("--host",), action="append", default=None, metavar="H",
               help=f"a host of {_SECTION} hosts (repeat for several; default: every host)")
ARG_TIMEOUT = Arg(("--timeout",), type=float, default=None, metavar="SECONDS",
                  help="start: seconds to wait for each server to answer")
_SESSION_HELP = {"start": "Start the hosts' Spark Connect servers that are not up and wait until they answer",
                 "stop": "Stop the hosts' Spark Connect servers (their whole process groups)",
                 "status": "Show each host's Spark Connect server: up, starting, silent or down (exit 1 if any "
                           "is not up)"}

REGIONFLOW_COMMANDS = (
    ActionCommand(
        name="status",
        help="Show regionflow's slot pool: hosts with slots used and free, the FIFO queue, the blocklist, "
             "the grants per DAG run",
        description=f"The slot pool as regionflow's store ({_SECTION} store_url) records it, for the hosts of "
                    f"{_SECTION} hosts; the same text as `regionflow status`. With DAG_ID RUN_ID: that run's "
                    "attempts, copies and speculation figures.",
        func=lazy_load_command(f"{_COMMANDS}.status"),
        args=(ARG_STATUS_DAG_ID, ARG_STATUS_RUN_ID, ARG_OUTPUT, ARG_VERBOSE),
    ),
    ActionCommand(
        name="plan",
        help="Show the pipelined regions of a regionflow DAG",
        description="Finds the DAG (its file from the metadata database, else the DAGs folder), parses it and "
                    "prints the plan of the job its regionflow.transform(dag) call built, as `regionflow plan "
                    "<dag file> --dag-id DAG_ID` does.",
        func=lazy_load_command(f"{_COMMANDS}.plan"),
        args=(ARG_PLAN_DAG_ID, ARG_MODE, ARG_OUTPUT, ARG_INPUTS, ARG_VERBOSE),
    ),
    ActionCommand(
        name="hosts",
        help=f"List the hosts of {_SECTION} hosts as the slot pool sees them: name, slots, slot profile",
        func=lazy_load_command(f"{_COMMANDS}.hosts"),
        args=(ARG_OUTPUT, ARG_VERBOSE),
    ),
    ActionCommand(
        name="gc",
        help="Remove orphaned attempt dirs and partitions of finished runs from the data dir",
        description=f"As `regionflow gc` for {_SECTION} data_dir, with {_SECTION} store_url telling running runs "
                    "(never touched) from finished ones.",
        func=lazy_load_command(f"{_COMMANDS}.gc"),
        args=(ARG_OLDER_THAN, ARG_DRY_RUN, ARG_OUTPUT, ARG_VERBOSE),
    ),
    GroupCommand(
        name="session",
        help="The long-lived Spark Connect servers of the session backend, one per host",
        subcommands=tuple(
            ActionCommand(name=action, help=text, func=lazy_load_command(f"{_COMMANDS}.session_{action}"),
                          description=f"As `regionflow session {action}` for {_SECTION} hosts, session_state_dir, "
                                      "session_base_port and bind_address.",
                          args=(ARG_HOST, *((ARG_TIMEOUT,) if action == "start" else ()), ARG_OUTPUT, ARG_VERBOSE))
            for action, text in _SESSION_HELP.items()),
    ),
)


def get_cli_commands() -> list[CLICommand]:
    """The ``airflow regionflow`` command group; named in get_provider_info()'s ``cli`` list."""
    return [GroupCommand(name="regionflow", help="regionflow's slot pool, DAG plans, hosts, data dir and Spark servers",
                         subcommands=REGIONFLOW_COMMANDS)]


__all__ = ["REGIONFLOW_COMMANDS", "get_cli_commands"]
