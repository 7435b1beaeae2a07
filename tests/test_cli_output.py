"""``--format json``: every command that has it prints exactly one JSON document on stdout, run as a user runs
it (a real process, its stdout parsed whole); progress lines count from the command's start."""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import pytest

import micro  # benchmarks/micro.py (pytest's pythonpath)
from regionflow.cli import build_parser
from regionflow.core.graph import load_job
from regionflow.core.plan import Plan
from regionflow.scheduling.hosts import Cluster
from regionflow.spark.servers.session_servers import free_port
from regionflow.units.runner import LocalRunner, RunOptions

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MICRO = os.path.join(ROOT, "benchmarks", "micro.py")  # the core benchmarks, outside the `regionflow` command
ORDERS = "regionflow.examples.orders:job"
FLIP119 = os.path.join(ROOT, "examples", "jobs", "flip119.json")


def commands_with_json(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    """The command paths (e.g. ('session', 'start')) whose parser has ``--format`` with a json choice."""
    found = set()
    for action in parser._actions:  # argparse has no public walk of its subcommands
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found |= commands_with_json(sub, (*prefix, name))
        elif "--format" in action.option_strings and "json" in (action.choices or ()):
            found.add(prefix)
    return found


def regionflow(*argv: str, check: int | None = 0, timeout: float = 300) -> tuple[object, str]:
    """Run the `regionflow` command in a process of its own; its stdout parsed whole as JSON, and its stderr.
    An `argv` starting with `MICRO` runs that benchmark script instead."""
    command = [sys.executable, *argv] if argv[0] == MICRO else [sys.executable, "-m", "regionflow.cli", *argv]
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    if check is not None:
        assert done.returncode == check, done.stderr[-3000:]
    try:
        return json.loads(done.stdout), done.stderr
    except json.JSONDecodeError as error:
        raise AssertionError(f"stdout of regionflow {' '.join(argv)} is not one JSON document ({error}):\n"
                             f"{done.stdout[:2000]}") from None


def cheap_cases(tmp_path) -> dict[tuple[str, ...], list[str]]:
    state = str(tmp_path / "sessions")
    store = f"sqlite:///{tmp_path / 'regionflow.db'}"
    return {
        ("plan",): ["plan", FLIP119],
        ("simulate",): ["simulate", FLIP119, "--slots", "2"],
        ("micro", "topology"): [MICRO, "topology", "--parallelism", "100", "--repeats", "1",
                                "--naive-parallelism", "10"],
        ("micro", "schedule"): [MICRO, "schedule", "--parallelism", "20", "--slots", "4"],
        ("micro", "pool"): [MICRO, "pool", "--bulks", "50", "--slots", "8", "--hosts", "2", "--baseline-bulks", "0"],
        ("status",): ["status", "--store-url", store, "--slots", "2"],
        ("gc",): ["gc", "--data-dir", str(tmp_path / "data"), "--dry-run"],
        ("session", "stop"): ["session", "stop", "--slots", "1", "--state-dir", state],
        ("version",): ["version"],
    }


def test_the_test_below_covers_every_command_with_a_json_format(tmp_path):
    covered = {case for case in cheap_cases(tmp_path) if case[0] != "micro"}
    covered |= {("session", "start"), ("session", "status"), ("run",)}
    assert commands_with_json(build_parser()) == covered
    micro_cases = {case[1:] for case in cheap_cases(tmp_path) if case[0] == "micro"}
    assert commands_with_json(micro.build_parser()) == micro_cases


def test_cheap_commands_print_one_json_document(tmp_path):
    (tmp_path / "data").mkdir()
    for argv in cheap_cases(tmp_path).values():
        document, _ = regionflow(*argv, "--format", "json")
        assert isinstance(document, (dict, list)), argv


def test_run_and_session_print_one_json_document_while_spark_works(tmp_path):
    """`run` on the session backend runs the region program in this process (its log lines went to stdout
    before); `session start` starts a server. Their human lines are on stderr."""
    data = tmp_path / "data"
    summary, err = regionflow("run", ORDERS, "--slots", "1", "--data-dir", str(data), "--format", "json")
    assert summary["job"] == "orders" and summary["sinks"]["totals"]["rows"] > 0
    assert "committed" in err and "units done" in err  # the program's and the runner's lines, on stderr

    state, port = str(tmp_path / "sessions"), str(free_port())
    cluster = ("--slots", "1", "--state-dir", state, "--base-port", port)
    try:
        started, _ = regionflow("session", "start", *cluster, "--format", "json")
        assert [status["state"] for status in started] == ["up"]
        status, _ = regionflow("session", "status", *cluster, "--format", "json")
        assert [s["state"] for s in status] == ["up"]
    finally:
        stopped, _ = regionflow("session", "stop", *cluster, "--format", "json")
    assert [s["state"] for s in stopped] == ["down"]


def test_progress_lines_count_from_the_commands_start(tmp_path):
    """The first line (the servers being up) read the machine's uptime: the runner's clock started at 0."""
    lines: list[str] = []
    began = time.monotonic() - 5.0  # the command started 5 s ago
    plan = Plan(load_job(ORDERS), None)
    runner = LocalRunner(ORDERS, plan, RunOptions(data_dir=str(tmp_path), cluster=Cluster.local_default(1),
                                                  progress=lines.append, clock_origin=began))
    runner._progress("Spark Connect servers of 1 host(s) up in 4.9 s")
    seconds = float(lines[0].split("]")[0].strip("[ s"))
    assert 5.0 <= seconds < 5.0 + 60, lines[0]
    assert "0/" in lines[0] and lines[0].endswith("up in 4.9 s")


@pytest.mark.parametrize("argv", [["plan", "no_such.module:job"], ["simulate", FLIP119, "--durations", "x"]])
def test_an_error_with_json_format_leaves_stdout_empty(argv):
    done = subprocess.run([sys.executable, "-m", "regionflow.cli", *argv, "--format", "json"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 2 and done.stdout == "" and done.stderr.startswith("regionflow: error: ")
