"""Jobs used by the Spark runtime tests: the example job with a fault injected.

Importable by name inside spark-submit (the runner zips this module into --py-files)."""
import time

from regionflow.examples import orders


def clean_slowly_in_first_attempt(spark, inputs, ctx):
    """Like the example's clean, but its first attempt crawls (in the unit that computes clean#0), so
    it can be killed mid-write."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType

    frame = orders.clean_orders(spark, inputs, ctx)
    if ctx.attempt_id.startswith("a1-") and 0 in ctx.subtasks:
        crawl = F.udf(lambda value: (time.sleep(0.003), value)[1], LongType())
        frame = frame.withColumn("order_id", crawl("order_id"))
    return frame


def clean_that_raises(spark, inputs, ctx):
    if 1 in ctx.subtasks:
        raise ValueError("negative amount in order 1042")
    return orders.clean_orders(spark, inputs, ctx)


def slow_job():
    return orders.build_job(sink="fault/totals", name="orders_fault",
                            functions={"clean": clean_slowly_in_first_attempt})


def raising_job():
    return orders.build_job(sink="raising/totals", name="orders_raising", functions={"clean": clean_that_raises})


def enrich_without_key(spark, inputs, ctx):
    """Drops customer_id, which the HASH edge enrich -> totals is keyed by."""
    return orders.enrich_orders(spark, inputs, ctx).drop("customer_id")


def enrich_not_a_frame(spark, inputs, ctx):
    return {"rows": 3}


def enrich_fails_in_first_attempt(spark, inputs, ctx):
    """Fails inside a Spark job (while its output is written) in attempt 1, works in attempt 2."""
    from pyspark.sql import functions as F

    frame = orders.enrich_orders(spark, inputs, ctx)
    if ctx.attempt_id.startswith("a1-"):
        frame = frame.withColumn("amount_cents", F.when(F.col("amount_cents") > 0, F.raise_error(
            F.lit("enrich: injected failure in attempt 1"))).otherwise(F.col("amount_cents")))
    return frame


def missing_key_job():
    return orders.build_job(sink="missing_key/totals", name="orders_missing_key",
                            functions={"enrich": enrich_without_key})


def not_a_frame_job():
    return orders.build_job(sink="not_a_frame/totals", name="orders_not_a_frame",
                            functions={"enrich": enrich_not_a_frame})


def flaky_enrich_job():
    return orders.build_job(sink="flaky/totals", name="orders_flaky",
                            functions={"enrich": enrich_fails_in_first_attempt})


def sized_job():
    """One vertex that declares 2 cores and 1 GiB of heap (for the sizing test on the standalone cluster)."""
    from regionflow.core.graph import JobGraph
    from regionflow.core.resources import ResourceProfile

    graph = JobGraph("sized")
    graph.add_vertex("sized", 1, resources=ResourceProfile.of(cpu=2, heap_mib=1024), fn=orders.generate_orders,
                     sink="sized/orders")
    return graph.validate()


def spread_job():
    """Two vertices of parallelism 2 joined all-to-all, no declared resources: one 2-slot region in
    all-pipelined mode."""
    from regionflow.core.graph import JobGraph

    graph = JobGraph("spread")
    graph.add_vertex("spread", 2, fn=orders.generate_orders)
    graph.add_vertex("counted", 2, fn=orders.count_per_customer, sink="spread/counts")
    graph.connect("spread", "counted", "hash", keys=["customer_id"])
    return graph.validate()


def adaptive_job():
    """Orders counted per customer, both vertices adaptive: parallelism [2, 8]."""
    from regionflow.core.graph import JobGraph

    graph = JobGraph("adaptive")
    graph.add_vertex("orders", (2, 8), fn=orders.generate_orders)
    graph.add_vertex("per_customer", (2, 8), fn=orders.count_per_customer, sink="adaptive/per_customer")
    graph.connect("orders", "per_customer", "hash", keys=["customer_id"])
    return graph.validate()


def adaptive_bytes_job():
    """Orders (2 subtasks) counted per customer by an adaptive [1, 8] vertex that wants 1 GiB per subtask:
    decided at grant time from the few KB it reads, it runs as one subtask."""
    from regionflow.core.graph import JobGraph

    graph = JobGraph("adaptive_bytes")
    graph.add_vertex("orders", 2, fn=orders.generate_orders)
    graph.add_vertex("per_customer", (1, 8), fn=orders.count_per_customer, sink="adaptive_bytes/per_customer",
                     target_bytes_per_subtask=1 << 30)
    graph.connect("orders", "per_customer", "hash", keys=["customer_id"])
    return graph.validate()


def adaptive_small_target_job():
    """`adaptive_bytes_job` with 1 KiB per subtask: the ~100 KB it reads call for its max, 8."""
    from regionflow.core.graph import JobGraph

    graph = JobGraph("adaptive_small_target")
    graph.add_vertex("orders", 2, fn=orders.generate_orders)
    graph.add_vertex("per_customer", (1, 8), fn=orders.count_per_customer,
                     sink="adaptive_small_target/per_customer", target_bytes_per_subtask=1 << 10)
    graph.connect("orders", "per_customer", "hash", keys=["customer_id"])
    return graph.validate()


def products_slowly(spark, inputs, ctx):
    """The example's products, after holding its unit's slots for 4 s (in the driver)."""
    import time

    time.sleep(4.0)
    return orders.generate_products(spark, inputs, ctx)


def elastic_job():
    """`hold` (3 subtasks) keeps 3 of 4 slots for a few seconds while `orders`, adaptive [1, 4] and planned
    at 4, is submitted: its full request would wait, so it starts at once on the one free slot."""
    from regionflow.core.graph import JobGraph

    graph = JobGraph("elastic")
    graph.add_vertex("hold", 3, fn=products_slowly, sink="elastic/hold")
    graph.add_vertex("orders", (1, 4), fn=orders.generate_orders, sink="elastic/orders")
    return graph.validate()


HOLD_DIR_VARIABLE = "REGIONFLOW_TEST_HOLD_DIR"
HOLD_RELEASE = "release"
HOLD_LIMIT_S = 90.0


def count_per_customer_held(spark, inputs, ctx):
    """Like the example's count per customer, but every task that computes the counted rows (the stage
    after the shuffle, which writes the sink) first leaves a marker named after its Python worker's pid
    in ``$REGIONFLOW_TEST_HOLD_DIR`` and waits there until a file ``release`` exists (at most 90 s): a
    test sees which executors run tasks and may kill one mid-stage. The rows are unchanged."""
    import os

    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType

    hold_dir = os.environ[HOLD_DIR_VARIABLE]  # read in the driver, shipped to the executors in the closure

    def hold(value):
        release = os.path.join(hold_dir, HOLD_RELEASE)
        if not os.path.exists(release):
            with open(os.path.join(hold_dir, f"task-{os.getpid()}"), "w", encoding="utf-8"):
                pass
            deadline = time.monotonic() + HOLD_LIMIT_S
            while not os.path.exists(release) and time.monotonic() < deadline:
                time.sleep(0.1)
        return value

    counted = orders.count_per_customer(spark, inputs, ctx)
    return counted.withColumn("customer_id", F.udf(hold, LongType())("customer_id"))


def held_spread_job():
    """`spread_job` whose counting stage holds (`count_per_customer_held`): one 2-slot region in
    all-pipelined mode."""
    from regionflow.core.graph import JobGraph

    graph = JobGraph("held_spread")
    graph.add_vertex("spread", 2, fn=orders.generate_orders)
    graph.add_vertex("counted", 2, fn=count_per_customer_held, sink="held_spread/counts")
    graph.connect("spread", "counted", "hash", keys=["customer_id"])
    return graph.validate()


BULKY_ROWS = 60_000


def bulky_rows(spark, inputs, ctx):
    """About 4 MB of rows that do not compress (random hex digests) across the vertex's subtasks."""
    from pyspark.sql import functions as F

    return ctx.range(spark, BULKY_ROWS).select(
        F.col("id"), F.sha2(F.concat(F.col("id").cast("string"), F.rand(7).cast("string")), 256).alias("digest"))


def count_rows(spark, inputs, ctx):
    from pyspark.sql import functions as F

    return inputs["bulky"].groupBy((F.col("id") % 10).alias("bucket")).agg(F.count(F.lit(1)).alias("rows"))


def bulky_job():
    """`bulky` (2 subtasks) writes a blocking partition of a few MB that `count` (1 subtask) reads."""
    from regionflow.core.graph import JobGraph

    graph = JobGraph("bulky")
    graph.add_vertex("bulky", 2, fn=bulky_rows)
    graph.add_vertex("count", 1, fn=count_rows, sink="bulky/count")
    graph.connect("bulky", "count", "rebalance", exchange="blocking")
    return graph.validate()


def hog_memory(spark, inputs, ctx):
    """One row whose string needs about 1.5 GB: more than the heap of the test's small server."""
    return ctx.range(spark, 1).selectExpr("id", "length(repeat(cast(id AS string), 1500000000)) AS n")


def oom_job():
    from regionflow.core.graph import JobGraph

    graph = JobGraph("oom")
    graph.add_vertex("hog", 1, fn=hog_memory, sink="oom/hog")
    return graph.validate()
