"""Scheduled runs in virtual time: the cron reading (time zones, clock changes) and what each pass decides."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from ftspark.domain.cron import CronSchedule
from ftspark.domain.models import ScheduleSpec, ScheduleStatus
from ftspark.domain.scheduling import Run, plan, run_name

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)  # a Monday
TEMPLATE = {
    "image": "img",
    "mainApplicationFile": "local:///job.py",
    "checkpoint": {"storage": "s3://bucket/j"},
}


def spec(**fields: Any) -> ScheduleSpec:
    return ScheduleSpec.model_validate({"schedule": "0 * * * *", "template": TEMPLATE, **fields})


def at(hours: float) -> datetime:
    return T0 + timedelta(hours=hours)


def test_cron_fields_names_both_day_fields_and_clock_changes() -> None:
    weekdays = CronSchedule.parse("30 9 * * mon-fri")
    assert weekdays.next_after(datetime(2026, 1, 3, tzinfo=UTC)) == datetime(2026, 1, 5, 9, 30, tzinfo=UTC)
    either = CronSchedule.parse("0 0 13 * fri")  # the 13th, or any Friday
    assert either.next_after(datetime(2026, 1, 1, tzinfo=UTC)) == datetime(2026, 1, 2, tzinfo=UTC)
    assert either.next_after(datetime(2026, 1, 12, 1, tzinfo=UTC)) == datetime(2026, 1, 13, tzinfo=UTC)
    paris = CronSchedule.parse("30 2 * * *", "Europe/Paris")
    # 29 March 2026: 02:00 becomes 03:00 in Paris, so 02:30 does not happen that day.
    assert paris.next_after(datetime(2026, 3, 28, 12, tzinfo=UTC)) == datetime(2026, 3, 30, 0, 30, tzinfo=UTC)
    # 25 October 2026: 02:30 happens twice; the schedule takes the first (summer time, UTC+2).
    assert paris.next_after(datetime(2026, 10, 24, 12, tzinfo=UTC)) == datetime(
        2026, 10, 25, 0, 30, tzinfo=UTC
    )
    assert CronSchedule.parse("@daily").latest(at(-48), at(0)) == datetime(2026, 1, 5, tzinfo=UTC)
    assert CronSchedule.parse("0 0 30 2 *").next_after(T0) is None, "30 February never comes"
    for wrong, says in (
        ("* * * *", "five fields"),
        ("60 * * * *", "minute"),
        ("* * * 13 *", "month"),
        ("*/0 * * * *", "step"),
        ("5-1 * * * *", "backwards"),
    ):
        with pytest.raises(ValueError, match=says):
            CronSchedule.parse(wrong)
    with pytest.raises(ValidationError, match="IANA"):
        spec(timeZone="Mars/Olympus")


def test_runs_missed_while_no_leader_start_once_the_latest_and_then_wait_for_the_next() -> None:
    made = at(-0.5)  # made at 08:30; no leader until 11:20: runs due at 09, 10 and 11 were missed
    first = plan("nightly", spec(), ScheduleStatus(), [], made, at(2 + 1 / 3))
    assert first.create == (run_name("nightly", at(2)), at(2)), "only the latest missed run"
    assert first.create[0] == f"nightly-{int(at(2).timestamp()) // 60}"
    assert first.status.last_schedule_time == at(2) and first.status.active == [first.create[0]]
    assert first.requeue_after == pytest.approx(40 * 60), "looked at again when the next one is due"
    again = plan("nightly", spec(), first.status, [], made, at(2.5))
    assert again.create is None, "never twice for one time"
    new = plan("nightly", spec(), ScheduleStatus(), [], at(0.5), at(0.9))
    assert new.create is None, "nothing due since it was made"


def test_concurrency_policies_decide_about_a_run_that_has_not_finished() -> None:
    running = Run("nightly-1", "uid-1", at(0))
    status = ScheduleStatus(last_schedule_time=at(0), active=["nightly-1"])
    forbid = plan("nightly", spec(), status, [running], at(-1), at(1))
    assert forbid.create is None and forbid.status.last_schedule_time == at(1)
    assert [e[1] for e in forbid.events] == ["RunSkipped"]
    replace = plan("nightly", spec(concurrencyPolicy="Replace"), status, [running], at(-1), at(1))
    assert replace.delete == (running,) and replace.create is not None
    assert replace.status.active == [replace.create[0]]
    allow = plan("nightly", spec(concurrencyPolicy="Allow"), status, [running], at(-1), at(1))
    assert allow.delete == () and allow.status.active == ["nightly-1", run_name("nightly", at(1))]


def test_suspend_a_starting_deadline_and_the_history_limits() -> None:
    suspended = plan("nightly", spec(suspend=True), ScheduleStatus(), [], at(-1), at(3))
    assert (suspended.create, suspended.requeue_after, suspended.status.next_schedule_time) == (
        None,
        None,
        None,
    )
    late = plan("nightly", spec(startingDeadlineSeconds=600), ScheduleStatus(), [], at(-1), at(2.5))
    assert late.create is None and [e[1] for e in late.events] == ["RunMissed"]
    assert late.status.last_schedule_time == at(2), "missed once, not again at every pass"
    finished = [Run(f"n-{h}", f"u{h}", at(h), "Succeeded") for h in range(5)]
    finished += [Run(f"f-{h}", f"v{h}", at(h), "Failed") for h in range(3)]
    kept = plan(
        "n",
        spec(successfulRunsHistoryLimit=2),
        ScheduleStatus(last_schedule_time=at(5)),
        finished,
        at(-1),
        at(5),
    )
    assert sorted(r.name for r in kept.delete) == ["f-0", "f-1", "n-0", "n-1", "n-2"], "the oldest go"
