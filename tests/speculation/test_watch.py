"""CommitWatcher and settle: the first attempt to commit wins, the other is killed and cleaned up."""
from __future__ import annotations

import os
import threading

from speculation_fakes import FakeResult, FakeSubmission, commit, runs_until_killed

from regionflow.spark.data.store import PartitionStore
from regionflow.spark.launch.watch import CommitWatcher, settle


def test_watcher_kills_the_loser_and_settle_names_the_winner(tmp_path):
    partitions = PartitionStore(str(tmp_path), "run1")
    loser_dir = partitions.attempt_dir("u0", "try1-aa")
    submission = FakeSubmission(runs_until_killed(timeout=10))
    threading.Timer(0.1, lambda: commit(partitions, "u0", "spec1-bb", "b")).start()
    with CommitWatcher(partitions, "u0", "try1-aa", submission, interval=0.02) as watcher:
        result = submission.run()
    assert result.killed and watcher.beaten_by.attempt_id == "spec1-bb"
    outcome = settle(result, partitions, "u0", "try1-aa")
    assert outcome.state == "lost_commit" and outcome.winner_attempt == "spec1-bb" and outcome.winner_host == "b"
    assert not os.path.exists(loser_dir)  # the killed loser's temporary output is gone


def test_watcher_leaves_its_own_commit_alone(tmp_path):
    partitions = PartitionStore(str(tmp_path), "run1")
    submission = FakeSubmission(lambda s: (commit(partitions, "u0", "try1-aa", "a"), FakeResult())[1])
    with CommitWatcher(partitions, "u0", "try1-aa", submission, interval=0.01) as watcher:
        result = submission.run()
        assert not submission.killed.wait(0.1)
    assert watcher.beaten_by is None and not submission.killed.is_set()
    outcome = settle(result, partitions, "u0", "try1-aa")
    assert outcome.state == "succeeded" and outcome.unit_done


def test_settle_without_any_commit_is_failed_or_killed(tmp_path):
    partitions = PartitionStore(str(tmp_path), "run1")
    partitions.attempt_dir("u0", "x")
    assert settle(FakeResult(returncode=1), partitions, "u0", "x").state == "failed"
    assert settle(FakeResult(returncode=None, killed=True), partitions, "u0", "x").state == "killed"
    assert not settle(FakeResult(returncode=1), partitions, "u0", "x").unit_done
    assert not os.path.exists(partitions.attempt_path("u0", "x"))


def test_a_failed_attempt_after_another_committed_lost_the_commit(tmp_path):
    partitions = PartitionStore(str(tmp_path), "run1")
    commit(partitions, "u0", "spec1-bb", "b")
    outcome = settle(FakeResult(returncode=1), partitions, "u0", "try1-aa")
    assert outcome.state == "lost_commit" and outcome.unit_done
