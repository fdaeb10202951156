"""The work queue's guarantees, with a fake clock."""

from __future__ import annotations

import threading

from ftspark.reconcile.queue import WorkQueue


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_key_is_queued_once_and_never_handed_to_two_workers() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("a")
    queue.add("a")
    queue.add("b")
    assert queue.get(0) == "a"
    queue.add("a")  # while being processed: remembered, not handed out
    assert queue.get(0) == "b"
    assert queue.get(0) is None
    queue.done("a")
    assert queue.get(0) == "a"


def test_add_after_keeps_only_the_earliest_schedule() -> None:
    clock = FakeClock()
    queue: WorkQueue[str] = WorkQueue(clock)
    queue.add_after("a", 10)
    queue.add_after("a", 5)
    queue.add_after("a", 30)
    clock.now = 4.9
    assert queue.get(0) is None
    clock.now = 5.0
    assert queue.get(0) == "a"
    queue.done("a")
    clock.now = 100
    assert queue.get(0) is None, "the 10 s and 30 s schedules were superseded"


def test_shutdown_wakes_blocked_workers() -> None:
    queue: WorkQueue[str] = WorkQueue()
    results: list[str | None] = []
    worker = threading.Thread(target=lambda: results.append(queue.get()))
    worker.start()
    queue.shut_down()
    worker.join(5)
    assert results == [None]
