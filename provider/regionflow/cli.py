"""The `regionflow` command line: plan, simulate, run, bench, status, schema, session.

Every expected failure is a `RegionflowError`; the CLI prints its message (no traceback) and exits 2.
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import Any

from .core.adaptive import decided, decided_plan
from .core.errors import RegionflowError, SpecError
from .core.graph import JobGraph, load_job
from .core.modes import DEFAULT_MODE, ExchangeMode
from .core.plan import Plan
from .output import document_only, print_document
from .plan_document import plan_document

EXIT_USAGE = 2
EXIT_INCOMPLETE = 1  # simulate: the jobs could not complete (deadlock, rejected bulk)
MODES_HELP = "all-blocking | forward-pipelined-only (default) | pointwise-pipelined-only | all-pipelined"


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
    parser = argparse.ArgumentParser(prog="regionflow", description="Flink's batch scheduler for Airflow + Spark")
    parser.add_argument("--debug", action="store_true", help="with an error, also print its Python traceback")
    commands = parser.add_subparsers(title="commands")
    _add_plan(commands)
    _add_simulate(commands)
    _add_run(commands)
    _add_bench(commands)
    _add_schema(commands)
    from .gc_cli import add_gc
    from .session_cli import add_session
    from .status_cli import add_status
    from .store_cli import add_migrate_store

    add_status(commands, _add_cluster_options, _cluster_from_args)
    add_session(commands, _add_cluster_options, _cluster_from_args)
    add_gc(commands)
    add_migrate_store(commands)
    return parser


def _add_cluster_options(parser: argparse.ArgumentParser) -> None:
    cluster = parser.add_mutually_exclusive_group()
    cluster.add_argument("--slots", type=int, default=None, help="one local host with N slots (default: CPU count)")
    cluster.add_argument("--hosts", default=None,
                         help="host spec, as [regionflow] hosts, e.g. 'a:slots=1,affinity=0;b:slots=1,affinity=1'")


# ---- schema ---------------------------------------------------------------------------------------


def _add_schema(commands) -> None:
    schema = commands.add_parser("schema", help="print the JSON Schema of a job spec, a host list or the "
                                                "[regionflow] options (for editors and CI of your files)")
    schema.add_argument("kind", choices=("job", "hosts", "config"))
    schema.set_defaults(handler=run_schema)


def run_schema(args: argparse.Namespace) -> int:
    print(json.dumps(schema_of(args.kind), indent=2))
    return 0


def schema_of(kind: str) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of one input kind, from its declared model."""
    from .config import config_schema
    from .core.jobspec import JOB
    from .scheduling.hostspec import HOST

    dialect = {"$schema": "https://json-schema.org/draft/2020-12/schema"}
    if kind == "job":
        return dialect | JOB.json_schema()
    if kind == "hosts":
        return dialect | {"title": "hosts", "description": "[regionflow] hosts as JSON: a list of hosts (the text "
                          "form 'a:slots=2,cpu=2;b:2' names the same fields)", "type": "array",
                          "items": HOST.json_schema(), "minItems": 1}
    return dialect | config_schema()


# ---- plan -----------------------------------------------------------------------------------------


def _add_plan(commands) -> None:
    plan = commands.add_parser("plan", help="print the pipelined regions of a job")
    plan.add_argument("job", help="job spec JSON file, package.module:attribute naming a JobGraph, or a DAG file")
    plan.add_argument("--dag-id", default=None, help="with a DAG file: which DAG (default: its only regionflow DAG)")
    plan.add_argument("--mode", default=None, help=MODES_HELP)
    plan.add_argument("--format", choices=("text", "json"), default="text")
    plan.add_argument("--inputs", action="store_true", help="also list the producer subtasks each subtask reads")
    plan.add_argument("--max-shards", type=_positive_int, default=1,
                      help="shards per logical region, as `run --max-shards` (JSON: whether adaptive vertices are "
                           "decided again at grant time depends on it)")
    plan.set_defaults(handler=run_plan)


def run_plan(args: argparse.Namespace) -> int:
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
    from .core.resources import describe_suspicious, suspicious_resources

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
    plan = Plan(graph, mode)
    if output_format == "json":
        return json.dumps(plan_document(plan, inputs=inputs, max_shards=max_shards), indent=2)
    return plan.to_text(inputs=inputs)


# ---- simulate ---------------------------------------------------------------------------------------


