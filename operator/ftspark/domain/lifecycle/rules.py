"""The rules `decide` applies: the phase each job is in, and what moves it on (the diagram: the package's
docstring). Types in observation.py and actions.py, delays in delays.py."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Literal, assert_never

from ftspark.domain.ha import JobResultEntry
from ftspark.domain.lifecycle import retention, savepointing, upgrade_rollback
from ftspark.domain.lifecycle import standby as hot_standby
from ftspark.domain.lifecycle.actions import (
    Action,
    Decision,
    DeleteLeftoverExecutors,
    DiscardPreviousJob,
    EmitEvent,
    PromoteStandby,
    RecordResult,
    RequestStop,
    SubmitAttempt,
)
from ftspark.domain.lifecycle.delays import (
    POLL,
    QUOTA_RETRY,
    SOON,
    WAIT,
)
from ftspark.domain.lifecycle.draft import Draft, ready_condition, set_condition
from ftspark.domain.lifecycle.observation import (
    DriverObservation,
    DriverPhase,
    Observation,
)
from ftspark.domain.models import (
    CheckpointRef,
    Condition,
    Failure,
    JobResult,
    JobSpec,
    JobStatus,
    Phase,
    Placement,
    RollbackRef,
)
from ftspark.domain.recovery import (
    checkpoint_directory,
    folder_of,
    is_checkpoint_directory,
)
from ftspark.domain.restart import on_failure
from ftspark.domain.rollback import NOT_UPGRADED
from ftspark.domain.savepoints import (
    job_savepoint_id,
)
from ftspark.protocol import NO_PROGRESS, NO_RESTORABLE_CHECKPOINT, STOP_TIMED_OUT, STOPPED, RestoreFrom

# Pod waiting reasons that will not fix themselves: surfaced at once instead of "stuck in Submitting".
_STUCK_REASONS = {"ImagePullBackOff", "ErrImagePull", "InvalidImageName", "CreateContainerConfigError"}
_RESUMABLE: set[Phase] = {"Stopped", "Suspended", "Cancelled"}
STATE_TOO_OLD = "StateTooOld"  # a resume refused by checkpoint.maxResumeAgeSeconds
NODE_LOST = "NodeLost"  # the failure reason of a driver pod whose node stopped reporting
QUOTA_EXCEEDED = "QuotaExceeded"
_SIGNALLED = 128


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


def upgrade_savepoint_id(uid: str, attempt: int) -> str:
    """The savepoint a savepoint-mode upgrade takes of the attempt it stops."""
    return job_savepoint_id("upgrade", uid, attempt)


def stop_savepoint_id(uid: str, attempt: int) -> str:
    """The savepoint a stop takes with savepoints.onStop (each resume is a new attempt: one per attempt)."""
    return job_savepoint_id("stop", uid, attempt)


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
    conditions, events = _not_ready(status, generation, "InvalidSpec", text, now)
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
    conditions, events = _not_ready(status, generation, QUOTA_EXCEEDED, message, now)
    return Decision(status.model_copy(update={"conditions": conditions}), events, requeue_after=QUOTA_RETRY)


def _not_ready(
    status: JobStatus, generation: int, reason: str, message: str, now: datetime
) -> tuple[list[Condition], tuple[Action, ...]]:
    """Ready=False for this reason, and its Warning Event unless the condition says the same already."""
    previous = ready_condition(status.conditions)
    conditions = set_condition(status.conditions, "Ready", "False", reason, message, now, generation)
    said = previous is not None and (previous.reason, previous.message) == (reason, message)
    return conditions, () if said else (EmitEvent("Warning", reason, message),)


class _Context(Draft):
    def _done(self, requeue_after: float | None = None, *, observed: bool = True) -> Decision:
        """observed=False: this pass only prepared acting on the spec (the next one acts), so its generation
        is not observed yet. Otherwise every decision acts on the whole current spec (an upgrade in progress
        shows as phase Upgrading)."""
        if observed:
            self.update(observed_generation=self.obs.generation)
        if (soon := hot_standby.tend(self)) is not None:
            requeue_after = min(requeue_after or soon, soon)
        if (disposals := savepointing.finish_disposals(self)) is not None:
            requeue_after = min(requeue_after or disposals, disposals)
        newest = self.obs.latest_checkpoint
        if newest is not None:
            self.update(
                latest_checkpoint=CheckpointRef(
                    id=newest.checkpoint_id,
                    batch_id=newest.batch_id,
                    time=newest.completed_at,
                    location=newest.location,
                )
            )
        return Decision(self.status, tuple(self.actions), requeue_after)

    def _submit(
        self, restore_from: RestoreFrom, *, fresh: bool = False, reason: str, message: str
    ) -> Decision:
        """fresh: a new checkpoint directory even though the job has one (a stateless upgrade)."""
        if self.stale or self.current:
            return self._done(WAIT)  # never start an attempt while an earlier driver pod still exists
        if self.obs.leftover_executors:  # nor while an executor of one does
            self.actions.append(DeleteLeftoverExecutors(tuple(s.attempt for s in self.standbys)))
            return self._done(WAIT)
        attempt = self.status.attempt + 1
        graph = None if fresh else self.obs.own_graph
        # A re-created job of the same name is a new job (new uid): it never resumes the old one's state by
        # accident; starting from old state is explicit (initialSavepoint).
        location = (
            graph.checkpoint_location
            if graph is not None
            else checkpoint_directory(self.spec.checkpoint.storage, self.obs.job_uid, attempt)
        )
        if (
            fresh
            and (retiring := retention.retiring(self, location)) != self.status.retired_checkpoint_directories
        ):
            # The directory the fresh run leaves behind is in the status before the run starts: a crash or a
            # refused status write after the submission would otherwise forget it (the new graph names only
            # the new directory).
            self.update(retired_checkpoint_directories=retiring)
            return self._done(SOON, observed=False)
        restore_batch = None
        lost_graph = restore_from == "latest-checkpoint" and graph is None
        recovered = retention.directory_from_status(self) if lost_graph else None
        if recovered is not None:
            # The job graph was deleted (by hand, or a namespace restored without it), but the status still
            # names the job's checkpoint directory, one the operator chose for this job: resume there;
            # Spark restores its newest committed batch (the pointers went with the graph, or cannot be
            # trusted without it).
            location = recovered
            self.actions.append(
                EmitEvent(
                    "Warning",
                    "JobGraphRecovered",
                    f"no job graph: attempt {attempt} resumes from its checkpoint directory {recovered}",
                )
            )
        elif lost_graph:
            # No record of where this job's state is: it starts without state, and says so.
            restore_from = "nothing"
            self.actions.append(
                EmitEvent("Warning", "StateNotFound", f"no job graph: attempt {attempt} starts without state")
            )
        elif restore_from == "latest-checkpoint":
            point = self.obs.restore_point
            if point is None:
                return self._done(WAIT)  # not read yet (a driver pod existed when this job was observed)
            if point.unusable:
                return self._manual_restore_required(point.unusable)
            if point.skipped:
                self.actions.append(EmitEvent("Warning", "CheckpointSkipped", point.why_skipped))
            restore_batch = point.pointer.batch_id if point.pointer else None
        standby = hot_standby.promotable(self, restore_from, graph, recovered)
        return self._start(attempt, restore_from, location, restore_batch, standby, reason, message)

    def _start(
        self,
        attempt: int,
        restore_from: RestoreFrom,
        location: str,
        restore_batch: int | None,
        standby: DriverObservation | None,
        reason: str,
        message: str,
    ) -> Decision:
        """The attempt: the standby promoted, else a new pod once no standby holds its name."""
        if standby is not None:
            self.settled.add(standby.pod_name)
            self.actions.append(PromoteStandby(standby.pod_name, attempt, location, restore_batch))
            reason, message = "StandbyPromoted", f"{message}: standby {standby.pod_name} promoted"
        elif waiting := [s for s in self.standbys if s.pod_name not in self.settled]:
            for late in waiting:  # it would hold this attempt's pod name
                self.delete(late, "a standby that cannot be promoted")
                self.settled.add(late.pod_name)
            return self._done(WAIT)
        else:
            placement = self.status.placement
            nodes = (
                tuple(placement.nodes)
                if placement and self.spec.local_recovery.enabled and restore_from == "latest-checkpoint"
                else ()
            )
            self.actions.append(SubmitAttempt(attempt, restore_from, location, restore_batch, nodes))
        self.update(
            attempt=attempt,
            checkpoint_directory=location,
            driver_pod=None,
            attempt_started_at=None,
            attempt_submitted_at=self.now,
            stop_requested_at=None,
            restarts=self.status.restarts.model_copy(update={"next_attempt_at": None}),
        )
        self.set_phase("Submitting", reason, message)
        self.condition("Progressing", "True", reason, message)
        ready = ready_condition(self.status.conditions)
        if ready is not None and ready.reason == QUOTA_EXCEEDED:  # the quota had room this time
            self.condition("Ready", "False", reason, message)
        return self._done(POLL)

    def _manual_restore_required(self, message: str) -> Decision:
        """Checkpoints exist but none is complete in storage: never a silent start from nothing. Failed with
        no result, so nothing starts until the user changes the spec (initialSavepoint, or stateless)."""
        self.update(phase="Failed")
        self.condition("Ready", "False", "InvalidSpec", message)
        self.actions.append(EmitEvent("Warning", "ManualRestoreRequired", message))
        return self._done()

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
            return self._done()
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
                    self, current, stop_savepoint_id(self.obs.job_uid, current.attempt), "stop"
                )
            ):
                return self._done(SOON)  # the pod goes once the status holds its savepoint (see _upgrade)
            if current is not None:
                self.delete_current("stopped")
            message = self._stopped_message(current)
            self.set_phase(target, target, message)
            self.update(stop_requested_at=None, driver_pod=None)
            self.condition("Ready", "False", target, message)
            self.condition("Progressing", "False", target, message)
            return self._done()
        if current.phase == DriverPhase.PENDING:
            self.delete_current("stop requested before the driver ran")
            return self._done(WAIT)
        first_request = self.status.stop_requested_at is None
        self._request_stop(
            current, stop_savepoint_id(self.obs.job_uid, current.attempt) if with_savepoint else ""
        )
        if first_request:
            self.set_phase("Stopping", "Stopping", "waiting for the running batch to commit")
        return self._done(WAIT)

    def _stopped_message(self, stopped: DriverObservation | None) -> str:
        if stopped is None or stopped.exit_code != 0:
            return "stopped"
        taken = stop_savepoint_id(self.obs.job_uid, stopped.attempt)
        if any(ref.id == taken for ref in self.status.savepoints):
            return f"stopped with a final checkpoint and savepoint {taken}"
        return "stopped with a final checkpoint"

    def _request_stop(self, current: DriverObservation, savepoint_id: str = "") -> None:
        """Ask once (again if the driver refused a deposed leader's request); a driver that has not stopped
        within stopTimeoutSeconds is cancelled (deleted)."""
        requested = self.status.stop_requested_at
        if requested is None:
            self.actions.append(RequestStop(current.pod_name, current.attempt, savepoint_id))
            self.update(stop_requested_at=self.now)
            return
        timeout = timedelta(seconds=self.spec.stop_timeout_seconds)
        if self.now - requested < timeout:
            if current.request_refused and current.phase == DriverPhase.RUNNING:
                # Asked again with this leader's term; the timeout still counts from the first request, so a
                # request refused again and again (a leader below the floor) ends in a cancel, never hangs.
                self.actions.append(RequestStop(current.pod_name, current.attempt, savepoint_id))
        elif current.phase != DriverPhase.TERMINATING:
            self.actions.append(
                EmitEvent(
                    "Warning",
                    "StopTimedOut",
                    f"no final checkpoint within {self.spec.stop_timeout_seconds} s; cancelling",
                )
            )
            self.delete_current("stop timed out")

    def _keep_running(self) -> Decision:
        status = self.status
        if status.attempt == 0:
            restore: RestoreFrom = "initial-savepoint" if self.spec.initial_savepoint else "nothing"
            return self._submit(restore, reason="Submitted", message="first attempt")
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
                self._request_stop(self.current, upgrade_savepoint_id(self.obs.job_uid, self.current.attempt))
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
                    self.condition("Degraded", "True", current.reason, current.message or current.reason)
                if upgrade_rollback.on_trial(self):
                    submitted = self.status.attempt_submitted_at
                    if not upgrade_rollback.within_window(self, submitted):
                        why = current.reason or "pending"
                        return self._rolled_back("UpgradeNotRunning", f"attempt {current.attempt} is {why}")
                    return self._done(upgrade_rollback.until_window_ends(self, submitted))
                return self._done(POLL)
            case DriverPhase.RUNNING:
                return self._running(current)
            case DriverPhase.SUCCEEDED if current.reason in {STOPPED, STOP_TIMED_OUT}:
                # It stopped on a request nobody wants now (a deposed leader's, resumed after a pause): the
                # script did not finish, so no result; the next attempt resumes from the final checkpoint.
                return self._failed(current)
            case DriverPhase.SUCCEEDED:
                self._record_result("Succeeded", current.message or "the driver finished with exit code 0")
                return self._done(WAIT)
            case DriverPhase.TERMINATING:
                self.delete_current("node lost")  # only acts for a pod on a lost node: it would never go
                return self._done(WAIT)  # wait for it to go
            case unknown:
                assert_never(unknown)

    def _running(self, current: DriverObservation) -> Decision:
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
        self._report_rollbacks(current)
        self._remember_placement(current.attempt)
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

    def _record_result(self, state: Literal["Succeeded", "Failed"], message: str) -> None:
        retain = self.spec.result_store.ttl_seconds
        data = job_data(self.spec, self.obs.job_uid, self.status)
        self.actions.append(RecordResult(state, message, self.now, retain, data))

    def _report_rollbacks(self, driver: DriverObservation) -> None:
        """Once per attempt: a user must learn that committed batches were given up (they run again)."""
        reported = self.status.last_rollback
        if not driver.rollbacks or (reported is not None and reported.attempt == driver.attempt):
            return
        message = "; ".join(driver.rollbacks)
        self.update(last_rollback=RollbackRef(attempt=driver.attempt, time=self.now, message=message))
        self.actions.append(EmitEvent("Warning", "CheckpointRolledBack", message))

    def _remember_placement(self, attempt: int) -> None:
        """Every node that ran one of this attempt's executors (executors come and go within an attempt)."""
        if not self.obs.executor_nodes:
            return
        placement = self.status.placement
        known = set(placement.nodes) if placement and placement.attempt == attempt else set()
        if not known.issuperset(self.obs.executor_nodes):
            nodes = sorted(known | set(self.obs.executor_nodes))
            self.update(placement=Placement(attempt=attempt, nodes=nodes))

    def _failed(self, current: DriverObservation | None) -> Decision:
        failure = _failure(current, self.status.attempt, self.now)
        if current is not None:  # its executors' pods are still there: the next attempt goes back to them
            self._remember_placement(current.attempt)
        if current is not None and current.reason == NO_RESTORABLE_CHECKPOINT:
            # No complete batch in the checkpoint: another attempt would find the same.
            self.update(last_failure=failure)
            self.delete_current("no restorable checkpoint")
            return self._manual_restore_required(failure.message)
        if upgrade_rollback.on_trial(self) and upgrade_rollback.within_window(
            self, self.status.attempt_submitted_at
        ):
            self.update(last_failure=failure)
            return self._rolled_back("UpgradeFailed", f"attempt {failure.attempt} failed: {failure.reason}")
        verdict = on_failure(
            self.spec.restart_strategy,
            self.status.restarts,
            self.now,
            self.status.attempt_started_at,
            self.uniform,
        )
        self.update(last_failure=failure, restarts=verdict.state)
        self.condition("Degraded", "True", failure.reason, failure.message)
        if failure.reason == NO_PROGRESS:
            # A hung driver looks Running to Kubernetes: say why it was replaced, and which setting decided.
            timeout = self.spec.liveness.progress_timeout_seconds
            self.actions.append(
                EmitEvent(
                    "Warning",
                    NO_PROGRESS,
                    f"attempt {failure.attempt} made no progress within spec.liveness.progressTimeoutSeconds "
                    f"({timeout} s): {failure.message}",
                )
            )
        if not verdict.restart:
            message = f"{failure.reason}: {failure.message} — not restarted: {verdict.reason}"
            self._record_result("Failed", message)
            self.condition("Ready", "False", "RestartsExhausted", message)
            return self._done(WAIT)
        due = self.now + timedelta(seconds=verdict.delay_seconds)
        self.update(restarts=verdict.state.model_copy(update={"next_attempt_at": due}))
        # Not deleted yet: its exit code and message are in this status first (phase Restarting deletes it,
        # woken by this status write), so a write refused as stale loses nothing with the pod.
        self.set_phase(
            "Restarting",
            "Restarting",
            f"attempt {self.status.attempt} failed ({failure.reason}); "
            f"restart in {verdict.delay_seconds:.1f} s ({verdict.reason})",
        )
        self.condition("Ready", "False", "Restarting", failure.message)
        return self._done(SOON if current is not None else max(SOON, verdict.delay_seconds))


def _failure(driver: DriverObservation | None, attempt: int, now: datetime) -> Failure:
    if driver is None:
        return Failure(reason="DriverLost", message="the driver pod disappeared", attempt=attempt, time=now)
    if driver.reason in {STOPPED, STOP_TIMED_OUT}:
        message = f"the driver stopped on a request the job no longer has: {driver.message}"
        return Failure(reason="UnwantedStop", message=message, exit_code=0, attempt=attempt, time=now)
    reason = driver.reason if driver.reason and driver.reason not in {"Error", "Completed"} else "DriverError"
    if reason == "DriverError" and driver.exit_code is not None and driver.exit_code > _SIGNALLED:
        reason = "DriverKilled"  # 128 + n: ended by signal n (137: SIGKILL, e.g. a kill or the OOM killer)
    message = driver.message or f"the driver exited with code {driver.exit_code}"
    return Failure(reason=reason, message=message, exit_code=driver.exit_code, attempt=attempt, time=now)
