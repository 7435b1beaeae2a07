"""The one attempt lifecycle (`Attempt`) over a recording backend double: every way an attempt ends,
the moves of its state diagram, and what its recorder sees. No Spark here: the backends themselves
run for real in test_run.py, test_connect.py and the Airflow end-to-end tests."""
from __future__ import annotations

import threading

import pytest
from attempt_doubles import RecordingBackend, make
from speculation_fakes import FakeResult, commit, commits_at_once, fails, runs_until_killed, wait_for

from regionflow.core.attempts import (
    ATTEMPT_END_STATES,
    ATTEMPT_TRANSITIONS,
    AttemptState,
    AttemptTransitionError,
    check_attempt_move,
)
from regionflow.spark.data.store import PartitionStore


class RecordingRecorder:
    def __init__(self):
        self.events: list[tuple[str, str, str | None]] = []

    def started(self, attempt):
        self.events.append(("started", attempt.attempt_id, attempt.host.name))

    def ended(self, attempt, outcome):
        self.events.append(("ended", attempt.attempt_id, outcome.state.value))


@pytest.fixture
def partitions(tmp_path):
    return PartitionStore(str(tmp_path), "run1")


def test_an_attempt_that_commits_succeeds_and_is_recorded_start_and_end(partitions):
    backend, recorder = RecordingBackend(commits_at_once(partitions, "u0", "try1-aa", "a")), RecordingRecorder()
    attempt = make(partitions, backend, recorder=recorder)
    assert attempt.state is AttemptState.CREATED
    outcome = attempt.run()
    assert outcome.state is AttemptState.SUCCEEDED and outcome.unit_done and outcome.failure is None
    assert attempt.state is AttemptState.SUCCEEDED and attempt.outcome is outcome
    assert backend.prepared == [("try1-aa", "a", 2)]
    assert recorder.events == [("started", "try1-aa", "a"), ("ended", "try1-aa", "succeeded")]


def test_a_failed_program_is_failed_with_its_error(partitions):
    recorder = RecordingRecorder()
    outcome = make(partitions, RecordingBackend(fails()), recorder=recorder).run()
    assert outcome.state is AttemptState.FAILED and not outcome.unit_done and outcome.host_lost is None
    assert "exit code 1" in outcome.failure and outcome.reason == "boom in vertex x"
    assert recorder.events[-1] == ("ended", "try1-aa", "failed")


def test_a_host_that_cannot_run_it_fails_the_attempt_before_it_starts(partitions):
    recorder = RecordingRecorder()
    attempt = make(partitions, RecordingBackend(down="host a lost: its server does not answer"), recorder=recorder)
    outcome = attempt.run()
    assert outcome.state is AttemptState.FAILED and outcome.result is None
    assert outcome.host_lost == outcome.failure == "host a lost: its server does not answer"
    assert recorder.events == []  # it never ran: no attempt row


def test_cancel_before_the_start_never_asks_the_backend(partitions):
    backend = RecordingBackend(commits_at_once(partitions, "u0", "try1-aa", "a"))
    attempt = make(partitions, backend)
    attempt.cancel()
    outcome = attempt.run()
    assert outcome.state is AttemptState.KILLED and backend.prepared == [] and not partitions.committed("u0")


def test_cancel_while_running_kills_the_execution_from_another_thread(partitions):
    backend, recorder = RecordingBackend(runs_until_killed(timeout=10)), RecordingRecorder()
    attempt = make(partitions, backend, recorder=recorder)
    runner = threading.Thread(target=attempt.run)
    runner.start()
    assert wait_for(lambda: backend.made and backend.made[0].ran.is_set())
    assert attempt.state is AttemptState.RUNNING
    attempt.cancel(wait=True, timeout=5)
    runner.join(5)
    assert backend.made[0].killed.is_set() and attempt.state is AttemptState.KILLED
    assert recorder.events[-1] == ("ended", "try1-aa", "killed")


def test_another_attempts_commit_kills_this_one_which_lost_the_commit(partitions):
    backend = RecordingBackend(runs_until_killed(timeout=10))
    threading.Timer(0.1, lambda: commit(partitions, "u0", "spec1-bb", "b")).start()
    outcome = make(partitions, backend).run()
    assert backend.made[0].killed.is_set()
    assert outcome.state is AttemptState.LOST_COMMIT and outcome.unit_done
    assert outcome.winner_attempt == "spec1-bb" and outcome.winner_host == "b"


def test_a_copy_of_a_unit_committed_before_it_started_lost_the_commit(partitions):
    commit(partitions, "u0", "try1-aa", "a")
    attempt = make(partitions, RecordingBackend(runs_until_killed()), attempt_id="spec1-bb")
    attempt.cancel()
    outcome = attempt.run()
    assert outcome.state is AttemptState.LOST_COMMIT and outcome.winner_attempt == "try1-aa"


def test_a_silent_standalone_master_is_a_lost_host(partitions):
    import socket

    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        gone = f"spark://127.0.0.1:{closed.getsockname()[1]}"
    backend = RecordingBackend(runs_until_killed(timeout=20), master=gone)
    outcome = make(partitions, backend, host_lost_timeout=0.5).run()
    assert outcome.state is AttemptState.KILLED and outcome.host_lost.startswith(f"host a lost: master {gone}")
    assert outcome.failure.startswith("host a lost")
    [submission] = backend.made
    assert submission.master_gone.is_set()  # told first: a session server's application of that master is dropped


