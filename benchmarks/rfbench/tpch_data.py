"""TPC-H data and official answers, generated offline with DuckDB's tpch extension.

    python benchmarks/rfbench/tpch_data.py --sf 0.01 --out DIR     # prints DIR/sf0.01
    python -m rfbench.tpch_data --sf 0.01 --out DIR                # the same, from benchmarks/

`generate` writes the 8 tables as Parquet, one directory per table (``<out>/sf<sf>/<table>/``), which
is the directory `regionflow.examples.tpch` reads through ``REGIONFLOW_TPCH_DIR``. `answers` gives the
official results DuckDB ships for scale factors 0.01, 0.1 and 1, and `format_row` renders a result
row the way the answers are written, so that results compare as strings.

The extension comes from the ``duckdb-extension-tpch`` wheel (extra ``[tpch]``), whose package holds
``extensions/v<duckdb version>/tpch.duckdb_extension``; it is loaded from that file by path with
DuckDB's automatic extension download switched off, so nothing is fetched from the network.
"""
from __future__ import annotations

import argparse
import datetime
import decimal
import functools
import importlib.util
import os
import shutil
import uuid
from collections.abc import Sequence
from typing import Any

TABLES = ("customer", "lineitem", "nation", "orders", "part", "partsupp", "region", "supplier")
ANSWER_SCALE_FACTORS = (0.01, 0.1, 1.0)
MARKER = "_SUCCESS"
INSTALL_HINT = "pip install 'airflow-provider-regionflow[tpch]' (duckdb and duckdb-extension-tpch of one version)"


def connect(threads: int | None = None):
    """A DuckDB in-memory connection with the tpch extension loaded from its wheel (no network)."""
    try:
        import duckdb
    except ImportError as error:
        raise RuntimeError(f"TPC-H needs duckdb: {INSTALL_HINT}") from error
    config: dict[str, Any] = {"autoinstall_known_extensions": False, "autoload_known_extensions": False}
    if threads:
        config["threads"] = threads
    con = duckdb.connect(config=config)
    loaded = con.execute("SELECT loaded FROM duckdb_extensions() WHERE extension_name = 'tpch'").fetchone()
    if not (loaded and loaded[0]):  # statically linked into some builds; the pip wheel has it apart
        path = extension_path(duckdb.__version__)
        con.execute(f"LOAD '{_quote(path)}'")
    return con


def extension_path(duckdb_version: str) -> str:
    """The tpch extension file the ``duckdb-extension-tpch`` wheel installed for this DuckDB version."""
    spec = importlib.util.find_spec("duckdb_extension_tpch")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"the DuckDB tpch extension is not installed: {INSTALL_HINT}")
    root = os.path.join(list(spec.submodule_search_locations)[0], "extensions")
    path = os.path.join(root, f"v{duckdb_version}", "tpch.duckdb_extension")
    if not os.path.isfile(path):
        found = sorted(os.listdir(root)) if os.path.isdir(root) else []
        raise RuntimeError(f"duckdb-extension-tpch has no extension for DuckDB {duckdb_version} (it has "
                           f"{', '.join(found) or 'none'} under {root}): {INSTALL_HINT}")
    return path


def sf_name(sf: float) -> str:
    """The directory name of a scale factor: ``sf0.01``, ``sf0.1``, ``sf1``."""
    return f"sf{float(sf):g}"


def data_dir(sf: float, out_dir: str) -> str:
    """Where `generate` puts the tables of scale factor `sf` (the value for ``REGIONFLOW_TPCH_DIR``)."""
    return os.path.join(os.path.abspath(out_dir), sf_name(sf))


def is_generated(path: str) -> bool:
    """True when `path` holds a complete generation (its marker file exists)."""
    return os.path.isfile(os.path.join(path, MARKER))


