"""One pass over one ScheduledSparkJob: read it and its runs → plan (domain.scheduling, pure) → act (runs
created and deleted, Events) → record (its status, on the version read). A write of a deposed leader is
refused before it is made; one decided on an older read is harmless: a run's name is its due time, so it is
made once, and runs are deleted by uid."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Protocol

from pydantic import ValidationError

from ftspark.domain.fencing import Epoch
from ftspark.domain.ha import JobKey
from ftspark.domain.lifecycle import EmitEvent, invalid_spec
from ftspark.domain.models import JobStatus, ScheduleSpec, ScheduleStatus
from ftspark.domain.scheduling import Run, plan
from ftspark.ports.cluster import Events, JobResource
from ftspark.reconcile.reconciler import describe_validation_error

log = logging.getLogger(__name__)


class Schedules(Protocol):
    def get(self, key: JobKey) -> JobResource | None: ...
    def runs(self, schedule: JobResource) -> list[Run]: ...
    def create_run(self, schedule: JobResource, name: str, due: datetime) -> None: ...
    def delete_run(self, namespace: str, run: Run) -> None: ...
    def write_status(self, schedule: JobResource, status: dict[str, object]) -> None: ...


def _now() -> datetime:
    return datetime.now(UTC)


class ScheduleReconciler:
    def __init__(
        self,
        schedules: Schedules,
        events: Events,
        epoch: Callable[[], Epoch],
        clock: Callable[[], datetime] = _now,
    ) -> None:
        self._schedules, self._events, self._epoch, self._clock = schedules, events, epoch, clock

    def reconcile(self, key: JobKey) -> float | None:
        """Seconds until the next look (the next time due), None when only a change should wake it."""
        schedule = self._schedules.get(key)
        if schedule is None:
            return None  # its runs go with it (ownerReferences)
        now = self._clock()
        status = self._status(schedule)
        try:
            spec = ScheduleSpec.model_validate(schedule.spec)
        except ValidationError as error:
            field, message = describe_validation_error(error)
            self._invalid(schedule, status, field, message, now)
            return None
        assert schedule.created is not None, "read from the API server, with its creationTimestamp"
        decided = plan(key.name, spec, status, self._schedules.runs(schedule), schedule.created, now)
        self._epoch()  # still leading (raises otherwise): what follows are the operator's writes
        for run in decided.delete:
            self._schedules.delete_run(key.namespace, run)
        if decided.create is not None:
            self._schedules.create_run(schedule, *decided.create)
        for type_, reason, message in decided.events:
            self._events.emit(schedule, type_, reason, message)
        recorded = decided.status.model_copy(
            update={"observed_generation": schedule.generation, "conditions": []}
        )
        self._record(schedule, recorded)
        return decided.requeue_after

    def _status(self, schedule: JobResource) -> ScheduleStatus:
        try:
            return ScheduleStatus.model_validate(schedule.status)
        except ValidationError:
            log.warning("%s: unreadable status, starting from an empty one", schedule.key)
            return ScheduleStatus()

    def _invalid(
        self, schedule: JobResource, status: ScheduleStatus, field: str, message: str, now: datetime
    ) -> None:
        """Ready=False naming the field, an Event once (the job's own rule: lifecycle.invalid_spec)."""
        said = invalid_spec(JobStatus(conditions=status.conditions), schedule.generation, field, message, now)
        self._epoch()
        for action in said.actions:
            if isinstance(action, EmitEvent):
                self._events.emit(schedule, action.type, action.reason, action.message)
        update = {"conditions": said.status.conditions, "observed_generation": schedule.generation}
        self._record(schedule, status.model_copy(update=update))

    def _record(self, schedule: JobResource, status: ScheduleStatus) -> None:
        written = status.model_dump(mode="json", by_alias=True, exclude_none=True)
        if written != schedule.status:
            self._schedules.write_status(schedule, written)
