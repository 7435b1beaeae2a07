"""TPC-H Q1, Q3, Q9 and Q18 (`regionflow.examples.tpch`) at scale factor 0.01 against the official
answers DuckDB ships: the data generator and DuckDB's own run of the query text (milliseconds), the
plain PySpark reference (one spark-submit per query), and `regionflow run` in the all-blocking and
all-pipelined modes (session backend: conftest's 4-slot Spark Connect server, shared).

Rows are read back from the sink's Parquet files with pyarrow (no Spark application in pytest),
ordered by the query's ORDER BY and formatted like the answers (`rfbench.tpch_data.format_row`).
"""
from __future__ import annotations

import os

import pytest

pytest.importorskip("duckdb")
pq = pytest.importorskip("pyarrow.parquet")

from regionflow.core.graph import Distribution, load_job  # noqa: E402
from regionflow.core.plan import Plan  # noqa: E402
from regionflow.examples import tpch  # noqa: E402
from regionflow.spark.data.filesystems import local_path  # noqa: E402
from regionflow.spark.driver.program import resolve_sink_path  # noqa: E402
from regionflow.units.reference import run_reference  # noqa: E402
from regionflow.units.runner import LocalRunner, RunOptions  # noqa: E402
from rfbench import tpch_data  # noqa: E402

SF = 0.01
SLOTS = 4  # conftest's shared server; all-pipelined runs a query as one region of 4 slots (parallelism 4)
pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="session")
def tpch_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    """SF 0.01 generated once for the session (about a second)."""
    return tpch_data.generate(SF, str(tmp_path_factory.mktemp("tpch")))


