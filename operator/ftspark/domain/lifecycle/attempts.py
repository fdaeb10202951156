"""What an attempt leaves for the next ones: its failure as the status says it, its result, the rollbacks it
made (reported once), and the nodes its executors ran on (where the next attempt's go, with localRecovery)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from ftspark.domain.ha import CheckpointPointer
from ftspark.domain.lifecycle.actions import EmitEvent, RecordResult
from ftspark.domain.lifecycle.draft import Draft, says_already
from ftspark.domain.lifecycle.observation import DriverObservation
from ftspark.domain.lifecycle.timing import recovery_phases, summary
from ftspark.domain.models import Failure, JobSpec, JobStatus, Placement, RollbackRef
from ftspark.domain.recovery import folder_of, is_checkpoint_directory
from ftspark.domain.restart import category
from ftspark.protocol import EXECUTORS_NOT_STARTED, NO_PROGRESS, STOP_TIMED_OUT, STOPPED

_SIGNALLED = 128


def job_data(spec: JobSpec, uid: str, status: JobStatus) -> tuple[str, ...]:
    """What of the job's storage goes with its result (checkpoint.retainOnDelete keeps it): its checkpoint
    directories, the current one and those earlier runs left, each only when it is one the operator chose
    for this job (the status is the user's object too). Savepoints stay: they are meant to outlive the job."""
    if spec.checkpoint.retain_on_delete:
        return ()
    named = [status.checkpoint_directory, *status.retired_checkpoint_directories]
    storage = spec.checkpoint.storage
    own = [d for d in named if d is not None and is_checkpoint_directory(d, storage, uid)]
    return tuple(dict.fromkeys(folder_of(d) for d in own))


def record_result(draft: Draft, state: Literal["Succeeded", "Failed"], message: str) -> None:
    retain = draft.spec.result_store.ttl_seconds
    data = job_data(draft.spec, draft.obs.job_uid, draft.status)
    draft.keep_log(draft.current)  # before the result's cleanup deletes every pod of the job
    draft.actions.append(RecordResult(state, message, draft.now, retain, data))


def report_rollbacks(draft: Draft, driver: DriverObservation) -> None:
    """Once per attempt: a user must learn that committed batches were given up (they run again)."""
    reported = draft.status.last_rollback
    if not driver.rollbacks or (reported is not None and reported.attempt == driver.attempt):
        return
    message = "; ".join(driver.rollbacks)
    draft.update(last_rollback=RollbackRef(attempt=driver.attempt, time=draft.now, message=message))
    draft.actions.append(EmitEvent("Warning", "CheckpointRolledBack", message))


def remember_placement(draft: Draft, attempt: int) -> None:
    """Every node that ran one of this attempt's executors (executors come and go within an attempt)."""
    if not draft.obs.executor_nodes:
        return
    placement = draft.status.placement
    known = set(placement.nodes) if placement and placement.attempt == attempt else set()
    if not known.issuperset(draft.obs.executor_nodes):
        nodes = sorted(known | set(draft.obs.executor_nodes))
        draft.update(placement=Placement(attempt=attempt, nodes=nodes))


def degraded_while_waiting(draft: Draft, reason: str, message: str) -> None:
    """Degraded with why the driver waits (not a failure yet), and a Warning Event when that is news, not on
    every pass."""
    if not says_already(draft.status.conditions, "Degraded", "True", reason, message):
        draft.actions.append(EmitEvent("Warning", reason, message))
    draft.condition("Degraded", "True", reason, message)


def say_why_replaced(draft: Draft, failure: Failure) -> None:
    """A hung driver, or one whose executors never started, looks Running to Kubernetes: an Event says why it
    was replaced, and which setting decided."""
    if failure.reason not in {NO_PROGRESS, EXECUTORS_NOT_STARTED}:
        return
    timeout = draft.spec.liveness.progress_timeout_seconds
    what = "made no progress" if failure.reason == NO_PROGRESS else "had no executor running"
    message = (
        f"attempt {failure.attempt} {what} within spec.liveness.progressTimeoutSeconds ({timeout} s): "
        f"{failure.message}"
    )
    draft.actions.append(EmitEvent("Warning", failure.reason, message))


def record_failure(draft: Draft, driver: DriverObservation | None) -> Failure:
    """The attempt's failure as status.lastFailure and at the end of status.failures (the newest
    spec.failureHistory kept)."""
    failure = _failure_of(driver, draft.status.attempt, draft.status.attempt_started_at, draft.now)
    failure = failure.model_copy(update={"category": category(failure.reason)})
    kept = draft.spec.failure_history
    draft.update(last_failure=failure, failures=[*draft.status.failures, failure][-kept:] if kept else [])
    return failure


def note_commit(draft: Draft, newest: CheckpointPointer, first: CheckpointPointer) -> None:
    """The newest committed batch, and the first of its attempt that the store still keeps. The current
    attempt's counts as work done: the counts of failures in a row (of each category, and in all) start
    again (a driver that fails at its start runs for a moment too: running is not enough). And the first
    batch a later attempt commits ends the last failure's recovery: its time goes in the failure
    (status.lastFailure, and the same entry of status.failures). The first, not the newest: by the time the
    operator looks, the next batch may be committed too."""
    restarts = draft.status.restarts
    in_a_row = {"configuration_failures": 0, "infrastructure_failures": 0, "consecutive_failures": 0}
    if newest.attempt == draft.status.attempt and restarts != restarts.model_copy(update=in_a_row):
        draft.update(restarts=restarts.model_copy(update=in_a_row))
    failure = draft.status.last_failure
    if failure is None or failure.recovery_seconds is not None or first.attempt <= failure.attempt:
        return
    seconds = round(max(0.0, (first.completed_at - failure.time).total_seconds()), 1)
    status = draft.status
    own = first.attempt == status.attempt  # the status's times are this attempt's
    phases = recovery_phases(
        failure,
        first,
        status.attempt_submitted_at if own else None,
        status.attempt_started_at if own else None,
    )
    recovered = failure.model_copy(update={"recovery_seconds": seconds, "recovery_phases": phases})
    failures = [recovered if entry == failure else entry for entry in status.failures]
    draft.update(last_failure=recovered, failures=failures)
    message = f"attempt {first.attempt} committed batch {first.batch_id}: {summary(phases)}"
    draft.actions.append(EmitEvent("Normal", "Recovered", message))


def _failure_of(
    driver: DriverObservation | None, attempt: int, started_at: datetime | None, now: datetime
) -> Failure:
    ended_at = driver.ended_at if driver is not None else None
    when = {"attempt": attempt, "started_at": started_at, "ended_at": ended_at, "time": now}
    if driver is None:
        return Failure(reason="DriverLost", message="the driver pod disappeared", **when)
    if driver.reason in {STOPPED, STOP_TIMED_OUT}:
        message = f"the driver stopped on a request the job no longer has: {driver.message}"
        return Failure(reason="UnwantedStop", message=message, exit_code=0, **when)
    reason = driver.reason if driver.reason and driver.reason not in {"Error", "Completed"} else "DriverError"
    if reason == "DriverError" and driver.exit_code is not None and driver.exit_code > _SIGNALLED:
        reason = "DriverKilled"  # 128 + n: ended by signal n (137: SIGKILL, e.g. a kill or the OOM killer)
    message = driver.message or f"the driver exited with code {driver.exit_code}"
    return Failure(reason=reason, message=message, exit_code=driver.exit_code, **when)
