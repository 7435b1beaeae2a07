"""The Spark Connect client's modules are imported once in the scheduler, before LocalExecutor forks its workers
(`regionflow.executors.preload`): on the session backend only, with the fork start method only, and a module
that cannot be imported is logged and skipped."""
import os
import subprocess
import sys
import textwrap

from regionflow.executors.preload import SESSION_CLIENT_MODULES, preload_task_modules


class Log:
    def __init__(self):
        self.lines = []

    def info(self, message, *args):
        self.lines.append(("info", message % args))

    def warning(self, message, *args):
        self.lines.append(("warning", message % args))


def test_the_session_backend_imports_the_client_modules_in_the_scheduler_when_the_workers_are_forked():
    imported, log = [], Log()
    loaded = preload_task_modules("session", True, log, import_module=imported.append)
    assert imported == list(SESSION_CLIENT_MODULES) == list(loaded)
    assert [level for level, _ in log.lines] == ["info"]


def test_nothing_is_imported_for_the_submit_backend_or_spawned_workers():
    imported = []
    assert preload_task_modules("submit", True, Log(), import_module=imported.append) == ()
    assert preload_task_modules("session", False, Log(), import_module=imported.append) == ()
    assert imported == []


def test_a_module_that_cannot_be_imported_is_logged_and_the_others_are_still_loaded():
    broken = SESSION_CLIENT_MODULES[1]

    def import_module(name):
        if name == broken:
            raise ImportError("No module named 'pyarrow'")

    log = Log()
    loaded = preload_task_modules("session", True, log, import_module=import_module)
    assert list(loaded) == [m for m in SESSION_CLIENT_MODULES if m != broken]
    [warning] = [line for level, line in log.lines if level == "warning"]
    assert broken in warning and "No module named 'pyarrow'" in warning


def test_the_executors_forked_workers_have_the_client_loaded_and_the_scheduler_had_none_before(tmp_path):
    """A real RegionExecutor in a fresh interpreter: pyarrow (which pyspark's Connect client loads) is not loaded
    before start(), and after it every LocalExecutor worker process maps Arrow's library, so it was forked after
    the preload."""
    script = textwrap.dedent("""
        import sys
        from regionflow.executors import RegionExecutor
        assert "pyarrow" not in sys.modules, "loaded before start()"
        ex = RegionExecutor(parallelism=2)
        ex.start()
        try:
            workers = list(ex.workers)
            maps = {pid: open(f"/proc/{pid}/maps").read() for pid in workers}
            print("workers", len(workers), "with Arrow", sum("libarrow" in text for text in maps.values()))
        finally:
            ex.end()
    """)
    env = {**os.environ, "AIRFLOW__REGIONFLOW__HOSTS": "a:slots=2", "AIRFLOW__REGIONFLOW__BACKEND": "session",
           "AIRFLOW__REGIONFLOW__STORE_URL": f"sqlite:///{tmp_path}/regionflow.db",
           "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(tmp_path / "logs"), "AIRFLOW_HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    [line] = [line for line in done.stdout.splitlines() if line.startswith("workers ")]
    assert line == "workers 2 with Arrow 2", done.stdout[-3000:]