def generate(sf: float, out_dir: str, threads: int | None = None) -> str:
    """Generate TPC-H at scale factor `sf` as Parquet under ``<out_dir>/sf<sf>/<table>/`` and return
    ``<out_dir>/sf<sf>``. Idempotent: a complete earlier generation (marker ``_SUCCESS``) is kept. The
    tables are written to a hidden temp directory next to the target and renamed into place with the
    marker already inside, so a crash never leaves a half-written scale factor behind; a non-empty target
    without the marker is refused, not overwritten."""
    if not sf > 0:
        raise ValueError(f"scale factor {sf!r} must be positive")
    target = data_dir(sf, out_dir)
    if is_generated(target):
        return target
    if os.path.exists(target) and (not os.path.isdir(target) or os.listdir(target)):
        raise RuntimeError(f"{target} exists but is not a complete TPC-H generation (no {MARKER}): generate "
                           f"never leaves one behind, so it is not regionflow's; delete it or choose another --out")
    os.makedirs(os.path.dirname(target), exist_ok=True)
    temp = os.path.join(os.path.dirname(target), f".{sf_name(sf)}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        _write_tables(sf, temp, threads)
        try:
            os.rename(temp, target)  # replaces an empty directory, fails on a non-empty one
        except OSError:
            if not is_generated(target):  # not a concurrent generate that finished first
                raise
    finally:
        shutil.rmtree(temp, ignore_errors=True)
    return target


def _write_tables(sf: float, temp: str, threads: int | None) -> None:
    con = connect(threads)
    try:
        con.execute(f"CALL dbgen(sf={float(sf)!r})")
        for table in TABLES:
            os.makedirs(os.path.join(temp, table))
            part = os.path.join(temp, table, "part-00000.parquet")
            con.execute(f"COPY {table} TO '{_quote(part)}' (FORMAT parquet)")
        with open(os.path.join(temp, MARKER), "w", encoding="utf-8") as handle:
            handle.write(f"tpch sf={float(sf)!r} tables={','.join(TABLES)}\n")
    finally:
        con.close()


def official_connection(tables_dir: str, threads: int | None = None):
    """A DuckDB connection with a view per TPC-H table over the Parquet files in `tables_dir`, ready
    for the official query text: ``con.execute(f"PRAGMA tpch({query})")``."""
    con = connect(threads)
    for table in TABLES:
        files = os.path.join(tables_dir, table, "*.parquet")
        con.execute(f"CREATE VIEW {table} AS SELECT * FROM read_parquet('{_quote(files)}')")
    return con


def run_official(query: int, tables_dir: str, threads: int | None = None) -> tuple[list[str], list[tuple]]:
    """Column names and rows of DuckDB running the official text of TPC-H query `query` over the
    Parquet tables in `tables_dir`."""
    con = official_connection(tables_dir, threads)
    try:
        cursor = con.execute(f"PRAGMA tpch({int(query)})")
        return [column[0] for column in cursor.description], cursor.fetchall()
    finally:
        con.close()


@functools.cache
def _answer_text(query: int, sf: float) -> str:
    if not any(abs(float(sf) - known) < 1e-9 for known in ANSWER_SCALE_FACTORS):
        raise ValueError(f"DuckDB ships TPC-H answers for scale factors {ANSWER_SCALE_FACTORS} only, not {sf!r}")
    con = connect()
    try:
        row = con.execute("SELECT answer FROM tpch_answers() WHERE query_nr = ? AND abs(scale_factor - ?) < 1e-9",
                          [int(query), float(sf)]).fetchone()
    finally:
        con.close()
    if row is None:
        raise ValueError(f"no TPC-H answer for query {query} at scale factor {sf}; queries are 1..22")
    return row[0]


def answer_columns(query: int, sf: float = 0.01) -> tuple[str, ...]:
    """The column names of query `query`'s answer (its header row)."""
    return tuple(_answer_text(query, sf).splitlines()[0].split("|"))


def answers(query: int, sf: float) -> list[tuple[str, ...]]:
    """The official answer of TPC-H query `query` at scale factor `sf`, as rows of strings in the
    query's ORDER BY order (the header row of DuckDB's pipe-separated text gives the column names, see
    `answer_columns`).

    Format: integers and keys plain (``380456``; sums of ``l_quantity`` too, without decimals); money
    with the scale of its exact decimal arithmetic (``532348211.65``, ``505822441.4861`` for
    price*(1-discount), ``526165934.000839`` with *(1+tax)); averages as the shortest repr of a double
    (``25.575154611454693``); dates ``YYYY-MM-DD``; strings as stored."""
    lines = _answer_text(query, sf).splitlines()
    width = len(lines[0].split("|"))
    rows = [tuple(line.split("|")) for line in lines[1:] if line]
    bad = [row for row in rows if len(row) != width]
    if bad:
        raise ValueError(f"TPC-H answer of query {query}: row {bad[0]!r} does not have {width} columns")
    return rows


def format_value(value: Any, like: str) -> str:
    """`value` written as the answer cell `like` is: numbers rounded (half even) to as many decimals
    as `like` has, dates ISO, everything else ``str``."""
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, (int, float, decimal.Decimal)):
        digits = len(like.split(".", 1)[1]) if "." in like else 0
        number = decimal.Decimal(repr(value)) if isinstance(value, float) else decimal.Decimal(value)
        rounded = number.quantize(decimal.Decimal(1).scaleb(-digits), rounding=decimal.ROUND_HALF_EVEN)
        return format(rounded, "f")
    if isinstance(value, (datetime.date, datetime.datetime)):
        return value.isoformat()
    return str(value)


