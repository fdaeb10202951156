"""`decide`: the router by desired state and phase (the diagram: the package's docstring), each phase's own
rules, and the concerns' modules called explicitly from it."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Literal, assert_never

from ftspark.domain.ha import JobResultEntry
from ftspark.domain.lifecycle import attempts, retention, savepointing, stopping, upgrade_rollback
from ftspark.domain.lifecycle import standby as hot_standby
from ftspark.domain.lifecycle.actions import (
    Action,
    Decision,
    DeleteFinishedJob,
    DiscardPreviousJob,
    EmitEvent,
    PromoteStandby,
)
from ftspark.domain.lifecycle.delays import (
    POLL,
    QUOTA_RETRY,
    SOON,
    WAIT,
)
from ftspark.domain.lifecycle.draft import ready_condition, says_already, set_condition
from ftspark.domain.lifecycle.observation import (
    DriverObservation,
    DriverPhase,
    Observation,
)
from ftspark.domain.lifecycle.submission import QUOTA_EXCEEDED, Submission
from ftspark.domain.models import (
    Condition,
    ConditionType,
    JobResult,
    JobSpec,
    JobStatus,
    Phase,
)
from ftspark.domain.restart import after_failure
from ftspark.domain.rollback import NOT_UPGRADED
from ftspark.domain.savepoints import (
    job_savepoint_id,
)
from ftspark.protocol import (
    NO_RESTORABLE_CHECKPOINT,
    STOP_TIMED_OUT,
    STOPPED,
    RestoreFrom,
)

# Why a driver pod waits, when it will not fix itself soon: surfaced at once (Degraded, and a Warning Event
# per message) instead of "stuck in Submitting". The kubelet's container waiting reasons, and the
# scheduler's verdict (reconcile/driver_pods.py names it).
DRIVER_UNSCHEDULABLE = "DriverUnschedulable"  # no node fits: the scheduler's message says why
DRIVER_VOLUME_NOT_BOUND = "DriverVolumeNotBound"  # a PersistentVolumeClaim the pod mounts is not bound
# A condition only there, False, while the operator keeps failing to act on the job.
RECONCILED: ConditionType = "Reconciled"
OPERATOR_ERROR = "OperatorError"
_STUCK_REASONS = {
    "ImagePullBackOff",
    "ErrImagePull",
    "InvalidImageName",
    "CreateContainerConfigError",
    DRIVER_UNSCHEDULABLE,
    DRIVER_VOLUME_NOT_BOUND,
}
_RESUMABLE: set[Phase] = {"Stopped", "Suspended", "Cancelled"}
STATE_TOO_OLD = "StateTooOld"  # a resume refused by checkpoint.maxResumeAgeSeconds
NODE_LOST = "NodeLost"  # the failure reason of a driver pod whose node stopped reporting
NODE_DRAINING = "NodeDraining"  # the driver's node is cordoned or marked for removal: it relocates


def spec_hash(spec: JobSpec) -> str:
    """What a change of triggers an upgrade: every field but those of rollback.NOT_UPGRADED (the desired
    state, the savepoints' nonce and policy, the timeouts: the next attempt gets them). Values equal to their
    default are left out, so an operator version that adds a field with a default restarts no running job."""
    excluded = dict(NOT_UPGRADED)
    for name, fields in NOT_UPGRADED.items():
        # A part holding only such fields goes whole: an empty {} of it would change the hash.
        if fields is not True and not getattr(spec, name).model_dump(exclude=fields, exclude_defaults=True):
            excluded[name] = True
    relevant = spec.model_dump_json(exclude=excluded, exclude_defaults=True)
    return hashlib.sha256(relevant.encode()).hexdigest()[:16]


def upgrade_savepoint_id(uid: str, attempt: int) -> str:
    """The savepoint a savepoint-mode upgrade takes of the attempt it stops."""
    return job_savepoint_id("upgrade", uid, attempt)


# -- the decision --


def decide(
    spec: JobSpec,
    status: JobStatus,
    observation: Observation,
    now: datetime,
    uniform: Callable[[], float],
) -> Decision:
    ctx = _Context(spec, status, observation, now, uniform)
    return ctx.decide()


def invalid_spec(
    status: JobStatus, generation: int, field_path: str, message: str, now: datetime
) -> Decision:
    """A spec the operator cannot act on: Ready=False naming the field, an Event, no pods."""
    text = message if message.startswith("spec.") or not field_path else f"spec.{field_path}: {message}"
    conditions, events = _warned(status, generation, "Ready", "False", "InvalidSpec", text, now)
    observed = status.model_copy(update={"conditions": conditions, "observed_generation": generation})
    return Decision(observed, events)


def rejected(status: JobStatus, generation: int, message: str, now: datetime) -> Decision:
    """The API server refused an object built from the spec (nothing of the attempt was created): like a spec
    that fails validation, Ready=False with the server's words, no pods, no retry until the spec changes."""
    return invalid_spec(status, generation, "", message, now)


def deferred(status: JobStatus, generation: int, message: str, now: datetime) -> Decision:
    """The API server refused an object for now (a ResourceQuota without room; nothing of the attempt was
    created): Ready=False, reason QuotaExceeded with the server's words, an Event once per message, and the
    same decision tried again every QUOTA_RETRY seconds until the quota has room. Not a failure: no restart
    is counted, as for a pod waiting for its node."""
    conditions, events = _warned(status, generation, "Ready", "False", QUOTA_EXCEEDED, message, now)
    return Decision(status.model_copy(update={"conditions": conditions}), events, requeue_after=QUOTA_RETRY)


def reconcile_failed(status: JobStatus, generation: int, message: str, now: datetime) -> Decision:
    """The operator keeps failing to act on the job (its storage or the API server refuses it, a bug): the
    job says so in Reconciled=False, reason OperatorError, and a Warning Event when the message is news, so
    its user sees what only the operator's log would. Nothing else of the status changes."""
    conditions, events = _warned(status, generation, RECONCILED, "False", OPERATOR_ERROR, message, now)
    return Decision(status.model_copy(update={"conditions": conditions}), events)


def reconciled(decision: Decision) -> Decision:
    """A reconcile that went through: Reconciled=False, if the status had it, goes."""
    conditions = decision.status.conditions
    if all(c.type != RECONCILED for c in conditions):
        return decision
    kept = [c for c in conditions if c.type != RECONCILED]
    return replace(decision, status=decision.status.model_copy(update={"conditions": kept}))


def _warned(
    status: JobStatus,
    generation: int,
    kind: ConditionType,
    value: Literal["True", "False"],
    reason: str,
    message: str,
    now: datetime,
) -> tuple[list[Condition], tuple[Action, ...]]:
    """The condition set to this, and its Warning Event unless the condition says the same already."""
    said = says_already(status.conditions, kind, value, reason, message)
    conditions = set_condition(status.conditions, kind, value, reason, message, now, generation)
    return conditions, () if said else (EmitEvent("Warning", reason, message),)


class _Context(Submission):
    # the dispatch
    def decide(self) -> Decision:
        if self.obs.graph is not None and self.obs.own_graph is None:
            self.actions.append(DiscardPreviousJob())
        for driver in self.stale:
            self.delete(driver, "superseded by a later attempt")
        if self.obs.result is not None:
            return self._finished(self.obs.result)
        if self.status.result is not None:
            # The result store entry is gone (expired, or lost) but the status remembers the end: still final.
            return self._kept_after_the_end(self.status.result.time)
        match self.spec.desired_state:
            case "running":
                return self._keep_running()
            case "stopped":
                return self._stop("Stopped")
            case "suspended":
                return self._stop("Suspended")
            case "cancelled":
                return self._cancel()
            case unknown:
                assert_never(unknown)

    def _finished(self, result: JobResultEntry) -> Decision:
        # A job with a result never runs again, whoever leads now (FLIP-194).
        self.delete_current("the job has a result")
        self.update(result=JobResult(state=result.state, time=result.finished_at, message=result.message))
        self.set_phase(
            result.state, f"Job{result.state}", result.message or f"the job {result.state.lower()}"
        )
        self.condition("Ready", "False", f"Job{result.state}", result.message)
        self.condition("Progressing", "False", f"Job{result.state}", result.message)
        if not result.clean:
            return self._done()  # its cleanup is not over: the resource goes after it, not before
        return self._kept_after_the_end(result.finished_at)

    def _kept_after_the_end(self, ended: datetime) -> Decision:
        """A finished job's resource stays spec.ttlSecondsAfterFinished (unset: for ever), then goes; its
        result and data follow their own retention, as after a deletion by hand."""
        ttl = self.spec.ttl_seconds_after_finished
        if ttl is None:
            return self._done()
        left = (ended + timedelta(seconds=ttl) - self.now).total_seconds()
        if left > 0:
            return self._done(max(SOON, left))
        message = (
            f"ended {ended.isoformat(timespec='seconds')}; ttlSecondsAfterFinished ({ttl} s) passed: the "
            "job resource is deleted, its result and data follow resultStore.ttlSeconds"
        )
        self.actions.extend((EmitEvent("Normal", "FinishedJobDeleted", message), DeleteFinishedJob()))
        return self._done()

    def _cancel(self) -> Decision:
        if self.current is None:
            self.set_phase("Cancelled", "Cancelled", "the driver is gone; resume with desiredState: running")
            self.condition("Ready", "False", "Cancelled", "cancelled by request")
            self.condition("Progressing", "False", "Cancelled", "cancelled by request")
            return self._done()
        self.delete_current("cancel requested")
        self.set_phase("Cancelling", "Cancelling", "deleting the driver")
        return self._done(WAIT)

    def _stop(self, target: Phase) -> Decision:
        current = self.current
        with_savepoint = self.spec.savepoints.on_stop
        if current is None or current.phase in {DriverPhase.SUCCEEDED, DriverPhase.FAILED}:
            if (
                with_savepoint
                and current is not None
                and savepointing.record_on_stop(
                    self, current, stopping.stop_savepoint_id(self.obs.job_uid, current.attempt), "stop"
                )
            ):
                return self._done(SOON)  # the pod goes once the status holds its savepoint (see _upgrade)
            if current is not None:
                self.delete_current("stopped")
            message = stopping.stopped_message(self, current)
            self.set_phase(target, target, message)
            self.update(stop_requested_at=None, driver_pod=None)
            self.condition("Ready", "False", target, message)
            self.condition("Progressing", "False", target, message)
            return self._done()
        if current.phase == DriverPhase.PENDING:
            self.delete_current("stop requested before the driver ran")
            return self._done(WAIT)
        first_request = self.status.stop_requested_at is None
        stopping.request_stop(
            self,
            current,
            stopping.stop_savepoint_id(self.obs.job_uid, current.attempt) if with_savepoint else "",
        )
        if first_request:
            self.set_phase("Stopping", "Stopping", "waiting for the running batch to commit")
        return self._done(WAIT)

    def _keep_running(self) -> Decision:
        status = self.status
        if status.attempt == 0:
            restore: RestoreFrom = "initial-savepoint" if self.spec.initial_savepoint else "nothing"
            return self._submit(restore, reason="Submitted", message="first attempt")
        if status.phase == "Relocating":
            return self._relocating()
        if status.phase in _RESUMABLE or (status.stop_requested_at and status.phase != "Upgrading"):
            # desiredState is running again: once the stopped driver is gone, resume where it left off.
            if self.current is not None and self.current.phase != DriverPhase.RUNNING:
                self.delete_current("resuming")
            if self.current is not None:
                return self._done(WAIT)
            if (too_old := self._too_old_to_resume()) is not None:
                return self._hold(STATE_TOO_OLD, too_old)
            return self._submit("latest-checkpoint", reason="Resumed", message="resuming from the checkpoint")
        if status.phase == "Failed":
            return self._awaiting_manual_restore()
        if status.phase == "Restarting":
            return self._restarting()
        graph = self.obs.own_graph
        if graph is not None and graph.spec_hash != self.obs.spec_hash:
            return self._upgrade()
        return self._observe_driver()

    def _upgrade(self) -> Decision:
        mode = self.spec.upgrade_mode
        if self.current is not None and self.current.phase not in {DriverPhase.SUCCEEDED, DriverPhase.FAILED}:
            if mode == "savepoint" and self.current.phase == DriverPhase.RUNNING:
                # Stop with a final checkpoint and a savepoint of it (FLIP-34's stop-with-savepoint); after
                # a timeout, cancel: the new attempt then restores the latest checkpoint and re-runs at most
                # the one uncommitted batch, as a last-state upgrade.
                stopping.request_stop(
                    self, self.current, upgrade_savepoint_id(self.obs.job_uid, self.current.attempt)
                )
            else:
                self.delete_current(f"spec changed ({mode} upgrade)")
            self.set_phase("Upgrading", "Upgrading", f"spec changed; {mode} upgrade")
            return self._done(WAIT)
        stopped = self.current
        if (
            mode == "savepoint"
            and stopped is not None
            and savepointing.record_on_stop(
                self, stopped, upgrade_savepoint_id(self.obs.job_uid, stopped.attempt), "upgrade"
            )
        ):
            # The report lives on the driver pod: the status keeps it before the pod goes (a status write
            # refused as stale would otherwise lose it with the pod). The status write wakes the job again.
            return self._done(SOON)
        self.delete_current(f"spec changed ({mode} upgrade)")
        if self.current is not None:
            return self._done(WAIT)
        match mode:
            case "stateless":
                return self._submit("nothing", fresh=True, reason="Upgraded", message=f"{mode} upgrade")
            case "last-state" | "savepoint":
                return self._submit("latest-checkpoint", reason="Upgraded", message=f"{mode} upgrade")
            case unknown:
                assert_never(unknown)

    def _too_old_to_resume(self) -> str | None:
        """Why the newest checkpoint is too old to resume from (checkpoint.maxResumeAgeSeconds), if it is."""
        limit, newest = self.spec.checkpoint.max_resume_age_seconds, self.obs.latest_checkpoint
        if not limit or newest is None:
            return None
        age = (self.now - newest.completed_at).total_seconds()
        if age <= limit:
            return None
        return (
            f"the newest checkpoint (batch {newest.batch_id}) is {age:.0f} s old, over "
            f"spec.checkpoint.maxResumeAgeSeconds ({limit} s): its sources may have dropped the data "
            "after it; raise the limit or set it to 0 to resume anyway"
        )

    def _hold(self, reason: str, message: str) -> Decision:
        """Start nothing until the user changes the spec; say why once (an Event) and in the conditions."""
        ready = ready_condition(self.status.conditions)
        if ready is None or ready.reason != reason:
            self.actions.append(EmitEvent("Warning", reason, message))
        self.condition("Ready", "False", reason, message)
        self.condition("Progressing", "False", reason, message)
        return self._done()

    def _awaiting_manual_restore(self) -> Decision:
        """Failed without a result: no usable checkpoint. Nothing starts until the user changes the spec."""
        if self.obs.generation == self.status.observed_generation:
            return self._done()
        if self.spec.initial_savepoint:
            return self._submit(
                "initial-savepoint", fresh=True, reason="Restored", message="from initialSavepoint"
            )
        if self.spec.upgrade_mode == "stateless":
            return self._submit("nothing", fresh=True, reason="Restarted", message="stateless, without state")
        return self._submit(
            "latest-checkpoint", reason="Restarted", message="trying the latest checkpoint again"
        )

    def _restarting(self) -> Decision:
        self.delete_current("restarting")
        due = self.status.restarts.next_attempt_at
        if due is not None and self.now < due:
            return self._done(max(SOON, (due - self.now).total_seconds()))
        return self._submit(
            "latest-checkpoint", reason="Restarted", message="restarting from the latest checkpoint"
        )

    def _observe_driver(self) -> Decision:
        current = self.current
        if current is None:
            return self._failed(None)
        refused = current.refused_promotion
        if refused is not None and current.phase == DriverPhase.RUNNING:
            # A standby made the driver by a deposed leader's promotion, which it refused: it runs nothing.
            location = self.status.checkpoint_directory
            assert location is not None, "a promotion names the checkpoint directory in the status"
            batch = refused.restore_batch_id
            self.actions.append(PromoteStandby(current.pod_name, current.attempt, location, batch))
            return self._done(WAIT)
        match current.phase:
            case DriverPhase.FAILED:
                return self._failed(current)
            case DriverPhase.PENDING:
                self.update(driver_pod=current.pod_name)
                if current.reason in _STUCK_REASONS:
                    attempts.degraded_while_waiting(self, current.reason, current.message or current.reason)
                if upgrade_rollback.on_trial(self):
                    submitted = self.status.attempt_submitted_at
                    if not upgrade_rollback.within_window(self, submitted):
                        why = current.reason or "pending"
                        return self._rolled_back("UpgradeNotRunning", f"attempt {current.attempt} is {why}")
                    return self._done(upgrade_rollback.until_window_ends(self, submitted))
                return self._pending(current)
            case DriverPhase.RUNNING:
                return self._running(current)
            case DriverPhase.SUCCEEDED if current.reason in {STOPPED, STOP_TIMED_OUT}:
                # It stopped on a request nobody wants now (a deposed leader's, resumed after a pause): the
                # script did not finish, so no result; the next attempt resumes from the final checkpoint.
                return self._failed(current)
            case DriverPhase.SUCCEEDED:
                attempts.record_result(
                    self, "Succeeded", current.message or "the driver finished with exit code 0"
                )
                return self._done(WAIT)
            case DriverPhase.TERMINATING:
                self.delete_current("node lost")  # only acts for a pod on a lost node: it would never go
                return self._done(WAIT)  # wait for it to go
            case unknown:
                assert_never(unknown)

    def _pending(self, current: DriverObservation) -> Decision:
        """A driver that waits for a cause that does not pass by itself fails once it has waited
        spec.liveness.startTimeoutSeconds since its attempt was submitted."""
        timeout = self.spec.liveness.start_timeout_seconds
        submitted = self.status.attempt_submitted_at
        if current.reason not in _STUCK_REASONS or not timeout or submitted is None:
            return self._done(POLL)
        left = (submitted + timedelta(seconds=timeout) - self.now).total_seconds()
        if left > 0:
            return self._done(min(POLL, max(SOON, left)))
        why = f"not started within spec.liveness.startTimeoutSeconds ({timeout} s): {current.message}"
        return self._failed(replace(current, message=why))

    def _relocate(self, current: DriverObservation) -> Decision:
        """Its node is being drained: stop with a final checkpoint (the driver's disruption budget holds the
        eviction off meanwhile), then resume elsewhere (_relocating). Not a failure."""
        message = (
            f"node {current.node} is being drained: attempt {current.attempt} stops at the next batch "
            "boundary with a final checkpoint and resumes on another node"
        )
        stopping.request_stop(self, current)
        self.set_phase("Relocating", NODE_DRAINING, message)
        self.condition("Ready", "False", NODE_DRAINING, message)
        self.condition("Progressing", "True", NODE_DRAINING, message)
        return self._done(WAIT)

    def _relocating(self) -> Decision:
        """Once the stopped driver is gone (or ended any other way: the drain's eviction, a cancel after
        stopTimeoutSeconds), the next attempt resumes from the latest checkpoint, its standby promoted if it
        has one; no restart is counted, as none failed."""
        current = self.current
        if current is not None and current.phase == DriverPhase.RUNNING:
            stopping.request_stop(self, current)
            return self._done(WAIT)
        if current is not None:
            self.delete_current("relocated off a drained node")
            return self._done(WAIT)
        message = "resumed from the final checkpoint after its node was drained"
        return self._submit("latest-checkpoint", reason="Relocated", message=message)

    def _running(self, current: DriverObservation) -> Decision:
        if current.node_draining:
            return self._relocate(current)
        if self.status.phase != "Running":
            # A promoted standby's container started long before its attempt was submitted.
            submitted, started = self.status.attempt_submitted_at, current.started_at or self.now
            self.update(
                attempt_started_at=max(started, submitted) if submitted else started,
                driver_pod=current.pod_name,
            )
            self.set_phase("Running", "Running", f"attempt {current.attempt} is running")
            self.condition("Ready", "True", "Running", f"attempt {current.attempt} is running")
            self.condition("Progressing", "False", "Running", "")
            self.condition("Degraded", "False", "Running", "")
        savepointing.tend(self, current)
        attempts.report_rollbacks(self, current)
        attempts.remember_placement(self, current.attempt)
        savepointing.choose_disposals(self)
        look_again = min(upgrade_rollback.stability(self), retention.delete_retired_directories(self))
        if self.status.savepoint_in_progress:
            return self._done(min(self.spec.stop_timeout_seconds, look_again))
        due = savepointing.periodic_due_at(self)
        until_due = POLL if due is None else (due - self.now).total_seconds()
        return self._done(max(SOON, min(POLL, until_due, look_again)))

    def _rolled_back(self, reason: str, what: str) -> Decision:
        upgrade_rollback.roll_back(self, reason, what)
        return self._done(SOON)

    def _failed(self, current: DriverObservation | None) -> Decision:
        failure = attempts.record_failure(self, current)
        if current is not None:  # its executors' pods are still there: the next attempt goes back to them
            attempts.remember_placement(self, current.attempt)
        if current is not None and current.reason == NO_RESTORABLE_CHECKPOINT:
            # No complete batch in the checkpoint: another attempt would find the same.
            self.delete_current("no restorable checkpoint")
            return self._manual_restore_required(failure.message)
        if upgrade_rollback.on_trial(self) and upgrade_rollback.within_window(
            self, self.status.attempt_submitted_at
        ):
            return self._rolled_back("UpgradeFailed", f"attempt {failure.attempt} failed: {failure.reason}")
        strategy = self.spec.restart_strategy
        verdict = after_failure(
            strategy,
            self.status.restarts,
            failure.reason,
            self.now,
            self.status.attempt_started_at,
            self.uniform,
        )
        self.update(restarts=verdict.state)
        self.condition("Degraded", "True", failure.reason, failure.message)
        attempts.say_why_replaced(self, failure)
        if not verdict.restart:
            message = f"{failure.reason}: {failure.message} — not restarted: {verdict.reason}"
            attempts.record_result(self, "Failed", message)
            if not verdict.fix_the_cause:
                self.condition("Ready", "False", "RestartsExhausted", message)
            return self._done(WAIT)
        delay, why = verdict.delay_seconds, verdict.reason
        if verdict.state.consecutive_failures == 1 and hot_standby.ready(self) is not None:
            # The strategy's delay keeps a failing job from restarting in a tight loop. A first failure in a
            # row with a standby ready is no loop yet: the standby, up before the failure, takes over at once
            # (a failure after it is delayed as the strategy says, and a new standby takes its time to start).
            delay, why = 0.0, "a first failure in a row, with a standby ready"
        due = self.now + timedelta(seconds=delay)
        self.update(restarts=verdict.state.model_copy(update={"next_attempt_at": due}))
        # Not deleted yet: its exit code and message are in this status first (phase Restarting deletes it,
        # woken by this status write), so a write refused as stale loses nothing with the pod.
        self.set_phase(
            "Restarting",
            "Restarting",
            f"attempt {self.status.attempt} failed ({failure.reason}); restart in {delay:.1f} s ({why})",
        )
        self.condition("Ready", "False", "Restarting", failure.message)
        return self._done(SOON if current is not None else max(SOON, delay))
