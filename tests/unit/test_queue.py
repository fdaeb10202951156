"""The work queue's guarantees, with a fake clock."""

from __future__ import annotations

import random
import threading

from ftspark.reconcile.queue import K, WorkQueue


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


def _drain(queue: WorkQueue[K]) -> list[K]:
    handed: list[K] = []
    while (key := queue.get(0)) is not None:
        handed.append(key)
        queue.done(key)
    return handed


def test_urgent_keys_go_first_and_each_lane_keeps_its_order() -> None:
    queue: WorkQueue[str] = WorkQueue()
    for key in ("bulk-1", "bulk-2", "bulk-3"):
        queue.add(key)
    queue.add("failed-1", urgent=True)
    queue.add("failed-2", urgent=True)
    assert _drain(queue) == ["failed-1", "failed-2", "bulk-1", "bulk-2", "bulk-3"]


def test_namespaces_take_turns_in_each_lane_and_keep_their_own_order() -> None:
    """One tenant's burst (a thousand new jobs, or failing ones in the urgent lane) does not starve another:
    its keys wait behind each other, not in front of the other namespace's."""
    queue: WorkQueue[str] = WorkQueue(tenant_of=lambda key: key.split("/")[0])
    for n in range(4):
        queue.add(f"noisy/new-{n}")
        queue.add(f"noisy/failed-{n}", urgent=True)
    queue.add("quiet/new")
    queue.add("quiet/failed", urgent=True)
    assert _drain(queue) == [
        "noisy/failed-0",
        "quiet/failed",
        "noisy/failed-1",
        "noisy/failed-2",
        "noisy/failed-3",
        "noisy/new-0",
        "quiet/new",
        "noisy/new-1",
        "noisy/new-2",
        "noisy/new-3",
    ]


def test_an_urgent_add_moves_a_queued_key_ahead_once_and_never_back() -> None:
    queue: WorkQueue[str] = WorkQueue()
    for key in ("a", "b", "c"):
        queue.add(key)
    queue.add("c", urgent=True)
    queue.add("c")  # a bulk add of a key already urgent changes nothing
    assert len(queue) == 3
    assert _drain(queue) == ["c", "a", "b"], "c handed out once, from the urgent lane"


def test_a_key_urgently_added_while_handled_is_handled_again_ahead_of_bulk() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("a")
    queue.add("b")
    assert queue.get(0) == "a"
    queue.add("a")
    queue.add("a", urgent=True)
    queue.done("a")
    assert _drain(queue) == ["a", "b"]


def test_a_follow_up_of_urgent_work_is_urgent_a_later_periodic_check_is_not() -> None:
    clock = FakeClock()
    queue: WorkQueue[str] = WorkQueue(clock, urgent_follow_up_seconds=60)
    queue.add("failed", urgent=True)
    queue.add("polled", urgent=True)
    assert queue.get(0) == "failed"
    queue.done("failed", again_after=1.0)  # the restart delay
    assert queue.get(0) == "polled"
    queue.done("polled", again_after=300.0)  # a periodic check
    clock.now = 400
    for key in ("new-1", "new-2"):
        queue.add(key)
    assert _drain(queue) == ["failed", "new-1", "new-2", "polled"]


def test_an_urgent_schedule_later_than_a_bulk_one_makes_the_earlier_one_urgent() -> None:
    clock = FakeClock()
    queue: WorkQueue[str] = WorkQueue(clock)
    queue.add_after("a", 5)
    queue.add_after("a", 10, urgent=True)
    queue.add("b")
    clock.now = 5
    assert _drain(queue) == ["a", "b"]
    clock.now = 20
    assert queue.get(0) is None, "the later schedule was dropped"


def _model_schedule(
    pending: set[int], scheduled: dict[int, float], key: int, now: float, seconds: float
) -> None:
    """The queue's rule: no delay is an add (an earlier schedule stays); else the earliest schedule wins."""
    if seconds <= 0:
        pending.add(key)
    else:
        scheduled[key] = min(scheduled.get(key, float("inf")), now + seconds)


def test_random_operations_keep_the_guarantees() -> None:
    """Against a model: a key is never handed to two workers at once, never handed out without an add (or a
    due schedule) since it was last handed out, and every add is followed by a hand-out."""
    rng = random.Random(7)
    clock = FakeClock()
    queue: WorkQueue[int] = WorkQueue(clock, urgent_follow_up_seconds=5)
    processing: set[int] = set()
    pending: set[int] = set()  # added (or due) since last handed out
    scheduled: dict[int, float] = {}
    for _ in range(20_000):
        op = rng.random()
        key = rng.randrange(12)
        if op < 0.35:
            queue.add(key, urgent=rng.random() < 0.3)
            pending.add(key)
        elif op < 0.45:
            seconds = rng.choice((0.0, 1.0, 3.0, 8.0))
            queue.add_after(key, seconds, urgent=rng.random() < 0.3)
            _model_schedule(pending, scheduled, key, clock.now, seconds)
        elif op < 0.75:
            taken = queue.get(0)
            if taken is not None:
                assert taken not in processing, "handed to two workers"
                assert taken in pending, "handed out with nothing added"
                processing.add(taken)
                pending.discard(taken)
        elif op < 0.95 and processing:
            done = rng.choice(sorted(processing))
            processing.discard(done)
            again = rng.choice((None, None, 0.0, 2.0, 10.0))
            queue.done(done, again_after=again)
            if again is not None:
                _model_schedule(pending, scheduled, done, clock.now, again)
        else:
            clock.now += rng.choice((0.5, 2.0, 6.0))
        for due_key, due in list(scheduled.items()):
            if due <= clock.now:
                pending.add(due_key)
                del scheduled[due_key]
    for key in sorted(processing):
        queue.done(key)
    clock.now += 100
    for key in scheduled:
        pending.add(key)
    handed = _drain(queue)
    assert sorted(handed) == sorted(pending), "every add was followed by a hand-out, once"
