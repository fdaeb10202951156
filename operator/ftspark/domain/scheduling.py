"""Scheduled runs (ScheduledSparkJob), decided: which run to start, which to delete, what to record.

A run is a FaultTolerantSparkJob of its own, named after the minute it was due (<name>-<minutes since the
epoch>): whoever leads creates the same name, so a run is started once even by two leaders, one of them
deposed. Only the latest time due since the last one acted on is started: runs missed while no operator led
start once, not one per missed time (as a Kubernetes CronJob does).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from ftspark.domain.models import ScheduleSpec, ScheduleStatus

# A run's name: the schedule's, a dash and up to 9 digits of minutes, within a job's 40 characters.
MAX_SCHEDULE_NAME_LENGTH = 30
EventType = Literal["Normal", "Warning"]


def run_name(schedule: str, due: datetime) -> str:
    return f"{schedule}-{int(due.timestamp()) // 60}"


@dataclass(frozen=True)
class Run:
    """A run as its resource shows it: result None while it has not finished for good."""

    name: str
    uid: str
    due: datetime
    result: Literal["Succeeded", "Failed", "Cancelled"] | None = None


@dataclass(frozen=True)
class SchedulePlan:
    status: ScheduleStatus
    create: tuple[str, datetime] | None = None  # the run's name and the time it was due
    delete: tuple[Run, ...] = ()
    events: tuple[tuple[EventType, str, str], ...] = ()
    requeue_after: float | None = None  # seconds until the next time due (None: suspended, or never)


def plan(
    name: str, spec: ScheduleSpec, status: ScheduleStatus, runs: list[Run], created: datetime, now: datetime
) -> SchedulePlan:
    """created: when the schedule was made (the first run is the first time due after it)."""
    cron = spec.cron()
    active = sorted((r for r in runs if r.result is None), key=lambda r: r.due)
    events: list[tuple[EventType, str, str]] = []
    delete = list(_beyond_history(spec, runs))
    create: tuple[str, datetime] | None = None
    last = status.last_schedule_time
    due = None if spec.suspend else cron.latest(last or created, now)
    if due is not None:
        last = due
        late = (now - due).total_seconds()
        deadline = spec.starting_deadline_seconds
        if deadline is not None and late > deadline:
            message = (
                f"the run due at {due.isoformat()} was not started: {late:.0f} s late, over "
                "startingDeadlineSeconds"
            )
            events.append(("Warning", "RunMissed", message))
        elif active and spec.concurrency_policy == "Forbid":
            names = ", ".join(r.name for r in active)
            message = f"the run due at {due.isoformat()} was skipped: {names} has not finished (Forbid)"
            events.append(("Normal", "RunSkipped", message))
        else:
            if spec.concurrency_policy == "Replace":
                delete.extend(active)
                active = []
            create = (run_name(name, due), due)
            events.append(("Normal", "RunStarted", f"run {create[0]}, due at {due.isoformat()}"))
    upcoming = None if spec.suspend else cron.next_after(now)
    running = [r.name for r in active] + ([create[0]] if create else [])
    updated = status.model_copy(
        update={
            "last_schedule_time": last,
            "next_schedule_time": upcoming,
            "last_run": create[0] if create else status.last_run,
            "active": running,
        }
    )
    after = None if upcoming is None else max(0.0, (upcoming - now).total_seconds())
    return SchedulePlan(updated, create, tuple(delete), tuple(events), after)


def _beyond_history(spec: ScheduleSpec, runs: list[Run]) -> list[Run]:
    """Finished runs beyond the history limits, the oldest first (a Cancelled one counts as failed)."""
    old: list[Run] = []
    for kept, ended in (
        (spec.successful_runs_history_limit, {"Succeeded"}),
        (spec.failed_runs_history_limit, {"Failed", "Cancelled"}),
    ):
        finished = sorted((r for r in runs if r.result in ended), key=lambda r: r.due, reverse=True)
        old.extend(finished[kept:])
    return old
