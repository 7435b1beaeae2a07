"""How two attempts share one Spark Connect server's cores, and how fast a cancelled one frees them.

Each probe job is ``tasks`` one-row partitions whose Python UDF sleeps ``task_seconds`` and returns
when it started and ended (wall clock of this machine, which the server shares), so the figures are
read from the tasks themselves, not from Spark's listeners (which a Connect client cannot register).

- `share_cores`: attempt ``a`` fills every core of the server, attempt ``b`` (granted the other half)
  comes ``b_delay`` seconds later. Reported: how long ``b`` waited for its first core, and the most
  tasks each attempt ran at once while both had work.
- `free_cores_after_cancel`: an attempt holds every core with long tasks (sleeping in Python, or
  spinning in the JVM) and is interrupted by its tag (what `SessionSubmission.kill` does); reported:
  how long after the interrupt a job needing every core had all its tasks running. Spark notices an
  interrupted Python task within 2 s (its monitor polls every 2 s, hard-coded) and then kills the
  worker after ``spark.python.task.killTimeout`` (0.1 s on regionflow's servers, 2 s by default).
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TaskSpan:
    """One probe task: the attempt that ran it and when it ran (epoch seconds)."""

    attempt: str
    start: float
    end: float


@dataclass(frozen=True)
class Sharing:
    """Figures of `share_cores`."""

    b_wait_s: float  # b's submission to its first task's start
    a_most_at_once: int  # a's most concurrent tasks while b had work
    b_most_at_once: int
    spans: tuple[TaskSpan, ...]


def _probe_job(spark: Any, tasks: int, task_seconds: float) -> Any:
    from pyspark.sql.functions import col, udf

    @udf("string")
    def sleep_and_time(_):  # type: ignore[no-untyped-def]  # (hints would make pyspark warn)
        import time as clock

        began = clock.time()
        clock.sleep(task_seconds)
        return f"{began},{clock.time()}"

    return spark.range(0, tasks, 1, tasks).select(sleep_and_time(col("id")).alias("span"))


def _tagged(spark: Any, tag: str, job: Callable[[], Any], errors: list[BaseException]) -> Any:
    """`job()` under the session tag `tag` (tags are per thread), its error kept in `errors`."""
    spark.addTag(tag)
    try:
        return job()
    except BaseException as error:  # noqa: BLE001 - reported to the caller
        errors.append(error)
        return None
    finally:
        spark.removeTag(tag)


def _run(spark: Any, tag: str, tasks: int, task_seconds: float, out: list[TaskSpan],
         errors: list[BaseException]) -> None:
    for row in _tagged(spark, tag, _probe_job(spark, tasks, task_seconds).collect, errors) or []:
        start, end = (float(x) for x in row["span"].split(","))
        out.append(TaskSpan(tag, start, end))


@contextmanager
def _warm_sessions(url: str, cores: int, token: str | None) -> Iterator[tuple[Any, Any]]:
    """Two client sessions (presenting the server's `token`) whose Python workers are up (so the clock
    starts on scheduling alone), stopped on exit."""
    from regionflow.spark.servers.auth import remote_session

    first, second = (remote_session(url, token) for _ in range(2))
    try:
        for session in (first, second):
            _probe_job(session, cores, 0.0).collect()
        yield first, second
    finally:
        first.stop()
        second.stop()


def most_at_once(spans: list[TaskSpan], attempt: str, since: float, until: float) -> int:
    """The most tasks of `attempt` running at one instant within [since, until]."""
    events = sorted([(max(s.start, since), 1) for s in spans if s.attempt == attempt and s.end > since
                     and s.start < until] +
                    [(min(s.end, until), -1) for s in spans if s.attempt == attempt and s.end > since
                     and s.start < until])
    running = most = 0
    for _, change in events:
        running += change
        most = max(most, running)
    return most


def share_cores(url: str, *, cores: int = 2, task_seconds: float = 1.0, a_tasks: int = 8, b_tasks: int = 4,
                b_delay: float = 0.5, token: str | None = None) -> Sharing:
    """Attempt a (``a_tasks`` tasks) fills the server; attempt b comes `b_delay` s later."""
    spans: list[TaskSpan] = []
    errors: list[BaseException] = []
    with _warm_sessions(url, cores, token) as (a, b):
        first = threading.Thread(target=_run, args=(a, "a", a_tasks, task_seconds, spans, errors))
        first.start()
        time.sleep(b_delay)
        b_submitted = time.time()
        _run(b, "b", b_tasks, task_seconds, spans, errors)
        first.join()
    if errors:
        raise errors[0]
    b_spans = [s for s in spans if s.attempt == "b"]
    both_until = min(max(s.end for s in spans if s.attempt == "a"), max(s.end for s in b_spans))
    b_first = min(s.start for s in b_spans)
    return Sharing(b_wait_s=b_first - b_submitted,
                   a_most_at_once=most_at_once(spans, "a", b_first, both_until),
                   b_most_at_once=most_at_once(spans, "b", b_first, both_until), spans=tuple(spans))


def free_cores_after_cancel(url: str, *, cores: int = 2, hold_seconds: float = 3.0, python: bool = True,
                            token: str | None = None) -> float:
    """Seconds from interrupting an attempt that holds every core to a new job having all its tasks
    running (each new task sleeps 1 s, so all `cores` of them overlap only if every core is free).
    The holder's tasks sleep in Python (`python`) or spin in the JVM."""
    spans: list[TaskSpan] = []
    errors: list[BaseException] = []
    with _warm_sessions(url, cores, token) as (doomed, next_one):
        if python:
            hold = _probe_job(doomed, cores, 600.0).collect
        else:
            hold = doomed.range(0, 10**13, 1, cores).filter("id % 1000000007 = -1").count
        holder = threading.Thread(target=_tagged, args=(doomed, "doomed", hold, errors))
        holder.start()
        time.sleep(hold_seconds)
        interrupted = time.time()
        doomed.interruptTag("doomed")
        _run(next_one, "next", cores, 1.0, spans, [])
        holder.join(60)
    if not errors:
        raise RuntimeError("the interrupted job finished instead of being cancelled")
    return max(s.start for s in spans) - interrupted


__all__ = ["Sharing", "TaskSpan", "free_cores_after_cancel", "most_at_once", "share_cores"]
