"""Every private member of Airflow or of its Spark provider that regionflow touches, in one place.

Each is used because no public interface does the job; each is checked by
``tests/test_airflow_internals.py``, which fails when a release of Airflow or of the provider changes it
(so an upgrade breaks a test here, not a scheduler in production).

- LocalExecutor's worker hand-off (`hand_to_local_workers`): the RegionExecutor holds a workload until
  its slots are granted, then gives it to LocalExecutor's worker processes exactly as
  ``LocalExecutor._process_workloads`` does (put it on ``activity_queue``, count it in
  ``_unread_messages``, ``_check_workers()``). The public path, ``queue_workload`` + ``heartbeat``, would
  hand over every queued workload at once, which is what the slot pool must prevent.
- SparkSubmitHook's log (`capture_hook_log`): the hook logs spark-submit's output through
  ``LoggingMixin.log``, which returns the per-instance ``_log``; setting it is the only way to read
  the output line by line (the region task's progress and the tail kept for errors) without
  re-implementing the hook.
- SparkSubmitHook's process (`hook_process`): ``submit()`` keeps the spark-submit ``Popen`` in
  ``_submit_sp`` and offers no accessor; regionflow needs its pid to kill the process group of an
  attempt that lost the commit race or its host.
- The template rendering hook (`RenderFailureHook`): a mapped task (a region of several shards) is rendered
  by ``MappedOperator.render_template_fields`` through the unmapped task's ``_do_render_template_fields``,
  never through the public ``render_template_fields``; overriding that hook is the only way for the region
  task to name the vertex and the field of a template that failed, mapped or not.
"""
from __future__ import annotations

from typing import Any


def hand_to_local_workers(executor: Any, workload: Any) -> None:
    """Give one workload to a started LocalExecutor's worker processes (see the module docstring)."""
    executor.activity_queue.put(workload)
    with executor._unread_messages:
        executor._unread_messages.value += 1
    executor._check_workers()


def capture_hook_log(hook: Any, logger: Any) -> None:
    """Make `logger` receive every line the hook logs (see the module docstring)."""
    hook._log = logger


def hook_process(hook: Any) -> Any:
    """The spark-submit process a hook started (``subprocess.Popen``), or None before ``submit()``."""
    return getattr(hook, "_submit_sp", None)


__all__ = ["capture_hook_log", "hand_to_local_workers", "hook_process"]


class RenderFailureHook:
    """Mixin for an operator: when rendering its own template fields fails, Airflow's error goes to
    ``self.template_render_failed(context, jinja_env, error)`` (which may raise a clearer one) before it is
    raised as is (see the module docstring)."""

    def _do_render_template_fields(self, parent: Any, template_fields: Any, context: Any, jinja_env: Any,
                                   seen_oids: set[int]) -> None:
        try:
            super()._do_render_template_fields(parent, template_fields, context, jinja_env,  # type: ignore[misc]
                                               seen_oids)
        except Exception as error:
            if parent is self:
                self.template_render_failed(context, jinja_env, error)
            raise

    def template_render_failed(self, context: Any, jinja_env: Any, error: Exception) -> None:
        """Called with Airflow's rendering error; raise a clearer one, or return to let it be raised."""
