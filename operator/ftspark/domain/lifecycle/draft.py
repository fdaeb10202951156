"""The draft of a decision, which each concern's rules read and add to, and the conditions' bookkeeping."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Literal

from ftspark.domain.lifecycle.actions import (
    Action,
    DeleteDriver,
    EmitEvent,
    KeepDriverLog,
    ReleaseDriverLease,
)
from ftspark.domain.lifecycle.observation import DriverObservation, DriverPhase, Observation
from ftspark.domain.models import Condition, ConditionType, JobSpec, JobStatus, Phase


class Draft:
    """The decision being made: what it was taken from (spec, observation, now), the status so far and the
    actions so far, and the driver pods sorted (the current attempt's, stale ones, standbys). Each concern's
    rules read it and add to it."""

    def __init__(
        self,
        spec: JobSpec,
        status: JobStatus,
        observation: Observation,
        now: datetime,
        uniform: Callable[[], float],
    ) -> None:
        self.spec, self.obs, self.now, self.uniform = spec, observation, now, uniform
        self.status = status
        # Disposals an earlier pass recorded: only these delete (a choice is in the status before any delete).
        self.disposing = tuple(status.savepoints_disposing)
        self.actions: list[Action] = []
        # A standby is the next attempt's pod, not yet the job's driver: it counts only once promoted.
        self.standbys = [d for d in observation.drivers if d.standby]
        self.settled: set[str] = set()  # standby pods this decision promoted or deleted already
        drivers = [d for d in observation.drivers if not d.standby]
        newest = max((d.attempt for d in drivers), default=0)
        if newest > status.attempt:
            # A driver of a later attempt than recorded: we crashed between creating it and recording status.
            self.status = status.model_copy(update={"attempt": newest, "phase": "Submitting"})
        self.current = next((d for d in drivers if d.attempt == self.status.attempt), None)
        self.stale = [d for d in drivers if d.attempt < self.status.attempt]

    def update(self, **changes: object) -> None:
        self.status = self.status.model_copy(update=changes)

    def condition(
        self, kind: ConditionType, value: Literal["True", "False", "Unknown"], reason: str, message: str
    ) -> None:
        conditions = set_condition(
            self.status.conditions, kind, value, reason, message, self.now, self.obs.generation
        )
        self.update(conditions=conditions)

    def set_phase(self, phase: Phase, reason: str, message: str) -> None:
        if self.status.phase != phase:
            self.actions.append(
                EmitEvent("Warning" if phase in {"Failed", "Restarting"} else "Normal", reason, message)
            )
        self.update(phase=phase)

    def delete_current(self, reason: str) -> None:
        if self.current is not None:
            self.delete(self.current, reason)

    def delete(self, driver: DriverObservation, reason: str) -> None:
        if driver.ended:
            self.actions.append(ReleaseDriverLease(driver.pod_name, driver.attempt))
        if driver.phase != DriverPhase.TERMINATING or driver.node_lost:
            self.keep_log(driver)
            # At once when no kubelet will confirm it (a lost node), or when nothing of it is left to stop
            # (ended): the next attempt waits for the pod to be gone.
            force = driver.node_lost or driver.ended
            self.actions.append(DeleteDriver(driver.pod_name, driver.attempt, reason, force=force))

    def keep_log(self, driver: DriverObservation | None) -> None:
        """An ended driver's log outlives its pod. Not a lost node's: no kubelet serves it any more."""
        kept = self.spec.failure_history
        if driver is not None and driver.ended and not driver.node_lost and kept:
            self.actions.append(KeepDriverLog(driver.pod_name, driver.attempt, kept))


def ready_condition(conditions: list[Condition]) -> Condition | None:
    return next((c for c in conditions if c.type == "Ready"), None)


def says_already(
    conditions: list[Condition], kind: ConditionType, value: str, reason: str, message: str
) -> bool:
    """The condition says this already: its Event went out when it first did, none is due now."""
    current = next((c for c in conditions if c.type == kind), None)
    return current is not None and (current.status, current.reason, current.message) == (
        value,
        reason,
        message,
    )


def set_condition(
    conditions: list[Condition],
    kind: ConditionType,
    value: Literal["True", "False", "Unknown"],
    reason: str,
    message: str,
    now: datetime,
    generation: int,
) -> list[Condition]:
    previous = next((c for c in conditions if c.type == kind), None)
    since = previous.last_transition_time if previous and previous.status == value else now
    updated = Condition(
        type=kind,
        status=value,
        reason=reason,
        message=message,
        last_transition_time=since,
        observed_generation=generation,
    )
    return [c for c in conditions if c.type != kind] + [updated]
