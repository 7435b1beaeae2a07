"""``airflow regionflow status | plan DAG_ID | hosts``: the provider's ``cli`` entry (`get_cli_commands`).

Airflow imports this module (and the light `regionflow.cli` package) on every ``airflow`` command to
build its parser, so it holds only the command definitions: each command's function is loaded
(`lazy_load_command`) from `regionflow.cli.airflow_handlers` when that command runs. The commands read
regionflow's settings from the ``[regionflow]`` section and print what the ``regionflow`` command line
prints for them.
"""
from __future__ import annotations

from airflow.cli.cli_config import ARG_VERBOSE, ActionCommand, Arg, CLICommand, GroupCommand, lazy_load_command

_COMMANDS = "regionflow.cli.airflow_handlers"
_SECTION = r"\[regionflow]"  # Airflow's help is rich markup, where a bare [regionflow] is a style tag
_MODES = "all-blocking | forward-pipelined-only | pointwise-pipelined-only | all-pipelined"

ARG_FORMAT = Arg(("--format",), help="text (default) or json", choices=("text", "json"), default="text")
ARG_STATUS_DAG_ID = Arg(("dag_id",), nargs="?", default=None, metavar="DAG_ID",
                        help="with RUN_ID: show that DAG run's attempts, copies and speculation figures instead")
ARG_STATUS_RUN_ID = Arg(("run_id",), nargs="?", default=None, metavar="RUN_ID", help="the DAG run (with DAG_ID)")
ARG_PLAN_DAG_ID = Arg(("dag_id",), metavar="DAG_ID", help="a DAG that calls regionflow.transform(dag)")
ARG_MODE = Arg(("--mode",), default=None, help=f"preview another exchange mode: {_MODES} (default: the DAG's own)")
ARG_INPUTS = Arg(("--inputs",), action="store_true", help="also list the producer subtasks each subtask reads")

REGIONFLOW_COMMANDS = (
    ActionCommand(
        name="status",
        help="Show regionflow's slot pool: hosts with slots used and free, the FIFO queue, the blocklist, "
             "the grants per DAG run",
        description=f"The slot pool as regionflow's store ({_SECTION} store_url) records it, for the hosts of "
                    f"{_SECTION} hosts; the same text as `regionflow status`. With DAG_ID RUN_ID: that run's "
                    "attempts, copies and speculation figures.",
        func=lazy_load_command(f"{_COMMANDS}.status"),
        args=(ARG_STATUS_DAG_ID, ARG_STATUS_RUN_ID, ARG_FORMAT, ARG_VERBOSE),
    ),
    ActionCommand(
        name="plan",
        help="Show the pipelined regions of a regionflow DAG",
        description="Finds the DAG (its file from the metadata database, else the DAGs folder), parses it and "
                    "prints the plan of the job its regionflow.transform(dag) call built, as `regionflow plan "
                    "<dag file> --dag-id DAG_ID` does.",
        func=lazy_load_command(f"{_COMMANDS}.plan"),
        args=(ARG_PLAN_DAG_ID, ARG_MODE, ARG_FORMAT, ARG_INPUTS, ARG_VERBOSE),
    ),
    ActionCommand(
        name="hosts",
        help=f"List the hosts of {_SECTION} hosts as the slot pool sees them: name, slots, slot profile",
        func=lazy_load_command(f"{_COMMANDS}.hosts"),
        args=(ARG_FORMAT, ARG_VERBOSE),
    ),
)


def get_cli_commands() -> list[CLICommand]:
    """The ``airflow regionflow`` command group; named in get_provider_info()'s ``cli`` list."""
    return [GroupCommand(name="regionflow", help="regionflow's slot pool, DAG plans and hosts",
                         subcommands=REGIONFLOW_COMMANDS)]


__all__ = ["REGIONFLOW_COMMANDS", "get_cli_commands"]
