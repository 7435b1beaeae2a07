"""DAGs for the UI plugin's tests on a 2-slot cluster: `ui_hold` holds one slot for a while, so the
2-slot region of `ui_region` waits in the FIFO queue meanwhile."""
import time
from datetime import datetime

from airflow.providers.standard.operators.python import PythonOperator
from airflow.sdk import DAG

import regionflow
from regionflow.examples import orders as job
from regionflow.operators import SparkVertexOperator, hash_by


def hold(seconds):
    time.sleep(float(seconds))


with DAG("ui_hold", schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as ui_hold:
    PythonOperator(task_id="hold", python_callable=hold, op_args=["{{ dag_run.conf.get('seconds', 20) }}"])

with DAG("ui_region", schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as ui_region:
    source = SparkVertexOperator(task_id="source", parallelism=2, fn=job.generate_orders)
    count = SparkVertexOperator(task_id="count", parallelism=2, fn=job.count_per_customer, sink="ui/counts")
    source >> hash_by("customer_id") >> count  # pipelined by the mode below, so other modes split it
regionflow.transform(ui_region, mode="all-pipelined")


def _tpch_dag(query, mode):
    """TPC-H Q<query>'s job (`regionflow.examples.tpch`) as a DAG, one operator per vertex: what the plan
    page draws at real size (Q9: 10 vertices, 9 edges). Parsed, never run by the tests."""
    from regionflow.examples.tpch import build_job
    from regionflow.operators import broadcast, forward, rebalance, rescale

    exchanges = {"forward": forward, "rescale": rescale, "rebalance": rebalance, "broadcast": broadcast}
    graph = build_job(query, parallelism=2)
    with DAG(f"ui_tpch_q{query}", schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as dag:
        ops = {name: SparkVertexOperator(task_id=name, parallelism=vertex.parallelism, fn=vertex.fn,
                                         sink=vertex.sink.path if vertex.sink else None)
               for name, vertex in graph.vertices.items()}
        for edge in graph.edges:
            kind = edge.distribution.value
            ops[edge.src] >> (hash_by(*edge.keys) if kind == "hash" else exchanges[kind]()) >> ops[edge.dst]
    regionflow.transform(dag, mode=mode)
    return dag


ui_tpch_q9 = _tpch_dag(9, "all-blocking")

with DAG("ui_wide", schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as ui_wide:
    # 90 vertices: more than the plan page draws (ui/src/PlanPage.tsx DRAW_LIMIT), so it summarizes the regions
    steps = [SparkVertexOperator(task_id=f"step{i:02d}", parallelism=1, fn=job.generate_orders) for i in range(90)]
    for upstream, downstream in zip(steps, steps[1:], strict=False):
        upstream >> downstream
regionflow.transform(ui_wide, mode="all-pipelined")
