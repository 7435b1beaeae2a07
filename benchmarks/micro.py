"""The core micro-benchmarks, printing their figures with the speed of this machine (`rfbench.machine`):

    python benchmarks/micro.py topology [--parallelism N] [--pattern all-to-all|pointwise]
                                        [--exchange blocking|pipelined] [--repeats N] [--naive-parallelism N]
    python benchmarks/micro.py pool [--bulks N] [--slots N] [--hosts N] [--seed N] [--baseline-bulks N]
    python benchmarks/micro.py schedule [--parallelism N] [--slots N]

each with ``--format text|json``; with ``--format json`` stdout carries exactly one JSON document and
everything else goes to stderr (`regionflow.output`). Each benchmark's module is imported when it runs.
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback
from collections.abc import Callable, Sequence

from regionflow.cli.common import positive_int, print_result
from regionflow.core.errors import RegionflowError
from regionflow.output import document_only

EXIT_USAGE = 2

# per bench kind: where its function is (imported when run), and its absolute figures that are also
# printed as estimates for the quiet box (`rfbench.machine`): per-second rates, then durations
BENCHES: dict[str, tuple[str, str, tuple[str, ...], tuple[str, ...]]] = {
    "topology": ("rfbench.topology", "bench_topology", (), ("build_ms",)),
    "pool": ("rfbench.pool", "bench_pool", ("decisions_per_s",), ()),
    "schedule": ("regionflow.scheduling.simulate", "bench_schedule", (), ("schedule_wall_s", "plan_wall_s")),
}


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``micro.py topology|pool|schedule``."""
    parser = argparse.ArgumentParser(prog="python benchmarks/micro.py",
                                     description="benchmarks that print their figures")
    parser.add_argument("--debug", action="store_true", help="with an error, also print its Python traceback")
    kinds = parser.add_subparsers(title="benchmarks")

    topology = kinds.add_parser("topology", help="execution topology + regions build time and memory")
    topology.add_argument("--parallelism", type=positive_int, default=10_000)
    topology.add_argument("--pattern", choices=("all-to-all", "pointwise"), default="all-to-all")
    topology.add_argument("--exchange", choices=("blocking", "pipelined"), default="blocking")
    topology.add_argument("--repeats", type=positive_int, default=5)
    topology.add_argument("--naive-parallelism", type=positive_int, default=None,
                          help="size of the naive one-object-per-edge baseline (default min(N, 2000))")
    topology.add_argument("--format", choices=("text", "json"), default="text")
    topology.set_defaults(handler=bench_handler("topology"))

    pool = kinds.add_parser("pool", help="FIFO bulk slot pool decisions per second")
    pool.add_argument("--bulks", type=positive_int, default=100_000)
    pool.add_argument("--slots", type=positive_int, default=1_000)
    pool.add_argument("--hosts", type=positive_int, default=100)
    pool.add_argument("--seed", type=int, default=0)
    pool.add_argument("--baseline-bulks", type=int, default=10_000,
                      help="bulks of the naive pool's run it is compared with (0: no baseline)")
    pool.add_argument("--format", choices=("text", "json"), default="text")
    pool.set_defaults(handler=bench_handler("pool"))

    schedule = kinds.add_parser("schedule", help="region scheduling strategy over a 2-vertex all-to-all job")
    schedule.add_argument("--parallelism", type=positive_int, default=10_000)
    schedule.add_argument("--slots", type=positive_int, default=1_000)
    schedule.add_argument("--format", choices=("text", "json"), default="text")
    schedule.set_defaults(handler=bench_handler("schedule"))
    return parser


def bench_handler(kind: str) -> Callable[[argparse.Namespace], int]:
    """The handler of ``KIND``: the benchmark's function with the command's options, its figures printed
    with the machine's speed."""
    def handler(args: argparse.Namespace) -> int:
        from rfbench.machine import with_machine_speed

        options = {k: v for k, v in vars(args).items() if k not in ("handler", "format", "debug")}
        module, function, rates, durations = BENCHES[kind]
        bench = getattr(importlib.import_module(module), function)
        print_result(with_machine_speed(lambda: bench(**options), rates, durations), args.format)
        return 0

    return handler


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
        if args.debug:
            traceback.print_exc()
        print(f"micro.py: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        # the reader (e.g. `| head`) went away: not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
