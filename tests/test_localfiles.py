"""Files written whole by several processes at once (the race a run's region tasks had on its job spec)."""
import json
import multiprocessing
import os

import pytest

from regionflow.localfiles import copy_atomically, write_json_atomically


def _write_many(path, marker):
    for index in range(200):
        write_json_atomically(path, {"by": marker, "n": index})


def test_concurrent_writers_of_one_file_never_fail_and_leave_a_whole_file_and_no_temp_files(tmp_path):
    path = str(tmp_path / "job.json")
    context = multiprocessing.get_context("fork")
    writers = [context.Process(target=_write_many, args=(path, marker)) for marker in range(4)]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(60)
    assert [writer.exitcode for writer in writers] == [0, 0, 0, 0]
    assert json.load(open(path))["n"] == 199
    assert os.listdir(tmp_path) == ["job.json"]


def test_a_copy_replaces_its_target_whole_and_a_failed_one_leaves_the_old_file_and_no_temp_file(tmp_path):
    source, target = tmp_path / "fresh.db", tmp_path / "airflow.db"
    source.write_bytes(b"new" * 1000)
    target.write_bytes(b"old")
    assert copy_atomically(str(source), str(target)) == str(target)
    assert target.read_bytes() == b"new" * 1000
    with pytest.raises(FileNotFoundError):
        copy_atomically(str(tmp_path / "missing.db"), str(target))
    assert target.read_bytes() == b"new" * 1000
    assert sorted(os.listdir(tmp_path)) == ["airflow.db", "fresh.db"]