def _add_simulate(commands) -> None:
    simulate = commands.add_parser("simulate", help="run jobs on a simulated cluster with the real scheduler")
    simulate.add_argument("jobs", nargs="+", metavar="JOB", help="job spec files or module:attribute references")
    simulate.add_argument("--mode", default=None, help=MODES_HELP)
    _add_cluster_options(simulate)
    simulate.add_argument("--durations", default=None,
                          help="per-vertex subtask durations, e.g. 'A=2,B=0.5' (default 1.0)")
    simulate.add_argument("--allocator", choices=("fifo-bulk", "per-task"), default="fifo-bulk")
    simulate.add_argument("--format", choices=("text", "json"), default="text")
    simulate.set_defaults(handler=run_simulate)


def run_simulate(args: argparse.Namespace) -> int:
    from .scheduling.simulate import parse_durations, simulate

    mode = mode_option(args.mode, DEFAULT_MODE)
    plans = [Plan(load_job(job), mode) for job in args.jobs]
    cluster = _cluster_from_args(args)
    result = simulate(plans, cluster, durations=parse_durations(args.durations), allocator=args.allocator)
    _print_result(result.to_dict() if args.format == "json" else result.to_text(), args.format)
    return 0 if result.completed else EXIT_INCOMPLETE


def _cluster_from_args(args: argparse.Namespace):
    from .scheduling.hosts import Cluster
    from .spark.targets import parse_cluster

    if args.slots is not None and args.slots < 1:
        raise SpecError(f"--slots is {args.slots}; give at least 1 slot")
    if args.hosts is not None:
        if not args.hosts.strip():
            raise SpecError("--hosts is empty; give a host spec like 'a:slots=2;b:slots=2', or leave --hosts out "
                            "for one local host")
        return parse_cluster(args.hosts)
    return Cluster.local_default(args.slots)


def mode_option(text: str | None, default: ExchangeMode | None = None) -> ExchangeMode | None:
    """The ``--mode`` option: `default` when not given (None: the job's own mode); an empty value is an error."""
    if text is None:
        return default
    if not text.strip():
        raise SpecError("--mode is empty; give one of " + ", ".join(m.value for m in ExchangeMode)
                        + ", or leave --mode out")
    return ExchangeMode.parse(text)


# ---- run ---------------------------------------------------------------------------------------------


def _add_run(commands) -> None:
    run = commands.add_parser("run", help="run a job end to end on this machine with real Spark submissions")
    run.add_argument("job", help="package.module:attribute naming a JobGraph (or a job spec file whose "
                                 "vertices name their 'fn')")
    run.add_argument("--mode", default=None, help=MODES_HELP)
    _add_cluster_options(run)
    run.add_argument("--data-dir", default=None, help="partition store and relative sink paths (default: a temp dir)")
    run.add_argument("--max-shards", type=_positive_int, default=1,
                     help="Spark submissions per logical region at most (default 1)")
    run.add_argument("--retries", type=int, default=2, help="retries of a failed unit (default 2)")
    run.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="Spark conf for every submission")
    run.add_argument("--backend", choices=("session", "submit"), default="session",
                     help="session (default): one Spark Connect server per host, started for the run, each "
                          "attempt a client session on it; submit: one spark-submit per attempt")
    run.add_argument("--reference", action="store_true",
                     help="run the vertex functions as one plain PySpark program (the ground truth)")
    run.add_argument("--format", choices=("text", "json"), default="text")
    run.set_defaults(handler=run_run)


def run_run(args: argparse.Namespace) -> int:
    import tempfile
    import time

    started = time.monotonic()  # every progress line counts from here

    from .spark.runner import LocalRunner, RunOptions, run_reference

    job_reference = os.path.abspath(args.job) if os.path.exists(args.job) else args.job
    mode = mode_option(args.mode, DEFAULT_MODE)
    cluster = _cluster_from_args(args)
    plan = decided_plan(load_job(job_reference), cluster.total_slots, mode)
    decisions = decided(plan.graph)
    if args.retries < 0:
        raise SpecError(f"--retries is {args.retries}; give 0 or more")
    data_dir = args.data_dir or tempfile.mkdtemp(prefix="regionflow-")
    progress = print  # with --format json, `main` sends it to stderr
    options = RunOptions(data_dir=os.path.abspath(data_dir) if "://" not in data_dir else data_dir,
                         cluster=cluster, max_shards=args.max_shards, retries=args.retries,
                         job_conf=_parse_conf(args.conf), progress=progress, backend=args.backend,
                         clock_origin=started)
    if decisions:
        progress(f"[{time.monotonic() - started:7.1f}s] adaptive parallelism for {cluster.total_slots} slot(s): "
                 + ", ".join(f"{name}={value}" for name, value in decisions.items()))
    if args.reference:
        summary = run_reference(job_reference, plan, options)
    else:
        summary = LocalRunner(job_reference, plan, options).run()
    _print_result(summary.to_dict() if args.format == "json" else summary.to_text(), args.format)
    return 0


