"""`regionflow run --reference`: the job's vertex functions once as one plain PySpark program (no regions), the
baseline every benchmark and the tests' reference answers compare with."""
from __future__ import annotations

import json
import os
import time
import uuid

from ..core.plan import Plan
from ..spark.data.filesystems import local_path
from ..spark.data.task import UnitTask
from ..spark.launch.pyfiles import build_py_files
from ..spark.launch.session_backend import apply_session_conf
from ..spark.launch.submission import default_conf, job_modules, unit_submission
from .runner import RunFailed, RunOptions, failure_reason, line_writer, run_values
from .summary import RunSummary


def run_reference(job_reference: str, plan: Plan, options: RunOptions) -> RunSummary:
    """The same vertex functions as one plain PySpark program (no regions): one spark-submit, or,
    given `options.servers`, a client session of the first host's Spark Connect server (benchmarks
    and tests compare both on the same server)."""
    run_id = options.run_id or f"reference-{uuid.uuid4().hex[:6]}"
    work_dir = os.path.join(local_path(options.data_dir), run_id)
    os.makedirs(work_dir, exist_ok=True)
    host = next(iter(options.cluster))
    result_path = os.path.join(work_dir, "reference.json")
    context, rendered = run_values(plan, options, run_id)
    task = UnitTask(job=job_reference, mode=plan.mode.value, run_id=run_id, data_dir=options.data_dir,
                    unit_key="reference", unit_name="reference", regions=[], attempt_id="reference",
                    host=host.name, reference=True, result_path=result_path, context=context.to_dict(),
                    rendered=rendered)
    if options.servers is not None:
        server = options.servers.server(host.name)
        return _reference_in_session(plan, task, server.url, default_conf(host.slots, options.job_conf), server.token)
    py_files = build_py_files(os.path.join(work_dir, "py"), job_modules(job_reference))
    submission = unit_submission(task, os.path.join(work_dir, "reference-task.json"), host, host.slots,
                                 options.job_conf, py_files,
                                 on_line=line_writer(os.path.join(work_dir, "reference.log")), forward_output=False)
    started = time.monotonic()
    result = submission.run()
    if not result.ok:
        raise RunFailed(f"the reference run of {plan.graph.name} failed: {failure_reason(result)}")
    with open(result_path, encoding="utf-8") as handle:
        sinks = json.load(handle)["sinks"]
    return RunSummary(plan.graph.name, plan.mode.value, run_id, time.monotonic() - started,
                      sinks=sinks, reference=True)


def _reference_in_session(plan: Plan, task: UnitTask, url: str, job_conf: dict[str, str],
                          token: str | None) -> RunSummary:
    from ..spark.driver.program import run_reference as run_reference_program
    from ..spark.servers.auth import remote_session

    started = time.monotonic()
    spark = remote_session(url, token)
    try:
        apply_session_conf(spark, job_conf)
        sinks = run_reference_program(spark, plan, task)["sinks"]
    except Exception as error:  # noqa: BLE001 - reported like a failed reference submission
        raise RunFailed(f"the reference run of {plan.graph.name} failed: {error}") from error
    finally:
        spark.stop()
    return RunSummary(plan.graph.name, plan.mode.value, task.run_id, time.monotonic() - started,
                      sinks=sinks, reference=True)


__all__ = ["run_reference"]
