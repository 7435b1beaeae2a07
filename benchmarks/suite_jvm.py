"""What the test suite's JVM options save (tests/conftest.py sets ``JAVA_TOOL_OPTIONS`` to ``SUITE_JAVA_OPTIONS``,
from tests/suite_jvm_options.py), and what its class archive saves on top (``SPARK_SUBMIT_OPTS`` mapping
tests/suite_jvm_archive.py's archive, measured when `make jvm-archive` has written it):
CPU seconds and wall time of what a heavy test module does with Spark, once with the JVM's default tiered
compilation, once with the suite's options and once with those and the archive, alternating, in the same
invocation.

One round is: start a Spark Connect server (4 slots, as the suite's session server), run the example job's plain
PySpark reference on it ``--jobs`` times (as the reference fixture and the vertex-level tests do), stop it. CPU
seconds are the whole machine's busy time over the round (``/proc/stat``: the server's JVM, the launcher JVM in
front of it and this client), so run it on an otherwise idle box; the CPU probe's figure is printed with the
result. Figures are medians of ``--repeats`` rounds per option set; the ratios are the suite's over the default's,
and the archive's over the suite's.

Usage: .venv/bin/python benchmarks/suite_jvm.py [--repeats 3] [--jobs 3] [--format json]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

TESTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests")


def busy_seconds() -> float:
    """The machine's CPU time spent so far, all cores, in seconds (user, nice, system, irq, softirq, steal)."""
    with open("/proc/stat", encoding="ascii") as stat:
        fields = [int(value) for value in stat.readline().split()[1:]]
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def one_round(jobs: int) -> dict:
    """In this process: a server start, `jobs` reference runs on it, its stop; CPU and wall seconds of each part."""
    from suite_jvm_archive import server_round

    points = {"begin": (busy_seconds(), time.monotonic())}

    def mark(part: str) -> None:
        points[part] = (busy_seconds(), time.monotonic())

    rows = server_round(tempfile.mkdtemp(prefix="rf-bench-suite-jvm-"), 4, jobs, mark)
    (cpu, wall), (started_cpu, started_wall), (ran_cpu, ran_wall) = points["begin"], points["started"], points["ran"]
    return {"start_cpu_s": started_cpu - cpu, "start_wall_s": started_wall - wall,
            "jobs_cpu_s": ran_cpu - started_cpu, "jobs_wall_s": ran_wall - started_wall, "rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=3)
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # one round, in this process
    args = parser.parse_args()
    sys.path.insert(0, TESTS)
    if args.one:
        print(json.dumps(one_round(args.jobs)))
        return
    import suite_jvm_archive
    from suite_jvm_options import SUITE_JAVA_OPTIONS

    from rfbench.machine import cpu_unit_times

    archive = suite_jvm_archive.built_submit_options()
    if archive is None:
        print("no class archive: `make jvm-archive` first to measure it too", file=sys.stderr)
    kinds = {"default": ("", ""), "suite": (SUITE_JAVA_OPTIONS, "")}
    if archive:
        kinds["suite+archive"] = (SUITE_JAVA_OPTIONS, archive)
    rounds: dict[str, list[dict]] = {kind: [] for kind in kinds}
    for repeat in range(args.repeats):
        for kind, (options, submit_options) in kinds.items():  # alternating: a slower stretch hits all alike
            env = {key: value for key, value in os.environ.items()
                   if key not in ("JAVA_TOOL_OPTIONS", "SPARK_SUBMIT_OPTS")}
            if options:
                env["JAVA_TOOL_OPTIONS"] = options
            if submit_options:
                env["SPARK_SUBMIT_OPTS"] = submit_options
            print(f"round {repeat + 1}/{args.repeats}: {kind} JVM options ...", file=sys.stderr, flush=True)
            done = subprocess.run([sys.executable, __file__, "--one", "--jobs", str(args.jobs)], check=True,
                                  stdout=subprocess.PIPE, text=True, env=env)
            rounds[kind].append(json.loads(done.stdout.strip().splitlines()[-1]))
    figures = {kind: {key: round(statistics.median(r[key] for r in kept), 2)
                      for key in ("start_cpu_s", "start_wall_s", "jobs_cpu_s", "jobs_wall_s")}
               for kind, kept in rounds.items()}
    result = {
        "suite_java_options": SUITE_JAVA_OPTIONS, "jobs_per_round": args.jobs, "repeats": args.repeats,
        "cpu_unit_ms": round(statistics.median(cpu_unit_times()), 1), "medians": figures,
        "ratio_suite_to_default": {key: round(figures["suite"][key] / figures["default"][key], 2)
                                   for key in figures["default"]},
        "ratio_archive_to_suite": {key: round(figures["suite+archive"][key] / figures["suite"][key], 2)
                                   for key in figures["suite"]} if archive else None,
        "same_rows": len({tuple(map(tuple, r["rows"])) for kept in rounds.values() for r in kept}) == 1,
    }
    if args.format == "json":
        print(json.dumps(result))
        return
    print(f"CPU probe {result['cpu_unit_ms']} ms; {args.jobs} reference runs per round, medians of {args.repeats}")
    for key, ratio in result["ratio_suite_to_default"].items():
        line = (f"  {key:13} default {figures['default'][key]:6.2f}  suite {figures['suite'][key]:6.2f}  "
                f"ratio {ratio:.2f}")
        if archive:
            line += (f"  suite+archive {figures['suite+archive'][key]:6.2f}  "
                     f"ratio to suite {result['ratio_archive_to_suite'][key]:.2f}")
        print(line)
    print(f"  same rows in every round: {result['same_rows']}")


if __name__ == "__main__":
    main()
