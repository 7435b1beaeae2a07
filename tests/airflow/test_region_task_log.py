"""A region task's log line once the Airflow worker supervising its process is gone (no Airflow stack,
no Spark): the attempt ends at once, saying so, instead of with a bare BrokenPipeError. The same,
end to end, with a real worker killed: tests/airflow/test_e2e_session_faults.py."""
import pytest

from regionflow.operators.region import TaskSupervisorGone, supervised_log


def test_a_broken_log_pipe_is_told_as_the_supervisor_gone_and_other_errors_pass_unchanged():
    lines = []
    supervised_log(lines.append)("a line")
    assert lines == ["a line"]

    def broken(line):
        raise BrokenPipeError(32, "Broken pipe")

    with pytest.raises(TaskSupervisorGone, match="lost its supervisor .* Airflow worker process") as caught:
        supervised_log(broken)("a line")
    assert isinstance(caught.value.__cause__, BrokenPipeError)

    def full(line):
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left"):
        supervised_log(full)("a line")
