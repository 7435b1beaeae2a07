"""A really slow host for tests and benchmarks: CPU hogs pinned to the host's cores.

A host with ``affinity=0`` runs its Spark submissions on core 0 only; busy-looping processes
pinned to core 0 then take most of that core, so the host's JVMs and Python workers really run
slower (no sleeps inside the job).

Why each hog gets its own session and a lowered nice: with the kernel's autogroup scheduling
(``/proc/sys/kernel/sched_autogroup_enabled``, on by default) CPU time is shared between sessions
first, and regionflow starts every spark-submit in a new session. Hogs started in the caller's
session would count as one contender however many there are (four of them slowed core 0 only
about 2x, while the unpinned Airflow stack moved to core 1 and slowed host b as much). A hog
in its own session is its own contender, and a negative autogroup nice (root or CAP_SYS_NICE)
gives each the weight of several: 2 hogs at nice -10 made a pinned loop 20x slower here,
4 hogs at nice 0 about 5x. Without the privilege the nice is skipped and said so.
"""
from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Iterable

log = logging.getLogger(__name__)

HOG_PROGRAM = "import os, sys\nos.sched_setaffinity(0, {int(c) for c in sys.argv[1:]})\nwhile True:\n    pass\n"


class CpuHogs:
    """`count` busy loops on `cores`, each in its own session at `nice`; a context manager."""

    def __init__(self, cores: Iterable[int], count: int = 2, nice: int = -10) -> None:
        self.cores = tuple(sorted(set(int(core) for core in cores)))
        if not self.cores:
            raise ValueError("CpuHogs needs at least one core id, e.g. CpuHogs([0])")
        unknown = set(self.cores) - os.sched_getaffinity(0)
        if unknown:
            raise ValueError(f"CpuHogs: cores {sorted(unknown)} are not usable here "
                             f"(usable: {sorted(os.sched_getaffinity(0))})")
        if count < 1:
            raise ValueError(f"CpuHogs: count={count} must be at least 1")
        self.count = count
        self.nice = nice
        self.processes: list[subprocess.Popen] = []
        self.niced = False

    @property
    def running(self) -> bool:
        return bool(self.processes)

    def start(self) -> CpuHogs:
        if self.processes:
            return self
        argv = [sys.executable, "-c", HOG_PROGRAM, *map(str, self.cores)]
        self.processes = [subprocess.Popen(argv, start_new_session=True, stdin=subprocess.DEVNULL)
                          for _ in range(self.count)]
        self.niced = all(renice(process.pid, self.nice) for process in self.processes)
        log.info("%d CPU hogs on cores %s (nice %s)", self.count, list(self.cores),
                 self.nice if self.niced else "0: no privilege to lower it")
        return self

    def stop(self) -> None:
        processes, self.processes = self.processes, []  # a second stop() finds nothing to kill
        for process in processes:
            process.kill()
        for process in processes:
            process.wait(timeout=10)

    def __enter__(self) -> CpuHogs:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def renice(pid: int, nice: int) -> bool:
    """Set the process's nice and, where autogroup scheduling is on, its session's; False if refused."""
    if nice == 0:
        return True
    try:
        os.setpriority(os.PRIO_PROCESS, pid, nice)
        autogroup = f"/proc/{pid}/autogroup"
        if os.path.exists(autogroup):
            with open(autogroup, "w") as handle:
                handle.write(str(nice))
        return True
    except OSError as error:
        log.warning("cannot set nice %d on CPU hog %d: %s", nice, pid, error)
        return False


__all__ = ["CpuHogs", "renice"]
