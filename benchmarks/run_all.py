"""Run every benchmark and print its figures: `make bench` (the Spark and Airflow ones take minutes)."""
import subprocess
import sys

MICRO = [sys.executable, "benchmarks/micro.py"]  # topology | pool | schedule
COMMANDS = [
    [*MICRO, "topology", "--parallelism", "10000", "--pattern", "all-to-all", "--exchange", "blocking"],
    [*MICRO, "topology", "--parallelism", "10000", "--pattern", "all-to-all", "--exchange", "pipelined"],
    [*MICRO, "topology", "--parallelism", "100000", "--pattern", "all-to-all", "--exchange", "blocking",
     "--repeats", "3"],
    [*MICRO, "pool"],
    [sys.executable, "benchmarks/pool_compiled.py", "--repeats", "3"],  # needs gcc and the Python headers
    [*MICRO, "schedule", "--parallelism", "10000"],
    [sys.executable, "-c", "from regionflow.spark.data.descriptors import bench_descriptors as b; import json; "
                           "print(json.dumps(b(), indent=2))"],
    [sys.executable, "benchmarks/sizing.py"],
    [sys.executable, "benchmarks/shared_pool.py"],
    [sys.executable, "benchmarks/spark_modes.py"],
    [sys.executable, "benchmarks/blocking_floor.py", "--sf", "0.1", "--repeats", "3", "--queries", "1,3,9,18"],
    [sys.executable, "benchmarks/key_groups.py", "--repeats", "7"],
    [sys.executable, "benchmarks/per_run_decision.py", "--repeats", "3"],
    [sys.executable, "benchmarks/keygroup_writes.py"],
    [sys.executable, "benchmarks/airflow_executor.py"],
    [sys.executable, "benchmarks/conformance.py"],
    [sys.executable, "benchmarks/speculation.py"],
    [sys.executable, "benchmarks/machines.py"],  # root: machines are network namespaces
    [sys.executable, "benchmarks/soak.py", "--duration", "600", "--restart-every", "200"],  # the 1-hour run: no args
]

if __name__ == "__main__":
    for command in COMMANDS:
        print("$", " ".join(command), flush=True)
        subprocess.run(command, check=True)
