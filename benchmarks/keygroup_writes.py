"""Where the key groups' write cost goes (issue 50): one producer partition of the example's orders written as
one directory (what a producer of a consumer fixed at one shard writes: no hash) against the key-grouped
layouts: 8 key-group directories with ``partitionBy`` (Flink's hash shuffle: a file per subpartition), with
three Spark settings that might make it cheaper (append instead of overwrite, concurrent output writers instead
of the planned sort, ``spark.sql.maxConcurrentOutputFileWriters``, and the v2 output committer); one file
whose rows carry their key group (a ``_rf_kg`` column), unsorted; and the same file sorted by key group
(Flink's sort-merge shuffle, what regionflow writes: `spark.driver.exchange`). Read side: one key group's rows
from its own directory, out of the sorted file (Parquet's statistics and page index skip the other groups'
pages) and out of the unsorted one (every row scanned), and every row of the sorted file against every row of
one directory. Plain PySpark, ``local[2]``, one input partition; medians after a warm-up round.

Usage: .venv/bin/python benchmarks/keygroup_writes.py [--rows 2000000] [--repeats 5]
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from contextlib import contextmanager

COLUMNS = ("order_id", "customer_id", "product_id", "quantity", "unit_price_cents")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()

    def orders():
        order_id = F.col("id")
        return spark.range(0, args.rows, 1, 1).select(
            order_id.alias("order_id"), (order_id * 7919 % 500).alias("customer_id"),
            (order_id * 104729 % 60).alias("product_id"), (order_id * 31 % 5).alias("quantity"),
            (order_id * 17 % 1000 + 99).alias("unit_price_cents"))

    def grouped(path: str, mode: str = "overwrite") -> None:
        orders().withColumn("_rf_unit", F.expr("pmod(hash(customer_id), 8)")).write.mode(mode) \
            .partitionBy("_rf_unit").parquet(path)

    @contextmanager
    def sql_conf(key: str, value: str):
        spark.conf.set(key, value)
        try:
            yield
        finally:
            spark.conf.unset(key)

    def concurrent(path: str) -> None:
        with sql_conf("spark.sql.maxConcurrentOutputFileWriters", "8"):
            grouped(path)

    def committer_v2(path: str) -> None:
        hadoop.set("mapreduce.fileoutputcommitter.algorithm.version", "2")
        try:
            grouped(path)
        finally:
            hadoop.set("mapreduce.fileoutputcommitter.algorithm.version", "1")

    def sorted_file(path: str) -> None:
        orders().withColumn("_rf_kg", F.expr("pmod(hash(customer_id), 8)")).sortWithinPartitions("_rf_kg") \
            .write.mode("overwrite").parquet(f"{path}/_rf_unit=0")

    def unsorted_file(path: str) -> None:
        orders().withColumn("_rf_kg", F.expr("pmod(hash(customer_id), 8)")).write.mode("overwrite") \
            .parquet(f"{path}/_rf_unit=0")

    variants = {"one directory": lambda path: orders().write.mode("overwrite").parquet(f"{path}/_rf_unit=0"),
                "8 key groups": grouped, "8 key groups, append": lambda path: grouped(path, "append"),
                "8 key groups, concurrent writers": concurrent, "8 key groups, committer v2": committer_v2,
                "one file with the key group, unsorted": unsorted_file, "one file sorted by key group": sorted_file}
    reads = {"one key group's directory": ("8 key groups", lambda path: spark.read.parquet(f"{path}/_rf_unit=3")),
             "one key group out of the sorted file": (
                 "one file sorted by key group",
                 lambda path: spark.read.parquet(f"{path}/_rf_unit=0").where(F.col("_rf_kg") == 3).drop("_rf_kg")),
             "one key group out of the unsorted file": (
                 "one file with the key group, unsorted",
                 lambda path: spark.read.parquet(f"{path}/_rf_unit=0").where(F.col("_rf_kg") == 3).drop("_rf_kg")),
             "every row of the sorted file": (
                 "one file sorted by key group", lambda path: spark.read.parquet(f"{path}/_rf_unit=0").drop("_rf_kg")),
             "every row of one directory": ("one directory", lambda path: spark.read.parquet(f"{path}/_rf_unit=0"))}
    root = tempfile.mkdtemp(prefix="rf-bench-writes-")
    times: dict[str, list[float]] = {name: [] for name in (*variants, *reads)}
    rows: dict[str, tuple[int, int]] = {}  # a key group's row count and a checksum of all its columns
    try:
        for repeat in range(args.repeats + 1):  # the first round warms the JVM up and is not counted
            for number, (name, write) in enumerate(variants.items()):
                path = f"{root}/{repeat}-{number}"
                started = time.monotonic()
                write(path)
                if repeat:
                    times[name].append(time.monotonic() - started)
            for name, (written_by, frame) in reads.items():
                path = f"{root}/{repeat}-{list(variants).index(written_by)}"
                started = time.monotonic()
                rows[name] = tuple(frame(path).agg(F.count("*"), F.sum(F.hash(*COLUMNS).cast("bigint"))).collect()[0])
                if repeat:
                    times[name].append(time.monotonic() - started)
            for number in range(len(variants)):
                shutil.rmtree(f"{root}/{repeat}-{number}", ignore_errors=True)
    finally:
        spark.stop()
        shutil.rmtree(root, ignore_errors=True)
    groups = {name: found for name, found in rows.items() if "key group" in name}
    if len(set(groups.values())) != 1 or rows["every row of the sorted file"] != rows["every row of one directory"]:
        raise SystemExit(f"the reads of the same rows found different rows: {rows}")
    median = {name: statistics.median(values) for name, values in times.items()}
    base, read_base = median["one directory"], median["one key group's directory"]
    print(json.dumps({"rows": args.rows, "repeats": args.repeats,
                      "key_group_rows": rows["one key group's directory"][0],
                      "seconds": {name: round(value, 3) for name, value in median.items()},
                      "write_ratio_to_one_directory": {name: round(median[name] / base, 2) for name in variants},
                      "read_ratio_to_the_key_groups_directory": {name: round(median[name] / read_base, 2)
                                                                 for name in reads}}, indent=2))


if __name__ == "__main__":
    main()
