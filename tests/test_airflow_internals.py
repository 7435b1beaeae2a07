"""Tripwires for the private members of Airflow and of its Spark provider that regionflow touches
(`regionflow.airflow_internals`): each test fails when an installed release changes what we rely on."""
from __future__ import annotations

import inspect
import logging
import multiprocessing
from queue import SimpleQueue

from airflow.executors.local_executor import LocalExecutor
from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

from regionflow.airflow_internals import RenderFailureHook, capture_hook_log, hand_to_local_workers, hook_process


def test_local_executor_hands_workloads_to_its_workers_the_way_we_copy():
    process = inspect.getsource(LocalExecutor._process_workloads)
    for step in ("self.activity_queue.put(workload)", "self._unread_messages", "self._check_workers()"):
        assert step in process, f"LocalExecutor._process_workloads no longer does {step!r}: " \
                                "update hand_to_local_workers"
    start = inspect.getsource(LocalExecutor.start)
    assert "self.activity_queue" in start and "self._unread_messages" in start


def test_hand_to_local_workers_puts_counts_and_checks_like_local_executor():
    class Started:  # the three members LocalExecutor.start() creates, of the same types
        def __init__(self):
            self.activity_queue = SimpleQueue()
            self._unread_messages = multiprocessing.Value("I", 0)
            self.checked = 0

        def _check_workers(self):
            self.checked += 1

    workers = Started()
    hand_to_local_workers(workers, "w1")
    assert workers.activity_queue.get_nowait() == "w1"
    assert workers._unread_messages.value == 1 and workers.checked == 1


def test_the_spark_submit_hook_logs_through_the_logger_we_set():
    hook = object.__new__(SparkSubmitHook)  # no connection needed: only the logging attribute is checked
    logger = logging.getLogger("regionflow-capture-test")
    capture_hook_log(hook, logger)
    assert hook.log is logger, "SparkSubmitHook.log no longer returns the per-instance _log: update capture_hook_log"


def test_the_spark_submit_hook_keeps_its_process_where_we_read_it():
    assert "self._submit_sp = " in inspect.getsource(SparkSubmitHook.submit), \
        "SparkSubmitHook.submit no longer keeps its Popen in _submit_sp: update hook_process"
    hook = object.__new__(SparkSubmitHook)
    assert hook_process(hook) is None
    hook._submit_sp = marker = object()
    assert hook_process(hook) is marker


def test_mapped_and_plain_tasks_render_through_the_hook_we_override():
    from airflow.sdk import BaseOperator
    from airflow.sdk.definitions.mappedoperator import MappedOperator

    for method in (MappedOperator.render_template_fields, BaseOperator.render_template_fields):
        assert "._do_render_template_fields(" in inspect.getsource(method), \
            f"{method.__qualname__} no longer renders through _do_render_template_fields: update RenderFailureHook"
    assert "_do_render_template_fields" in RenderFailureHook.__dict__
