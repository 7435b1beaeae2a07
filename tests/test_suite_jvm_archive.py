"""The suite's class archive (tests/suite_jvm_archive.py): used only once built, named by what it depends on, and
never a reason for conftest to fail where there is no JDK. That the session's Connect server maps it:
tests/spark/test_vertex_level.py."""
import os

import suite_jvm_archive


def test_no_archive_built_leaves_spark_submit_alone(tmp_path, monkeypatch):
    monkeypatch.setattr(suite_jvm_archive, "ARCHIVE_DIR", str(tmp_path))
    assert suite_jvm_archive.built_submit_options() is None


def test_a_built_archive_is_given_to_spark_submit_with_the_jvms_warnings_on_stderr(tmp_path, monkeypatch):
    monkeypatch.setattr(suite_jvm_archive, "ARCHIVE_DIR", str(tmp_path))
    path = suite_jvm_archive.archive_path()
    assert os.path.dirname(path) == str(tmp_path)
    with open(path, "wb"):
        pass
    options = suite_jvm_archive.built_submit_options().split()
    assert f"-XX:SharedArchiveFile={path}" in options
    assert options[-2:] == ["-Xlog:disable", "-Xlog:all=warning:stderr"]  # nothing of it in a driver's stdout


def test_the_name_changes_with_the_suites_jvm_options(monkeypatch):
    before = suite_jvm_archive.archive_path()
    monkeypatch.setattr(suite_jvm_archive, "SUITE_JAVA_OPTIONS", "-XX:+UseParallelGC")
    assert suite_jvm_archive.archive_path() != before


def test_without_a_jdk_there_is_no_archive_and_no_error(tmp_path, monkeypatch):
    monkeypatch.setattr(suite_jvm_archive, "ARCHIVE_DIR", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))  # no `java` on it
    assert suite_jvm_archive.built_submit_options() is None
