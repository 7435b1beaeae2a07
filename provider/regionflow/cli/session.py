"""``regionflow session start|stop|status``: the Spark Connect servers of a cluster's hosts.

For a real installation these run beside Airflow, e.g. under systemd (see docs/deployment.md); the embedded
stack and ``regionflow run`` start and stop their own. `regionflow.spark.servers.connect` imports no PySpark.
"""
from __future__ import annotations

import argparse
import json
from typing import Any

from ..output import print_document
from ..spark.servers.connect import DEFAULT_BASE_PORT, DEFAULT_START_TIMEOUT_S
from ..spark.servers.session_servers import SessionServers, default_state_dir
from .common import add_bind_address_option, add_cluster_options, bind_address_from_args, cluster_from_args

EXIT_DOWN = 1  # `status`: some server is not up


def register(commands: Any) -> None:
    """Register ``session start|stop|status`` on the CLI's subcommands (the cluster options are shared
    with ``simulate`` and ``run``)."""
    session = commands.add_parser("session", help="long-lived Spark Connect servers, one per host")
    actions = session.add_subparsers(title="actions")
    helps = {"start": "start the servers that are not up and wait until they answer",
             "stop": "stop the servers (their whole process groups)",
             "status": "show each server: up, starting, silent (hung or stopped) or down (exit 1 if any is not up)"}
    for action, text in helps.items():
        parser = actions.add_parser(action, help=text)
        parser.add_argument("--host", action="append", default=None, metavar="H",
                            help="a host of the cluster (repeat for several; default: every host)")
        add_cluster_options(parser)
        parser.add_argument("--state-dir", default=None,
                            help="pid/port files and server logs (default: $AIRFLOW_HOME/regionflow-sessions)")
        parser.add_argument("--base-port", type=int, default=DEFAULT_BASE_PORT,
                            help=f"host i of the cluster listens on 127.0.0.1:BASE+i (default {DEFAULT_BASE_PORT})")
        parser.add_argument("--format", choices=("text", "json"), default="text")
        if action == "start":
            add_bind_address_option(parser)
            parser.add_argument("--timeout", type=float, default=DEFAULT_START_TIMEOUT_S,
                                help="seconds to wait for each server to answer")
        parser.set_defaults(handler=run_session, action=action)


def run_session(args: argparse.Namespace) -> int:
    cluster = cluster_from_args(args)
    address = bind_address_from_args(args, cluster) if args.action == "start" else "127.0.0.1"
    servers = SessionServers(cluster, args.state_dir or default_state_dir(), args.base_port, bind_address=address)
    document = session_document(servers, args.action, args.host, getattr(args, "timeout", DEFAULT_START_TIMEOUT_S))
    if args.format == "json":
        print_document(json.dumps(document["servers"], indent=2))
    else:
        print(session_text(document))
    return session_exit(document)


def session_document(servers: SessionServers, action: str, hosts: list[str] | None,
                     timeout: float = DEFAULT_START_TIMEOUT_S) -> dict[str, Any]:
    """Carry out `action` (start, stop, status) on the servers of `hosts` (None: every host): their states
    afterwards (``servers``) and, for stop, which were running (``stopped``)."""
    stopped = None
    if action == "start":
        statuses = servers.start(hosts, timeout=timeout)
    elif action == "stop":
        stopped = servers.stop(hosts)
        statuses = servers.status(hosts)
    else:
        statuses = servers.checked_status(hosts)
    return {"action": action, "servers": [vars(status) for status in statuses], "stopped": stopped}


def session_text(document: dict[str, Any]) -> str:
    """`session_document` as lines: what was stopped, then a line per server."""
    lines = [] if document["stopped"] is None else [f"stopped: {', '.join(document['stopped']) or 'none was running'}"]
    for status in document["servers"]:
        detail = status["cause"] or (f"pid {status['pid']}" if status["pid"] else "")
        lines.append(f"{status['host']}: {status['state']} at {status['url']} ({detail})")
    return "\n".join(lines)


def session_exit(document: dict[str, Any]) -> int:
    """`status` exits 1 when some server is not up; the other actions 0."""
    if document["action"] == "status" and not all(status["state"] == "up" for status in document["servers"]):
        return EXIT_DOWN
    return 0


__all__ = ["register", "run_session", "session_document", "session_exit", "session_text"]
