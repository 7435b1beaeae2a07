"""The slot pool's speed as shipped (pure Python) and compiled from the same source with mypyc.

Usage: .venv/bin/python benchmarks/pool_compiled.py [--repeats 5] [--bulks 100000]

Issue 17 asks for >= 100k pool decisions/s (`python benchmarks/micro.py pool`). The pool is pure Python, as the
guide wants `scheduling/` to be. This benchmark measures what compiling it would give, without
changing what is installed: it copies the `regionflow` sources to a scratch directory, compiles the
pool's internal modules there with mypyc (mypy's compiler, in the [test] extra; it needs gcc and the
Python headers), and runs the same workload (`rfbench.pool`, the default
`python benchmarks/micro.py pool` cluster and bulks) in fresh interpreters, alternating the pure and the
compiled copy, `--repeats` times each. The public facade (`pool.py`) and the modules that validate
user input (`blocklist.py`, `pool_bulks.py`) stay interpreted: mypyc checks argument types at
run time and would turn the pool's errors that name the fix into bare TypeErrors.

Printed: the median decisions/s of each and their ratio, the compile time, and the machine probe.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import regionflow
from rfbench.machine import MachineSpeed

BENCHMARKS = os.path.dirname(os.path.abspath(__file__))
COMPILED = ["capacity", "pool_pass", "pool_grants", "pool_queue", "pool_placement", "requirements"]

RUN = """
import json, sys
from regionflow.scheduling import pool_pass
from rfbench.pool import bench_pool
compiled = not pool_pass.__file__.endswith(".py")
result = bench_pool(bulks=int(sys.argv[1]), baseline_bulks=0)
print(json.dumps({"compiled": compiled, "decisions_per_s": result["decisions_per_s"]}))
"""


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--bulks", type=int, default=100_000)
    args = parser.parse_args()
    scratch = tempfile.mkdtemp(prefix="rf-pool-mypyc-")
    try:
        package = os.path.dirname(os.path.abspath(regionflow.__file__))
        shutil.copytree(package, os.path.join(scratch, "regionflow"),
                        ignore=shutil.ignore_patterns("__pycache__", "*.so", "static"))
        began = time.monotonic()
        modules = [os.path.join("regionflow", "scheduling", f"{name}.py") for name in COMPILED]
        built = subprocess.run([sys.executable, "-m", "mypyc", *modules], cwd=scratch, capture_output=True,
                               text=True)
        compile_s = time.monotonic() - began
        if built.returncode != 0:
            print(f"mypyc failed (it needs mypy from the [test] extra, gcc and the Python headers):\n"
                  f"{built.stdout[-2000:]}{built.stderr[-2000:]}", file=sys.stderr)
            return 1
        figures: dict[str, list[int]] = {"pure": [], "compiled": []}
        for _ in range(args.repeats):
            for kind, path in (("pure", None), ("compiled", scratch)):
                result = _run(path, args.bulks)
                if result["compiled"] != (kind == "compiled"):
                    raise RuntimeError(f"the {kind} run imported the wrong copy of the pool")
                figures[kind].append(result["decisions_per_s"])
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    pure, compiled = (statistics.median(figures[kind]) for kind in ("pure", "compiled"))
    print(json.dumps({"bulks": args.bulks, "compiled_modules": COMPILED, "compile_s": round(compile_s, 1),
                      "pure_decisions_per_s": figures["pure"], "compiled_decisions_per_s": figures["compiled"],
                      "pure_median": pure, "compiled_median": compiled,
                      "compiled_over_pure": round(compiled / pure, 2),
                      "machine": MachineSpeed.probe().to_dict()}, indent=2))
    return 0


def _run(pythonpath: str | None, bulks: int) -> dict:
    env = dict(os.environ)
    # rfbench (benchmarks/, this script's folder) for the workload; the compiled copy of regionflow before it
    paths = [pythonpath] if pythonpath else []
    env["PYTHONPATH"] = os.pathsep.join([*paths, BENCHMARKS, *filter(None, [env.get("PYTHONPATH")])])
    done = subprocess.run([sys.executable, "-c", RUN, str(bulks)], env=env, capture_output=True, text=True,
                          check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    sys.exit(main())
