"""The Spark runtime layer, split by where its code runs:

- `driver/`: the region program inside a Spark driver (a spark-submit or a Connect client session): ctx,
  the unit computer, the exchange, the entry point;
- `launch/`: how an attempt becomes a Spark application and is watched: the attempt lifecycle, the two
  backends (spark-submit, Connect session), submission arguments, sizing, masters and targets, orphans;
- `servers/`: long-lived Spark servers: per-host Connect servers, standalone clusters, their auth, logs,
  reachability probes, idle stops and health;
- `data/`: what attempts write and read: the partition store (first commit wins), sinks, file systems,
  input descriptors, integrity checks, the unit task file.

Modules here import PySpark lazily, inside functions.
"""
