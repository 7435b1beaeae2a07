"""`QueuedStamps`: when the executor renews the queued time of which tries in Airflow's database (a
recording writer and a fake clock; the executor and the real scheduler: tests/airflow)."""
from __future__ import annotations

from regionflow.executors.queued_stamps import QueuedStamps


def stamps(timeout_s=600.0):
    written: list[list[str]] = []
    now = [0.0]
    return QueuedStamps(timeout_s, written.append, clock=lambda: now[0]), written, now


def test_waiting_tries_are_renewed_a_third_of_the_timeout_after_they_were_last_fresh_in_one_write():
    clock_stamps, written, now = stamps()
    clock_stamps.tick(["a"])
    now[0] = 100.0
    clock_stamps.tick(["a", "b"])  # b first seen: queued moments ago
    now[0] = 199.9
    assert clock_stamps.tick(["a", "b"]) == [] and written == []
    now[0] = 200.0
    assert clock_stamps.tick(["a", "b"]) == ["a"]
    now[0] = 300.0
    assert clock_stamps.tick(["b", "a"]) == ["b"]
    now[0] = 400.0
    assert clock_stamps.tick(["a", "b"]) == ["a"]
    now[0] = 600.0
    assert clock_stamps.tick(["a", "b"]) == ["a", "b"]
    assert written == [["a"], ["b"], ["a"], ["a", "b"]]


def test_a_try_that_left_the_queue_is_forgotten():
    clock_stamps, written, now = stamps()
    clock_stamps.tick(["a", "b"])
    now[0] = 150.0
    clock_stamps.tick(["b"])
    assert set(clock_stamps.stamped) == {"b"}
    now[0] = 500.0
    clock_stamps.tick(["a", "b"])  # a came back (queued again): fresh, b is due
    assert written == [["b"]]


def test_a_handed_try_is_stamped_once_if_it_waited_and_not_if_it_was_granted_at_once():
    clock_stamps, written, now = stamps()
    assert clock_stamps.handed("never-waited") is False
    clock_stamps.tick(["short", "long"])
    now[0] = 59.0
    assert clock_stamps.handed("short") is False  # queued under a tenth of the timeout ago
    now[0] = 61.0
    assert clock_stamps.handed("long") is True
    assert written == [["long"]] and clock_stamps.stamped == {}


def test_a_failed_write_is_tried_again_at_the_next_tick():
    failures = [RuntimeError("database is locked")]
    written: list[list[str]] = []

    def write(ids):
        if failures:
            raise failures.pop()
        written.append(ids)

    now = [0.0]
    clock_stamps = QueuedStamps(9.0, write, clock=lambda: now[0])
    clock_stamps.tick(["a"])
    now[0] = 3.0
    try:
        clock_stamps.tick(["a"])
    except RuntimeError:
        pass
    now[0] = 3.5
    assert clock_stamps.tick(["a"]) == ["a"] and written == [["a"]]
