"""Airflow's bundled example DAGs under the RegionExecutor and LocalExecutor at high parallelism.

One embedded stack (api-server, scheduler, dag-processor, triggerer; SQLite). For each repetition and
each executor the scheduler is restarted with that executor, every chosen example DAG
(`regionflow.testing.conformance.BUNDLED_EXAMPLES`) is triggered at once, and the wall time from the first
trigger to the last run's end is taken. Printed per executor: runs, scheduler crashes (must be 0),
runs whose states differ from LocalExecutor's, and the median wall time, with the ratio to LocalExecutor.

The slot pool gets as many slots as ``[core] parallelism`` (one host), so both executors may run the
same number of tasks at once and the ratio is the executor's overhead, not a smaller gate.

Usage: .venv/bin/python benchmarks/conformance.py [--parallelism 32] [--repeats 3]
"""
from __future__ import annotations

import argparse
import statistics
import tempfile

from regionflow.testing import EmbeddedAirflow
from regionflow.testing.conformance import (
    EXAMPLE_DAG_IDS,
    LOCAL_EXECUTOR,
    REGION_EXECUTOR,
    STACK_CONFIG,
    copy_examples,
    differences,
    run_examples,
)


def scheduler_process(stack: EmbeddedAirflow):
    [component] = [c for c in stack._running if c.name == "scheduler"]
    return component.process


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parallelism", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="rf-conformance-") as home:
        copy_examples(f"{home}/dags")
        options = {"hosts": f"localhost:slots={args.parallelism}", "data_dir": f"{home}/data",
                   "backend": "submit"}  # Airflow's examples run no region task: no Spark servers
        stack = EmbeddedAirflow(home, f"{home}/dags", regionflow_options=options, extra_config=STACK_CONFIG,
                                parallelism=args.parallelism)
        figures: dict[str, dict[str, list]] = {name: {"seconds": [], "crashes": [], "runs": [], "differ": []}
                                               for name in (REGION_EXECUTOR, LOCAL_EXECUTOR)}
        reference = None
        with stack.start():
            for repeat in range(args.repeats):
                for executor in (LOCAL_EXECUTOR, REGION_EXECUTOR):
                    stack.restart("scheduler", env={"AIRFLOW__CORE__EXECUTOR": executor})
                    scheduler = scheduler_process(stack)
                    outcome, seconds = run_examples(stack, timeout=900)
                    crashed = scheduler.poll() is not None
                    if executor == LOCAL_EXECUTOR and reference is None:
                        reference = outcome
                    differ = differences(reference or outcome, outcome)
                    row = figures[executor]
                    row["seconds"].append(seconds)
                    row["crashes"].append(int(crashed))
                    row["runs"].append(len(outcome))
                    row["differ"].append(len(differ))
                    print(f"repeat {repeat + 1} {executor:40s} {seconds:6.1f} s  runs {len(outcome)}  "
                          f"scheduler crashed: {crashed}  differences from LocalExecutor: {differ or 'none'}",
                          flush=True)
        local = statistics.median(figures[LOCAL_EXECUTOR]["seconds"])
        print(f"\n{len(EXAMPLE_DAG_IDS)} example DAGs, parallelism {args.parallelism}, {args.repeats} repeats")
        for executor, row in figures.items():
            median = statistics.median(row["seconds"])
            print(f"{executor:40s} runs {sum(row['runs'])}  crashes {sum(row['crashes'])}  "
                  f"differing task states {sum(row['differ'])}  median wall {median:.1f} s  "
                  f"({median / local:.2f}x LocalExecutor)")


if __name__ == "__main__":
    main()
