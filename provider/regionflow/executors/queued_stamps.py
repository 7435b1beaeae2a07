"""Keeping Airflow's stuck-in-queued check on the tries that really are stuck.

Airflow 3.3's scheduler takes a task instance for stuck when it has been QUEUED (by this scheduler) since
before ``now - [scheduler] task_queued_timeout``, reading ``queued_dttm`` from its database; it then asks the
executor to revoke it and queues it again (at most twice) or fails it. Its loop over one executor's stuck
tries ends at the first ``NotImplementedError`` of ``revoke_task``, so declining one try there would leave
every stuck try behind it in place for that pass.

A try of the RegionExecutor is QUEUED while it waits for its slot bulk, which may rightly take longer than
the timeout (FIFO order on a busy cluster). So the executor keeps such a try's ``queued_dttm`` fresh: a try
seen waiting has it set to now whenever its last stamp is older than a third of the timeout, so the
scheduler's query never returns it. A try handed to the workers is stamped once then, if it waited: from
there the timeout runs as for LocalExecutor, and a try whose worker never started it is stuck and revoked.
Airflow's UI then shows the time of the last stamp as the try's queued time.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterable

STAMP_FRACTION = 1 / 3  # a waiting try's queued time is renewed once it is this fraction of the timeout old
HANDED_FRACTION = 0.1  # a handed try is stamped when its queued time is older than this fraction of the timeout
# A try Airflow takes for stuck less than this fraction of the timeout after it was handed to the workers was
# selected on a queued time the executor could not renew in time (Airflow queued it a moment before the
# executor handed it over, or a stamp failed), not because its worker never started it: it keeps its slots.
STARTING_FRACTION = 0.5


class QueuedStamps:
    """When to renew the queued time of which task instances (by id); `write` renews them in Airflow's
    database (those still QUEUED)."""

    def __init__(self, timeout_s: float, write: Callable[[list[str]], None],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.renew_after_s = max(timeout_s * STAMP_FRACTION, 0.5)
        self.handed_after_s = max(timeout_s * HANDED_FRACTION, 0.5)
        self.write = write
        self.clock = clock
        self.stamped: dict[str, float] = {}  # task instance id -> when its queued time was last known fresh

    def tick(self, waiting: Iterable[str]) -> list[str]:
        """Renew the queued time of the `waiting` tries that are due; forget tries no longer waiting. A try
        first seen here counts as queued now (Airflow queued it moments before handing it over)."""
        now = self.clock()
        current = set(waiting)
        for gone in self.stamped.keys() - current:
            del self.stamped[gone]
        due = sorted(ti for ti in current if now - self.stamped.setdefault(ti, now) >= self.renew_after_s)
        if due:
            self.write(due)
            for ti in due:
                self.stamped[ti] = now
        return due

    def handed(self, ti_id: str) -> bool:
        """Try `ti_id` goes to the workers: stamp it if it waited long enough for its stamp to age; True if
        stamped. A try never seen waiting was queued moments ago."""
        last = self.stamped.pop(ti_id, None)
        if last is None or self.clock() - last < self.handed_after_s:
            return False
        self.write([ti_id])
        return True


__all__ = ["STARTING_FRACTION", "QueuedStamps"]
