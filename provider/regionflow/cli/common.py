"""What several `regionflow` commands share: the cluster and ``--store-url`` options, ``--mode``, whole
numbers, and printing a result as text or as the one JSON document.

Building the parser imports this module, so it imports only the standard library and light regionflow
modules at its top; the rest is imported where it is used.
"""
from __future__ import annotations

import argparse
import json
import os
from typing import TYPE_CHECKING, Any

from ..core.errors import SpecError
from ..output import print_document

if TYPE_CHECKING:
    from ..core.modes import ExchangeMode
    from ..scheduling.hosts import Cluster

MODES_HELP = "all-blocking | forward-pipelined-only (default) | pointwise-pipelined-only | all-pipelined"
# regionflow.store.engine.STORE_URL_VARIABLE, spelled here: importing regionflow.store imports SQLAlchemy,
# which a parser's help does not need (tests/test_cli_imports.py checks that the two agree)
STORE_URL_VARIABLE = "AIRFLOW__REGIONFLOW__STORE_URL"
HOSTS_VARIABLE = "AIRFLOW__REGIONFLOW__HOSTS"
BIND_ADDRESS_VARIABLE = "AIRFLOW__REGIONFLOW__BIND_ADDRESS"


def add_bind_address_option(parser: argparse.ArgumentParser) -> None:
    """``--bind-address IP``; `bind_address_from_args` reads and checks it."""
    parser.add_argument("--bind-address", default=None, metavar="IP",
                        help="this machine's address that the drivers of hosts whose master is on another machine "
                             f"bind (default: ${BIND_ADDRESS_VARIABLE}, else 127.0.0.1)")


def bind_address_from_args(args: argparse.Namespace, cluster: Cluster) -> str:
    """``--bind-address`` (else ``$AIRFLOW__REGIONFLOW__BIND_ADDRESS``, else 127.0.0.1), refused as
    ``[regionflow] bind_address`` is (not this machine's, every interface, loopback for a master elsewhere)."""
    from ..spark.launch.placement import bind_address_problems

    address = args.bind_address or os.environ.get(BIND_ADDRESS_VARIABLE, "").strip() or "127.0.0.1"
    problem = bind_address_problems(cluster, address)
    if problem is not None:
        raise SpecError(problem.replace("[regionflow] bind_address", "--bind-address"))
    return address


def add_cluster_options(parser: argparse.ArgumentParser) -> None:
    """``--slots N`` or ``--hosts SPEC``; `cluster_from_args` reads them."""
    cluster = parser.add_mutually_exclusive_group()
    cluster.add_argument("--slots", type=int, default=None, help="one local host with N slots (default: CPU count)")
    cluster.add_argument("--hosts", default=None,
                         help="host spec, as [regionflow] hosts, e.g. 'a:slots=1,affinity=0;b:slots=1,affinity=1'")


def cluster_from_args(args: argparse.Namespace) -> Cluster:
    """The cluster of ``--hosts``, else one local host with ``--slots`` slots (default: the CPU count)."""
    from ..scheduling.hosts import Cluster
    from ..spark.launch.targets import parse_cluster

    if args.slots is not None and args.slots < 1:
        raise SpecError(f"--slots is {args.slots}; give at least 1 slot")
    if args.hosts is not None:
        if not args.hosts.strip():
            raise SpecError("--hosts is empty; give a host spec like 'a:slots=2;b:slots=2', or leave --hosts out "
                            "for one local host")
        return parse_cluster(args.hosts)
    return Cluster.local_default(args.slots)


def add_store_url_option(parser: argparse.ArgumentParser) -> None:
    """``--store-url``, read by `store_url_from_args`."""
    parser.add_argument("--store-url", default=None,
                        help=f"regionflow's store (default: ${STORE_URL_VARIABLE}, else "
                             "sqlite:///$AIRFLOW_HOME/regionflow.db)")


def store_url_from_args(args: argparse.Namespace) -> str:
    """The store of ``--store-url``, else ``$AIRFLOW__REGIONFLOW__STORE_URL``, else the default one."""
    from ..store import default_url

    url: str = args.store_url or os.environ.get(STORE_URL_VARIABLE) or default_url()
    return url


def mode_option(text: str | None, default: ExchangeMode | None = None) -> ExchangeMode | None:
    """The ``--mode`` option: `default` when not given (None: the job's own mode); an empty value is an error."""
    from ..core.modes import ExchangeMode

    if text is None:
        return default
    if not text.strip():
        raise SpecError("--mode is empty; give one of " + ", ".join(m.value for m in ExchangeMode)
                        + ", or leave --mode out")
    return ExchangeMode.parse(text)


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be at least 1")
    return value


def print_result(result: Any, output_format: str) -> None:
    """`result` as the one JSON document, else as text (a dict: one ``key: value`` line each, nested indented)."""
    if output_format == "json":
        print_document(json.dumps(result, indent=2))
    elif isinstance(result, str):
        print(result)
    else:
        print(_as_text(result))


def _as_text(data: dict[str, Any], indent: str = "") -> str:
    lines = []
    for key, value in data.items():
        if isinstance(value, dict):
            lines.append(f"{indent}{key}:")
            lines.append(_as_text(value, indent + "  "))
        else:
            lines.append(f"{indent}{key}: {value}")
    return "\n".join(lines)


__all__ = ["HOSTS_VARIABLE", "MODES_HELP", "STORE_URL_VARIABLE", "add_cluster_options", "add_store_url_option",
           "cluster_from_args", "mode_option", "positive_int", "print_result", "store_url_from_args"]
