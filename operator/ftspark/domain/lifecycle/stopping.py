"""A stop with a final checkpoint (and a savepoint, with savepoints.onStop or a savepoint-mode upgrade):
asked of the driver once, again if it refused a deposed leader's request; cancelled after the stop timeout."""

from __future__ import annotations

from datetime import timedelta

from ftspark.domain.lifecycle.actions import EmitEvent, RequestStop
from ftspark.domain.lifecycle.draft import Draft
from ftspark.domain.lifecycle.observation import DriverObservation, DriverPhase
from ftspark.domain.savepoints import job_savepoint_id


def stop_savepoint_id(uid: str, attempt: int) -> str:
    """The savepoint a stop takes with savepoints.onStop (each resume is a new attempt: one per attempt)."""
    return job_savepoint_id("stop", uid, attempt)


def stopped_message(draft: Draft, stopped: DriverObservation | None) -> str:
    if stopped is None or stopped.exit_code != 0:
        return "stopped"
    taken = stop_savepoint_id(draft.obs.job_uid, stopped.attempt)
    if any(ref.id == taken for ref in draft.status.savepoints):
        return f"stopped with a final checkpoint and savepoint {taken}"
    return "stopped with a final checkpoint"


def request_stop(draft: Draft, current: DriverObservation, savepoint_id: str = "") -> None:
    """Ask once (again if the driver refused a deposed leader's request); a driver that has not stopped
    within stopTimeoutSeconds is cancelled (deleted)."""
    requested = draft.status.stop_requested_at
    if requested is None:
        draft.actions.append(RequestStop(current.pod_name, current.attempt, savepoint_id))
        draft.update(stop_requested_at=draft.now)
        return
    timeout = timedelta(seconds=draft.spec.stop_timeout_seconds)
    if draft.now - requested < timeout:
        if current.request_refused and current.phase == DriverPhase.RUNNING:
            # Asked again with this leader's term; the timeout still counts from the first request, so a
            # request refused again and again (a leader below the floor) ends in a cancel, never hangs.
            draft.actions.append(RequestStop(current.pod_name, current.attempt, savepoint_id))
    elif current.phase != DriverPhase.TERMINATING:
        draft.actions.append(
            EmitEvent(
                "Warning",
                "StopTimedOut",
                f"no final checkpoint within {draft.spec.stop_timeout_seconds} s; cancelling",
            )
        )
        draft.delete_current("stop timed out")
