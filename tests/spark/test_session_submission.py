"""A session attempt always ends with a result, even when its log is gone as its vertex fails: the parent watch
interrupted the session of an orphaned task process (its supervising worker was killed), the vertex failed with
the interruption, and writing that failure met the broken log pipe. The attempt must end killed, as the watch
made it (it used to raise out of `run`, leaving the attempt unrecorded until the executor swept it up), or, when
nobody killed it, failed saying why its log is gone. No server: the session's connection is where the vertex
fails here."""
from regionflow.operators.region import TaskSupervisorGone
from regionflow.spark.data.task import UnitTask
from regionflow.spark.driver.computer import VertexFailure
from regionflow.spark.launch.session_backend import EXIT_FAILED, SessionSubmission


def broken_log(line):
    raise TaskSupervisorGone("the task process lost its supervisor (its log pipe is broken)")


class VertexFailsOnConnect(SessionSubmission):
    """The vertex fails as the attempt starts; `killed_first`: the parent watch killed the attempt before."""

    killed_first = False

    def _connect(self, note):
        if self.killed_first:
            self.kill(wait=False)
        raise VertexFailure("orders", "orders#0-3", self.task.attempt_id,
                            RuntimeError("[NO_ACTIVE_SESSION] No active Spark session found"))


def submission(tmp_path, killed_first):
    task = UnitTask(job="regionflow.examples.orders:job", mode="all-blocking", run_id="r1", data_dir=str(tmp_path),
                    unit_key="u0", unit_name="orders[0]", regions=[0], attempt_id="try1-orphan", host="a")
    made = VertexFailsOnConnect(task, "sc://127.0.0.1:1", 1, on_line=broken_log, serving=lambda: True)
    made.killed_first = killed_first
    return made


def test_a_killed_attempt_whose_vertex_failure_cannot_be_logged_ends_killed(tmp_path):
    result = submission(tmp_path, killed_first=True).run()
    assert result.killed and not result.ok, result
    assert any("regionflow: error: vertex 'orders'" in line for line in result.log_tail), result.log_tail


def test_an_attempt_whose_vertex_failure_cannot_be_logged_fails_saying_why(tmp_path):
    result = submission(tmp_path, killed_first=False).run()
    assert not result.killed and result.returncode == EXIT_FAILED, result
    assert result.error.startswith("TaskSupervisorGone: the task process lost its supervisor"), result.error
