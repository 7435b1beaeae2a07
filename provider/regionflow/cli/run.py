"""``regionflow run``: a job end to end on this machine with real Spark submissions (or, with
``--reference``, as one plain PySpark program). PySpark and the runner are imported when it runs."""
from __future__ import annotations

import argparse
import os
from typing import Any

from ..core.errors import SpecError
from .common import (
    MODES_HELP,
    add_bind_address_option,
    add_cluster_options,
    bind_address_from_args,
    cluster_from_args,
    mode_option,
    positive_int,
    print_result,
)


def register(commands: Any) -> None:
    """Register ``run`` on the CLI's subcommands."""
    run = commands.add_parser("run", help="run a job end to end on this machine with real Spark submissions")
    run.add_argument("job", help="package.module:attribute naming a JobGraph (or a job spec file whose "
                                 "vertices name their 'fn')")
    run.add_argument("--mode", default=None, help=MODES_HELP)
    add_cluster_options(run)
    run.add_argument("--data-dir", default=None, help="partition store and relative sink paths (default: a temp dir)")
    run.add_argument("--max-shards", type=positive_int, default=1,
                     help="Spark submissions per logical region at most (default 1)")
    run.add_argument("--retries", type=int, default=2, help="retries of a failed unit (default 2)")
    run.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="Spark conf for every submission")
    run.add_argument("--backend", choices=("session", "submit"), default="session",
                     help="session (default): one Spark Connect server per host, started for the run, each "
                          "attempt a client session on it; submit: one spark-submit per attempt")
    run.add_argument("--reference", action="store_true",
                     help="run the vertex functions as one plain PySpark program (the ground truth)")
    run.add_argument("--logical-date", default=None, metavar="DATE",
                     help="the run's logical date (ctx.logical_date, {{ ds }}), ISO, UTC unless a zone is given "
                          "(default: none, and ctx.ds is None)")
    run.add_argument("--data-interval", nargs=2, default=None, metavar=("START", "END"),
                     help="the run's data interval (default: [logical date, logical date])")
    run.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                     help="a run param (ctx.params, {{ params.KEY }}); the value is JSON: n=3, name='\"x\"'")
    add_bind_address_option(run)
    run.add_argument("--format", choices=("text", "json"), default="text")
    run.set_defaults(handler=run_run)


def run_run(args: argparse.Namespace) -> int:
    import tempfile
    import time

    started = time.monotonic()  # every progress line counts from here

    from ..core.adaptive import decided, decided_plan
    from ..core.graph import load_job
    from ..core.modes import DEFAULT_MODE
    from ..core.run_context import cli_context
    from ..units.reference import run_reference
    from ..units.runner import LocalRunner, RunOptions

    job_reference = os.path.abspath(args.job) if os.path.exists(args.job) else args.job
    mode = mode_option(args.mode, DEFAULT_MODE)
    cluster = cluster_from_args(args)
    plan = decided_plan(load_job(job_reference), cluster.total_slots, mode)
    decisions = decided(plan.graph)
    if args.retries < 0:
        raise SpecError(f"--retries is {args.retries}; give 0 or more")
    context = cli_context(args.logical_date, args.data_interval, args.param, dag_id=plan.graph.name)
    data_dir = args.data_dir or tempfile.mkdtemp(prefix="regionflow-")
    progress = print  # with --format json, `main` sends it to stderr
    options = RunOptions(data_dir=os.path.abspath(data_dir) if "://" not in data_dir else data_dir,
                         cluster=cluster, max_shards=args.max_shards, retries=args.retries,
                         job_conf=parse_conf(args.conf), progress=progress, backend=args.backend,
                         clock_origin=started, context=context, bind_address=bind_address_from_args(args, cluster))
    if decisions:
        progress(f"[{time.monotonic() - started:7.1f}s] adaptive parallelism for {cluster.total_slots} slot(s): "
                 + ", ".join(f"{name}={value}" for name, value in decisions.items()))
    if args.reference:
        summary = run_reference(job_reference, plan, options)
    else:
        summary = LocalRunner(job_reference, plan, options).run()
    print_result(summary.to_dict() if args.format == "json" else summary.to_text(), args.format)
    return 0


def parse_conf(items: list[str]) -> dict[str, str]:
    """``--conf KEY=VALUE`` options as a dict."""
    conf = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise SpecError(f"--conf {item!r} must look like KEY=VALUE, e.g. spark.sql.shuffle.partitions=4")
        conf[key.strip()] = value
    return conf


__all__ = ["parse_conf", "register", "run_run"]
