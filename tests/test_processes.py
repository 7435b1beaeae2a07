"""`regionflow.processes.command_line`: what the embedded stack's stop reads to find LocalExecutor's idle workers."""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator

from regionflow.processes import command_line, thread_states, wait_until


@contextlib.contextmanager
def ready_child(*argv: str) -> Iterator[subprocess.Popen]:
    """`python -c argv...` whose script prints 'ready' once running and then reads stdin; it ends when
    the block does (its stdin closed)."""
    child = subprocess.Popen([sys.executable, "-c", *argv], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert child.stdout is not None and child.stdout.readline() == b"ready\n"  # running the script by now
        yield child
    finally:
        child.communicate(b"")


def test_command_line_is_the_argv_joined_by_spaces_then_empty_once_the_process_has_exited():
    script = "import sys; print('ready', flush=True); sys.stdin.read()"
    with ready_child(script, "an arg") as child:
        assert command_line(child.pid) == f"{sys.executable} -c {script} an arg"
    assert command_line(child.pid) == ""


def test_a_title_set_with_setproctitle_is_read_as_set():
    script = "import setproctitle, sys; setproctitle.setproctitle('airflow worker -- LocalExecutor: <idle>'); " \
             "print('ready', flush=True); sys.stdin.read()"
    with ready_child(script) as child:
        assert command_line(child.pid).endswith("LocalExecutor: <idle>")


def test_thread_states_read_each_thread_stopped_then_nothing_once_the_process_exited():
    script = "import sys, threading; threading.Thread(target=sys.stdin.read, daemon=True).start(); " \
             "print('ready', flush=True); sys.stdin.read()"
    with ready_child(script) as child:
        assert len(thread_states(child.pid)) == 2 and "T" not in thread_states(child.pid)
        os.kill(child.pid, signal.SIGSTOP)
        assert wait_until(lambda: thread_states(child.pid) == ["T", "T"], 10, 0.01), thread_states(child.pid)
        os.kill(child.pid, signal.SIGCONT)
    assert thread_states(child.pid) == []