def test_a_silent_server_is_a_lost_host_that_leaves_the_master_alone(partitions):
    import socket

    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        gone = f"sc://127.0.0.1:{closed.getsockname()[1]}"
    backend = RecordingBackend(runs_until_killed(timeout=20), server_url=gone)
    outcome = make(partitions, backend, host_lost_timeout=0.5).run()
    assert outcome.host_lost.startswith(f"host a lost: its Spark Connect server at {gone}")
    [submission] = backend.made
    assert submission.killed.is_set() and not submission.master_gone.is_set()


def test_a_session_that_lost_its_server_reports_the_lost_host(partitions):
    lost = "host a lost: its Spark Connect server at sc://127.0.0.1:1 stopped answering; SparkConnectGrpcException"
    backend = RecordingBackend(lambda s: FakeResult(returncode=1, error=lost, host_lost=True))
    outcome = make(partitions, backend).run()
    assert outcome.state is AttemptState.FAILED and outcome.host_lost == lost and outcome.reason == lost


def test_an_attempt_without_an_id_is_refused(partitions):
    with pytest.raises(Exception, match="needs an attempt id"):
        make(partitions, RecordingBackend(), attempt_id="")


def test_the_state_diagram_has_no_way_out_of_an_end_state_and_names_the_allowed_moves():
    for end in ATTEMPT_END_STATES:
        assert end not in ATTEMPT_TRANSITIONS
        with pytest.raises(AttemptTransitionError, match="it has ended"):
            check_attempt_move("x", "v[0]", end, AttemptState.RUNNING)
    with pytest.raises(AttemptTransitionError, match="from created it can go to: failed, killed, lost_commit, running"):
        check_attempt_move("x", "v[0]", AttemptState.CREATED, AttemptState.SUCCEEDED)
    check_attempt_move("x", "v[0]", AttemptState.RUNNING, AttemptState.SUCCEEDED)


_ORPHAN = """
import json, os, sys
from speculation_fakes import runs_until_killed
from attempt_doubles import RecordingBackend, make
from regionflow.spark.data.store import PartitionStore
partitions = PartitionStore(sys.argv[1], "run1")
attempt = make(partitions, RecordingBackend(runs_until_killed(timeout=60)), parent_pid=os.getppid())
open(sys.argv[2] + ".ready", "w").close()
outcome = attempt.run()
with open(sys.argv[2], "w") as handle:
    json.dump({"state": outcome.state.value, "failure": outcome.failure}, handle)
"""
_MIDDLE = """
import subprocess, sys
child = subprocess.Popen([sys.executable, "-c", sys.argv[1], *sys.argv[2:]])
print(child.pid, flush=True)
child.wait()
"""


def test_an_attempt_whose_process_loses_its_parent_is_killed_saying_so(tmp_path):
    """A real process tree, as Airflow's worker (the parent) and the task process (the child) are: the
    child runs an attempt with ``parent_pid`` set; kill -9 of the parent kills the attempt within seconds
    (its ParentWatcher sees the child re-parented) and the failure says why."""
    import json
    import os
    import signal
    import subprocess
    import sys
    import time

    from regionflow.processes import live_processes

    out = tmp_path / "outcome.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    middle = subprocess.Popen([sys.executable, "-c", _MIDDLE, _ORPHAN, str(tmp_path / "data"), str(out)],
                              stdout=subprocess.PIPE, text=True, env=env)
    try:
        child = int(middle.stdout.readline())
        assert wait_for(lambda: os.path.exists(f"{out}.ready"), timeout=60)
        time.sleep(0.3)  # the attempt runs (a live parent: nothing happens)
        assert not out.exists()
        os.kill(middle.pid, signal.SIGKILL)
        middle.wait(10)
        assert wait_for(lambda: out.exists() and out.stat().st_size > 0, timeout=20), "the orphan's attempt goes on"
    finally:
        if middle.poll() is None:
            middle.kill()
    ended = json.loads(out.read_text())
    assert ended["state"] == "killed", ended
    assert ended["failure"].startswith(f"orphaned: the process that started this attempt (pid {middle.pid}, its "
                                       "supervisor) is gone; the attempt was killed"), ended
    assert wait_for(lambda: child not in {pid for pid, _, _ in live_processes()}, timeout=20)  # and it ended


def test_a_failed_session_attempt_says_its_session_ended_not_that_a_spark_submit_exited():
    from regionflow.spark.launch.submit import SESSION_COMMAND_PREFIX, SubmissionResult

    session = SubmissionResult(returncode=3, seconds=1.0, log_tail=(), killed=False,
                               command=f"{SESSION_COMMAND_PREFIX}sc://127.0.0.1:1 tag regionflow-a")
    assert session.exit_text == "the attempt's Spark Connect session ended with code 3"
    assert SubmissionResult(returncode=3, seconds=1.0, log_tail=(), killed=False,
                            command="spark-submit x.py").exit_text == "spark-submit exited with 3"