def format_row(row: Sequence[Any], like: Sequence[str]) -> tuple[str, ...]:
    """A result row formatted like the answer row `like` (see `format_value`)."""
    if len(row) != len(like):
        raise ValueError(f"row {tuple(row)!r} has {len(row)} columns, the answer {len(like)}")
    return tuple(format_value(value, cell) for value, cell in zip(row, like, strict=False))


def read_result(path: str, query: int) -> tuple[list[str], list[tuple]]:
    """Column names and rows of a query's sink directory (its Parquet part files, read with pyarrow),
    sorted by the query's ORDER BY like the answers (the part files need not keep the order)."""
    import pyarrow.parquet as pq

    from regionflow.examples.tpch import ORDER_BY

    table = pq.read_table(path)  # skips names starting with '_' or '.': the sink marker, temp files
    columns = list(table.column_names)
    rows = [tuple(row[name] for name in columns) for row in table.to_pylist()]
    for name, descending in reversed(ORDER_BY[query]):  # stable sorts, last key first
        index = columns.index(name)
        rows.sort(key=lambda row: row[index], reverse=descending)
    return columns, rows


def check_answer(query: int, sf: float, rows: Sequence[Sequence[Any]],
                 columns: Sequence[str] | None = None) -> str | None:
    """None when `rows` (in the query's ORDER BY order) are the official answer once formatted like it
    (and `columns`, when given, are its column names); else what differs first."""
    expected = answers(query, sf)
    if columns is not None and tuple(columns) != answer_columns(query, sf):
        return f"columns {list(columns)} instead of {list(answer_columns(query, sf))}"
    if len(rows) != len(expected):
        return f"{len(rows)} rows instead of {len(expected)}"
    for index, (row, like) in enumerate(zip(rows, expected, strict=False)):
        got = format_row(row, like)
        if got != like:
            return f"row {index}: {'|'.join(got)} instead of {'|'.join(like)}"
    return None


def _quote(path: str) -> str:
    return path.replace("'", "''")


def main(argv: Sequence[str] | None = None) -> None:
    """CLI: generate one scale factor and print its directory."""
    parser = argparse.ArgumentParser(prog="python benchmarks/rfbench/tpch_data.py",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--sf", type=float, default=0.01, help="scale factor (default 0.01)")
    parser.add_argument("--out", required=True, help="directory that gets sf<sf>/<table>/")
    parser.add_argument("--threads", type=int, default=None, help="DuckDB threads (default: all cores)")
    args = parser.parse_args(argv)
    print(generate(args.sf, args.out, args.threads))


if __name__ == "__main__":
    main()
