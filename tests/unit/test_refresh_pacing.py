"""Checkpoint reports refresh their job's status paced: each job no sooner than the floor, all together at
most the budget, whatever the number of jobs or reports. A fake clock."""

from __future__ import annotations

import pytest

from ftspark.reconcile.pacing import RefreshPacer, Requeue, WaitBackoff
from tests.unit.test_queue import FakeClock


def test_a_job_reporting_every_batch_is_refreshed_once_per_floor() -> None:
    clock = FakeClock()
    pacer: RefreshPacer[str] = RefreshPacer(floor=5.0, per_second=20.0, clock=clock)
    scheduled = []
    for tick in range(30):  # a report a second for 30 s
        clock.now = float(tick)
        if (delay := pacer.delay("a")) is not None:
            scheduled.append(clock.now + delay)
    # The reports in between ride along with the refresh already scheduled.
    assert scheduled == [5.0, 10.0, 15.0, 20.0, 25.0, 30.0]


def test_few_jobs_each_get_the_floor() -> None:
    clock = FakeClock()
    pacer: RefreshPacer[str] = RefreshPacer(floor=5.0, per_second=20.0, clock=clock)
    delays = [pacer.delay(f"job-{i}") for i in range(100)]
    assert all(d is not None and 5.0 <= d < 5.0 + 100 / 20.0 for d in delays)


def test_many_jobs_are_spread_at_the_budget_in_report_order() -> None:
    clock = FakeClock()
    pacer: RefreshPacer[str] = RefreshPacer(floor=5.0, per_second=20.0, clock=clock)
    delays = [pacer.delay(f"job-{i}") or 0.0 for i in range(5000)]
    assert delays == sorted(delays), "first reported, first refreshed"
    assert delays[-1] == pytest.approx(5.0 + 4999 / 20.0)
    # A second report from every job before its refresh is due asks for nothing more.
    clock.now = 100.0
    assert [pacer.delay(f"job-{i}") for i in range(2000, 5000)] == [None] * 3000
    # Whatever was due by now may be scheduled again, behind the jobs still waiting.
    again = pacer.delay("job-0")
    assert again == pytest.approx(5.0 + 5000 / 20.0 - 100.0)


def test_the_budget_holds_over_time_whatever_the_reports() -> None:
    clock = FakeClock()
    pacer: RefreshPacer[int] = RefreshPacer(floor=5.0, per_second=20.0, clock=clock)
    due: list[float] = []
    for step in range(600):  # 60 s: 1,000 jobs each reporting every 2 s
        clock.now = step / 10
        for job in range(step % 20, 1000, 20):
            if (delay := pacer.delay(job)) is not None:
                due.append(clock.now + delay)
    window = [t for t in due if 30.0 <= t < 60.0]
    assert len(window) <= 30 * 20 + 1
    assert len(window) >= 30 * 20 - 1, "the budget is used, not left idle while jobs wait"


@pytest.mark.parametrize(("floor", "per_second"), [(-1.0, 20.0), (5.0, 0.0), (5.0, -2.0)])
def test_a_meaningless_setting_is_refused(floor: float, per_second: float) -> None:
    with pytest.raises(ValueError, match="floor"):
        RefreshPacer(floor=floor, per_second=per_second)


def test_waits_that_change_nothing_back_off_to_the_ceiling_and_anything_else_starts_again() -> None:
    waits: WaitBackoff[str] = WaitBackoff(ceiling=8.0)
    idle = Requeue(1.0, idle_wait=True)
    assert [waits.after("a", idle) for _ in range(6)] == [1.0, 2.0, 4.0, 8.0, 8.0, 8.0]
    assert waits.after("b", idle) == 1.0, "per job"
    assert waits.after("a", Requeue(1.0)) == 1.0, "a pass that changed something"
    assert waits.after("a", idle) == 1.0
    assert waits.after("a", Requeue(None)) is None
    assert waits.after("a", idle) == 1.0
    assert waits.after("a", Requeue(30.0)) == 30.0
    assert max(waits.after("c", idle) or 0.0 for _ in range(2000)) == 8.0, "bounded however long it waits"