@pytest.fixture
def tpch_env(tpch_dir: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """REGIONFLOW_TPCH_DIR set for this test; the runs' Spark processes inherit it."""
    monkeypatch.setenv(tpch.TPCH_DIR_ENV, tpch_dir)
    return tpch_dir


def reference(query: int) -> str:
    return f"regionflow.examples.tpch:q{query}"


def sink_rows(summary, query: int, data_dir: str) -> tuple[list[str], list[tuple]]:
    """Column names and rows of the query's sink, in the query's ORDER BY order."""
    figures = summary.sinks[tpch.SINK_VERTEX]
    vertex = load_job(reference(query)).vertices[tpch.SINK_VERTEX]
    return tpch_data.read_result(local_path(figures.get("path") or resolve_sink_path(vertex, data_dir)), query)


def assert_answer(query: int, columns: list[str], rows: list[tuple]) -> None:
    difference = tpch_data.check_answer(query, SF, rows, columns)
    assert difference is None, f"Q{query}: {difference}"


# ---- without Spark ------------------------------------------------------------------------------------


def test_generate_writes_every_table_once_and_keeps_a_complete_generation(tpch_dir):
    assert tpch_dir.endswith(os.sep + "sf0.01") and tpch_data.is_generated(tpch_dir)
    for table in tpch_data.TABLES:
        assert pq.read_table(os.path.join(tpch_dir, table)).num_rows > 0
    assert pq.read_table(os.path.join(tpch_dir, "nation")).num_rows == 25
    marker = os.path.join(tpch_dir, tpch_data.MARKER)
    before = os.stat(marker).st_mtime_ns
    assert tpch_data.generate(SF, os.path.dirname(tpch_dir)) == tpch_dir
    assert os.stat(marker).st_mtime_ns == before
    assert not [name for name in os.listdir(os.path.dirname(tpch_dir)) if name.startswith(".")]  # no temp dir left


def test_duckdb_runs_the_official_queries_to_the_answers(tpch_dir):
    for query in tpch.QUERIES:
        _, rows = tpch_data.run_official(query, tpch_dir, threads=1)
        assert tpch_data.check_answer(query, SF, rows) is None
    _, rows = tpch_data.run_official(3, tpch_dir, threads=1)
    assert tpch_data.check_answer(3, SF, rows[::-1]).startswith("row 0: ")
    assert tpch_data.check_answer(3, SF, rows[:-1]) == "9 rows instead of 10"


@pytest.mark.parametrize("query", tpch.QUERIES)
def test_a_sink_is_read_back_in_order_by_order_whatever_its_part_files(query, tpch_dir, tmp_path):
    import pyarrow as pa

    _, rows = tpch_data.run_official(query, tpch_dir, threads=1)
    columns = list(tpch_data.answer_columns(query))
    rows = rows[::-1]
    half = len(rows) // 2
    (tmp_path / "_regionflow_sink.json").write_text("{}")
    for index, part in enumerate((rows[:half], rows[half:])):
        table = pa.Table.from_pylist([dict(zip(columns, row, strict=True)) for row in part]
                                     or [dict(zip(columns, rows[0], strict=True))])
        pq.write_table(table if part else table.slice(0, 0), str(tmp_path / f"part-{index:05d}.parquet"))
    read_columns, read_rows = tpch_data.read_result(str(tmp_path), query)
    assert tpch_data.check_answer(query, SF, read_rows, read_columns) is None


def test_answers_are_formatted_as_written():
    import datetime
    from decimal import Decimal

    assert tpch_data.format_value(Decimal("380456.00"), "380456") == "380456"
    assert tpch_data.format_value(Decimal("505822441.4861"), "505822441.4861") == "505822441.4861"
    assert tpch_data.format_value(25.575154611454693, "25.575154611454693") == "25.575154611454693"
    assert tpch_data.format_value(Decimal("0.125"), "0.12") == "0.12"  # half even
    assert tpch_data.format_value(datetime.date(1995, 3, 11), "1995-03-11") == "1995-03-11"
    assert tpch_data.answers(1, SF)[0][:2] == ("A", "F")
    with pytest.raises(ValueError, match="scale factors"):
        tpch_data.answers(1, 0.5)


@pytest.mark.parametrize("query", tpch.QUERIES)
def test_every_query_is_a_valid_job_ending_in_one_ordered_sink(query):
    graph = tpch.build_job(query, parallelism=3, sink="out/q", name="n")
    assert graph.name == "n" and graph.topological_order()[-1] == tpch.SINK_VERTEX
    assert [v.name for v in graph.vertices.values() if v.sink] == [tpch.SINK_VERTEX]
    assert graph.vertices[tpch.SINK_VERTEX].parallelism == 1 and graph.vertices[tpch.SINK_VERTEX].sink.path == "out/q"
    assert any(edge.distribution is Distribution.HASH for edge in graph.edges)
    assert load_job(reference(query)).vertices.keys() == tpch.build_job(query).vertices.keys()


def test_the_input_directory_is_named_when_unset_or_missing(monkeypatch, tmp_path):
    monkeypatch.delenv(tpch.TPCH_DIR_ENV, raising=False)
    with pytest.raises(tpch.TpchDataError, match=tpch.TPCH_DIR_ENV):
        tpch.tpch_dir()
    monkeypatch.setenv(tpch.TPCH_DIR_ENV, str(tmp_path / "absent"))
    with pytest.raises(tpch.TpchDataError, match=f"{tpch.TPCH_DIR_ENV}=.*absent"):
        tpch.tpch_dir()


# ---- with Spark --------------------------------------------------------------------------------------


@pytest.mark.parametrize("query", tpch.QUERIES)
def test_plain_pyspark_reference_gives_the_answer(query, tpch_env, shared_servers, tmp_path):
    servers, _ = shared_servers
    job = reference(query)
    options = RunOptions(data_dir=str(tmp_path), cluster=servers.cluster, progress=None, servers=servers)
    summary = run_reference(job, Plan(load_job(job)), options)
    assert_answer(query, *sink_rows(summary, query, str(tmp_path)))


@pytest.mark.parametrize("mode", ["all-blocking", "all-pipelined"])
@pytest.mark.parametrize("query", tpch.QUERIES)
def test_regionflow_run_gives_the_answer(query, mode, tpch_env, shared_servers, tmp_path):
    servers, _ = shared_servers
    job = reference(query)
    plan = Plan(load_job(job), mode)
    assert plan.min_slots <= SLOTS
    options = RunOptions(data_dir=str(tmp_path), cluster=servers.cluster, progress=None,
                         backend="session", servers=servers)
    summary = LocalRunner(job, plan, options).run()
    assert all(unit.attempts == 1 for unit in summary.units)
    assert_answer(query, *sink_rows(summary, query, str(tmp_path)))