def _parse_conf(items: list[str]) -> dict[str, str]:
    conf = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise SpecError(f"--conf {item!r} must look like KEY=VALUE, e.g. spark.sql.shuffle.partitions=4")
        conf[key.strip()] = value
    return conf


# ---- bench ---------------------------------------------------------------------------------------------


def _add_bench(commands) -> None:
    bench = commands.add_parser("bench", help="benchmarks that print their figures")
    kinds = bench.add_subparsers(title="benchmarks")

    topology = kinds.add_parser("topology", help="execution topology + regions build time and memory")
    topology.add_argument("--parallelism", type=_positive_int, default=10_000)
    topology.add_argument("--pattern", choices=("all-to-all", "pointwise"), default="all-to-all")
    topology.add_argument("--exchange", choices=("blocking", "pipelined"), default="blocking")
    topology.add_argument("--repeats", type=_positive_int, default=5)
    topology.add_argument("--naive-parallelism", type=_positive_int, default=None,
                          help="size of the naive one-object-per-edge baseline (default min(N, 2000))")
    topology.add_argument("--format", choices=("text", "json"), default="text")
    topology.set_defaults(handler=_bench_handler("topology"))

    pool = kinds.add_parser("pool", help="FIFO bulk slot pool decisions per second")
    pool.add_argument("--bulks", type=_positive_int, default=100_000)
    pool.add_argument("--slots", type=_positive_int, default=1_000)
    pool.add_argument("--hosts", type=_positive_int, default=100)
    pool.add_argument("--seed", type=int, default=0)
    pool.add_argument("--baseline-bulks", type=int, default=10_000,
                      help="bulks of the naive pool's run it is compared with (0: no baseline)")
    pool.add_argument("--format", choices=("text", "json"), default="text")
    pool.set_defaults(handler=_bench_handler("pool"))

    schedule = kinds.add_parser("schedule", help="region scheduling strategy over a 2-vertex all-to-all job")
    schedule.add_argument("--parallelism", type=_positive_int, default=10_000)
    schedule.add_argument("--slots", type=_positive_int, default=1_000)
    schedule.add_argument("--format", choices=("text", "json"), default="text")
    schedule.set_defaults(handler=_bench_handler("schedule"))


def _bench_handler(kind: str) -> Callable[[argparse.Namespace], int]:
    def handler(args: argparse.Namespace) -> int:
        from .bench.machine import with_machine_speed

        options = {k: v for k, v in vars(args).items() if k not in ("handler", "format", "debug")}
        module, function, rates, durations = _BENCHES[kind]
        bench = getattr(importlib.import_module(module, __package__), function)
        _print_result(with_machine_speed(lambda: bench(**options), rates, durations), args.format)
        return 0

    return handler


# per bench kind: where its function is (imported when run), and its absolute figures that are also
# printed as estimates for the quiet box (`bench.machine`): per-second rates, then durations
_BENCHES: dict[str, tuple[str, str, tuple[str, ...], tuple[str, ...]]] = {
    "topology": (".bench.topology", "bench_topology", (), ("build_ms",)),
    "pool": (".scheduling.pool_bench", "bench_pool", ("decisions_per_s",), ()),
    "schedule": (".scheduling.simulate", "bench_schedule", (), ("schedule_wall_s", "plan_wall_s")),
}


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be at least 1")
    return value


def _print_result(result: Any, output_format: str) -> None:
    if output_format == "json":
        print_document(json.dumps(result, indent=2))
    elif isinstance(result, str):
        print(result)
    else:
        print(_as_text(result))


def _as_text(data: dict, indent: str = "") -> str:
    lines = []
    for key, value in data.items():
        if isinstance(value, dict):
            lines.append(f"{indent}{key}:")
            lines.append(_as_text(value, indent + "  "))
        else:
            lines.append(f"{indent}{key}: {value}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
