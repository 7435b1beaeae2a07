"""``regionflow bench topology|pool|schedule``: benchmarks that print their figures, with the speed of
this machine (`regionflow.bench.machine`). Each benchmark's module is imported when it runs."""
from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable
from typing import Any

from .common import positive_int, print_result

# per bench kind: where its function is (imported when run), and its absolute figures that are also
# printed as estimates for the quiet box (`bench.machine`): per-second rates, then durations
BENCHES: dict[str, tuple[str, str, tuple[str, ...], tuple[str, ...]]] = {
    "topology": ("regionflow.bench.topology", "bench_topology", (), ("build_ms",)),
    "pool": ("regionflow.scheduling.pool_bench", "bench_pool", ("decisions_per_s",), ()),
    "schedule": ("regionflow.scheduling.simulate", "bench_schedule", (), ("schedule_wall_s", "plan_wall_s")),
}


def register(commands: Any) -> None:
    """Register ``bench topology|pool|schedule`` on the CLI's subcommands."""
    bench = commands.add_parser("bench", help="benchmarks that print their figures")
    kinds = bench.add_subparsers(title="benchmarks")

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


def bench_handler(kind: str) -> Callable[[argparse.Namespace], int]:
    """The handler of ``bench KIND``: the benchmark's function with the command's options, its figures
    printed with the machine's speed."""
    def handler(args: argparse.Namespace) -> int:
        from ..bench.machine import with_machine_speed

        options = {k: v for k, v in vars(args).items() if k not in ("handler", "format", "debug")}
        module, function, rates, durations = BENCHES[kind]
        bench = getattr(importlib.import_module(module), function)
        print_result(with_machine_speed(lambda: bench(**options), rates, durations), args.format)
        return 0

    return handler


__all__ = ["BENCHES", "bench_handler", "register"]
