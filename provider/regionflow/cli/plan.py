"""``regionflow plan`` (a job's pipelined regions) and ``regionflow simulate`` (jobs on a simulated cluster
with the real scheduler). `plan_output` is also what ``airflow regionflow plan`` prints."""
from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from ..output import print_document
from .common import MODES_HELP, add_cluster_options, cluster_from_args, mode_option, positive_int, print_result

if TYPE_CHECKING:
    from ..core.graph import JobGraph
    from ..core.modes import ExchangeMode

EXIT_INCOMPLETE = 1  # simulate: the jobs could not complete (deadlock, rejected bulk)


def register(commands: Any) -> None:
    """Register ``plan`` and ``simulate`` on the CLI's subcommands."""
    plan = commands.add_parser("plan", help="print the pipelined regions of a job")
    plan.add_argument("job", help="job spec JSON file, package.module:attribute naming a JobGraph, or a DAG file")
    plan.add_argument("--dag-id", default=None, help="with a DAG file: which DAG (default: its only regionflow DAG)")
    plan.add_argument("--mode", default=None, help=MODES_HELP)
    plan.add_argument("--format", choices=("text", "json"), default="text")
    plan.add_argument("--inputs", action="store_true", help="also list the producer subtasks each subtask reads")
    plan.add_argument("--max-shards", type=positive_int, default=1,
                      help="shards per logical region, as `run --max-shards` (JSON: whether adaptive vertices are "
                           "decided again at grant time depends on it)")
    plan.set_defaults(handler=run_plan)

    simulate = commands.add_parser("simulate", help="run jobs on a simulated cluster with the real scheduler")
    simulate.add_argument("jobs", nargs="+", metavar="JOB", help="job spec files or module:attribute references")
    simulate.add_argument("--mode", default=None, help=MODES_HELP)
    add_cluster_options(simulate)
    simulate.add_argument("--durations", default=None,
                          help="per-vertex subtask durations, e.g. 'A=2,B=0.5' (default 1.0)")
    simulate.add_argument("--allocator", choices=("fifo-bulk", "per-task"), default="fifo-bulk")
    simulate.add_argument("--format", choices=("text", "json"), default="text")
    simulate.set_defaults(handler=run_simulate)


def run_plan(args: argparse.Namespace) -> int:
    from ..core.graph import load_job

    reference = f"{args.job}#{args.dag_id}" if args.dag_id else args.job
    graph = load_job(reference)
    for line in resource_name_warnings(graph):
        print(f"regionflow: warning: {line}", file=sys.stderr)
    print_document(plan_output(graph, mode_option(args.mode), args.format, inputs=args.inputs,
                               max_shards=args.max_shards))
    return 0


def resource_name_warnings(graph: JobGraph) -> list[str]:
    """One line per vertex whose extended resources look like typos of known names (``cpus``): the plan
    does not know the cluster, so a warning; ``regionflow run`` and the executor refuse such a request,
    as no host declares it."""
    from ..core.resources import describe_suspicious, suspicious_resources

    lines = []
    for vertex in graph.vertices.values():
        suspects = suspicious_resources(name for name, _ in vertex.resources.extended)
        if suspects:
            lines.append(f"vertex {vertex.name!r}: {describe_suspicious(suspects)}; it is taken as an extended "
                         f"resource that only a host declaring it offers")
    return lines


def plan_output(graph: JobGraph, mode: ExchangeMode | None = None, output_format: str = "text",
                inputs: bool = False, max_shards: int | None = 1) -> str:
    """What ``plan`` prints for a job: its pipelined regions under `mode` (None: the job's own mode),
    as text or JSON; with `inputs`, the producer subtasks each subtask reads. ``airflow regionflow
    plan`` prints the same for a DAG's job."""
    from ..core.plan import Plan
    from ..plan_document import plan_document

    plan = Plan(graph, mode)
    if output_format == "json":
        return json.dumps(plan_document(plan, inputs=inputs, max_shards=max_shards), indent=2)
    return plan.to_text(inputs=inputs)


def run_simulate(args: argparse.Namespace) -> int:
    from ..core.graph import load_job
    from ..core.modes import DEFAULT_MODE
    from ..core.plan import Plan
    from ..scheduling.simulate import parse_durations, simulate

    mode = mode_option(args.mode, DEFAULT_MODE)
    plans = [Plan(load_job(job), mode) for job in args.jobs]
    cluster = cluster_from_args(args)
    result = simulate(plans, cluster, durations=parse_durations(args.durations), allocator=args.allocator)
    print_result(result.to_dict() if args.format == "json" else result.to_text(), args.format)
    return 0 if result.completed else EXIT_INCOMPLETE


__all__ = ["EXIT_INCOMPLETE", "plan_output", "register", "resource_name_warnings", "run_plan", "run_simulate"]
