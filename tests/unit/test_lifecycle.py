"""The lifecycle decision, driven through its state diagram with a fake clock."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from ftspark.domain.ha import CheckpointPointer, JobKey, JobResultEntry
from ftspark.domain.lifecycle import (
    QUOTA_RETRY,
    Decision,
    DeleteDriver,
    DeleteLeftoverExecutors,
    DriverObservation,
    DriverPhase,
    EmitEvent,
    KeepDriverLog,
    Observation,
    RecordResult,
    ReleaseDriverLease,
    RequestSavepoint,
    RequestStop,
    SavepointReport,
    SubmitAttempt,
    SubmittedGraph,
    decide,
    deferred,
    invalid_spec,
    spec_hash,
)
from ftspark.domain.lifecycle.delays import EXECUTORS_RECHECK
from ftspark.domain.models import JobResult, JobSpec, JobStatus, RestartState, UpgradeMode
from ftspark.domain.recovery import RestorePoint
from ftspark.domain.remedies import REMEDIES, remedy_for
from ftspark.domain.rollback import on_change
from ftspark.protocol import NO_PROGRESS, NO_RESTORABLE_CHECKPOINT, Exit, RestoreFrom

T0 = datetime(2026, 1, 1, tzinfo=UTC)
BASE = {
    "image": "img",
    "mainApplicationFile": "local:///job.py",
    "checkpoint": {"storage": "s3://bucket/job"},
    "restartStrategy": {"type": "fixed-delay", "fixedDelay": {"attempts": 2, "delaySeconds": 5}},
}


UID = "0123abcd-0000-4000-8000-000000000000"
NOTHING_TO_RESTORE = RestorePoint(None, ())


def spec(**changes: object) -> JobSpec:
    return JobSpec.model_validate({**BASE, **changes})


def location(run: int = 1) -> str:
    """The checkpoint directory a job started afresh by attempt `run` writes to."""
    return f"s3://bucket/job/checkpoints/0123abcd-run-{run}"


def observe(
    job: JobSpec,
    *drivers: DriverObservation,
    generation: int = 1,
    submitted: JobSpec | None = None,
    result: JobResultEntry | None = None,
    executor_nodes: tuple[str, ...] = (),
) -> Observation:
    """A job that has submitted (its graph is there, at location(1)) and has no checkpoint yet."""
    return Observation(
        job_uid=UID,
        generation=generation,
        spec_hash=spec_hash(job),
        graph=SubmittedGraph(UID, spec_hash(submitted or job), location()),
        drivers=drivers,
        result=result,
        executor_nodes=executor_nodes,
        restore_point=None if drivers else NOTHING_TO_RESTORE,
    )


def driver(attempt: int, phase: DriverPhase, **observed: Any) -> DriverObservation:
    """The attempt's driver pod as observed; observed: DriverObservation's other fields."""
    return DriverObservation(attempt, f"job-{attempt}-driver", phase, **observed)


def run(
    job: JobSpec,
    status: JobStatus,
    *drivers: DriverObservation,
    at: float = 0,
    submitted: JobSpec | None = None,
    result: JobResultEntry | None = None,
) -> Decision:
    observation = observe(job, *drivers, submitted=submitted, result=result)
    return decide(job, status, observation, T0 + timedelta(seconds=at), lambda: 0.5)


def kinds(decision: Decision) -> list[str]:
    return [type(action).__name__ for action in decision.actions if not isinstance(action, EmitEvent)]


def test_first_reconcile_submits_attempt_one() -> None:
    first = Observation(job_uid=UID, generation=1, spec_hash="h", restore_point=NOTHING_TO_RESTORE)
    decision = decide(spec(), JobStatus(), first, T0, lambda: 0.5)
    assert decision.actions[0] == SubmitAttempt(1, "nothing", location(1), new_records=True)
    assert decision.status.phase == "Submitting"
    assert decision.status.attempt == 1


def test_initial_savepoint_is_restored_on_first_submission() -> None:
    job = spec(initialSavepoint="s3://bucket/other/savepoints/sp-1")
    first = Observation(job_uid=UID, generation=1, spec_hash="h", restore_point=NOTHING_TO_RESTORE)
    decision = decide(job, JobStatus(), first, T0, lambda: 0.5)
    assert decision.actions[0] == SubmitAttempt(1, "initial-savepoint", location(1), new_records=True)


def test_running_driver_makes_the_job_ready() -> None:
    job = spec()
    decision = run(
        job, JobStatus(phase="Submitting", attempt=1), driver(1, DriverPhase.RUNNING, started_at=T0)
    )
    assert decision.status.phase == "Running"
    ready = next(c for c in decision.status.conditions if c.type == "Ready")
    assert ready.status == "True"
    assert decision.status.attempt_started_at == T0


def test_the_failure_history_keeps_the_newest_failed_attempts_with_their_times_and_codes() -> None:
    status = JobStatus(phase="Running", attempt=1, attempt_started_at=T0)
    for attempt, (reason, code) in enumerate([("OOMKilled", 137), ("ScriptFailed", 3), ("NoProgress", 4)], 1):
        status = status.model_copy(update={"phase": "Running", "attempt": attempt, "attempt_started_at": T0})
        failed = driver(attempt, DriverPhase.FAILED, exit_code=code, reason=reason, message=f"m{attempt}")
        status = run(spec(failureHistory=2), status, failed, at=attempt * 60).status
    kept = status.failures
    assert [(f.attempt, f.reason, f.exit_code, f.message) for f in kept] == [
        (2, "ScriptFailed", 3, "m2"),
        (3, "NoProgress", 4, "m3"),
    ], "the newest failureHistory, newest last"
    assert all(f.started_at == T0 for f in kept) and kept[-1].time == T0 + timedelta(seconds=180)
    assert status.last_failure == kept[-1]
    none_kept = run(
        spec(failureHistory=0),
        status.model_copy(update={"phase": "Running", "attempt": 4}),
        driver(4, DriverPhase.FAILED, exit_code=1, reason="DriverError"),
        at=300,
    ).status
    assert none_kept.failures == [] and none_kept.last_failure is not None
    assert spec_hash(spec(failureHistory=0)) == spec_hash(spec()), "a change restarts nothing"


@pytest.mark.parametrize(
    ("edit", "path", "expected"),
    [
        ({"restartStrategy": {"type": "none"}}, ("restart_strategy", "type"), "applies now"),
        ({"resultStore": {"ttlSeconds": 60}}, ("result_store", "ttl_seconds"), "applies now"),
        (
            {"checkpoint": {"storage": "s3://bucket/job", "retained": 9}},
            ("checkpoint", "retained"),
            "next attempt",
        ),
        (
            {"liveness": {"progressTimeoutSeconds": 600}},
            ("liveness", "progress_timeout_seconds"),
            "next attempt",
        ),
        ({"liveness": {"startTimeoutSeconds": 60}}, ("liveness", "start_timeout_seconds"), "applies now"),
        ({"env": [{"name": "MODE", "value": "x"}]}, ("env", "value"), "restarts the job"),
        ({"checkpoint": {"storage": "s3://bkt/other"}}, ("checkpoint", "storage"), "restarts the job"),
    ],
)
def test_what_an_edit_does_to_a_running_job_is_what_the_reference_says(
    edit: dict[str, Any], path: tuple[str, ...], expected: str
) -> None:
    """The spec's hash decides (an upgrade when it changes); on_change is what docs/reference.md shows."""
    assert (spec_hash(spec(**edit)) != spec_hash(spec())) == (expected == "restarts the job")
    assert on_change(path) == expected


def test_failed_driver_restarts_after_the_delay_and_never_overlaps_attempts() -> None:
    job = spec()
    running = JobStatus(phase="Running", attempt=1)
    failed = driver(1, DriverPhase.FAILED, exit_code=137, reason="OOMKilled", message="heap")
    decision = run(job, running, failed, at=10)
    assert decision.status.phase == "Restarting"
    assert decision.status.last_failure is not None
    assert decision.status.last_failure.reason == "OOMKilled"
    assert decision.status.last_failure.exit_code == 137
    # The failure is in the status before the pod that tells it goes: the next pass deletes it.
    assert "DeleteDriver" not in kinds(decision)
    assert decision.requeue_after == 0.05
    deleting = run(job, decision.status, failed, at=10)
    assert deleting.actions == (DeleteDriver("job-1-driver", 1, "restarting"),)
    assert deleting.status.restarts == decision.status.restarts, "one failure counted once"
    assert deleting.requeue_after == 5

    # Before the delay: wait. After it, while the old pod still exists: still wait.
    early = run(job, decision.status, at=12)
    assert "SubmitAttempt" not in kinds(early)
    pod_lingers = run(job, decision.status, driver(1, DriverPhase.TERMINATING), at=16)
    assert "SubmitAttempt" not in kinds(pod_lingers)

    resubmitted = run(job, decision.status, at=16)
    assert resubmitted.actions[0] == SubmitAttempt(2, "latest-checkpoint", location())
    assert resubmitted.status.attempt == 2


def test_an_ended_driver_has_its_lease_released_and_its_log_kept_before_its_pod_goes() -> None:
    """Fence and go: a driver whose container the kubelet reported terminated holds its Lease no more in
    truth; releasing it spares the next attempt the wait for its expiry. Its log outlives the pod, with
    those of the newest spec.failureHistory attempts."""
    job = spec(failureHistory=5)
    killed = driver(1, DriverPhase.FAILED, exit_code=137, reason="Error", ended=True)
    restarting = run(job, JobStatus(phase="Running", attempt=1), killed).status
    deleting = run(job, restarting, killed)
    assert deleting.actions == (
        ReleaseDriverLease("job-1-driver", 1),
        KeepDriverLog("job-1-driver", 1, kept=5),
        DeleteDriver(
            "job-1-driver", 1, "restarting", force=True
        ),  # nothing to stop: no kubelet's word to wait for
    )
    assert "KeepDriverLog" not in kinds(run(spec(failureHistory=0), restarting, killed)), "0 keeps none"
    # Still there, being deleted: released again (a no-op once it is), never deleted twice.
    lingering = replace(killed, phase=DriverPhase.TERMINATING)
    assert run(job, restarting, lingering).actions == (ReleaseDriverLease("job-1-driver", 1),)


@pytest.mark.parametrize(
    "failed",
    [
        pytest.param(driver(1, DriverPhase.FAILED, exit_code=137, reason="Error"), id="not-known-ended"),
        pytest.param(driver(1, DriverPhase.FAILED, reason="NodeLost", node_lost=True), id="on-a-lost-node"),
    ],
)
def test_a_driver_not_known_to_have_ended_keeps_its_lease_until_it_expires(failed: DriverObservation) -> None:
    job = spec()
    restarting = run(job, JobStatus(phase="Running", attempt=1), failed).status
    assert "ReleaseDriverLease" not in kinds(run(job, restarting, failed))
    # Nor is its log asked for: a lost node's kubelet does not answer, a running container's log is not done.
    assert "KeepDriverLog" not in kinds(run(job, restarting, failed))


def test_the_next_attempt_waits_until_no_executor_of_an_earlier_one_is_left() -> None:
    job = spec()
    restarting = run(job, JobStatus(phase="Running", attempt=1), at=10).status
    executors_left = replace(observe(job), leftover_executors=2)
    waiting = decide(job, restarting, executors_left, T0 + timedelta(seconds=16), lambda: 0.5)
    assert waiting.actions == (DeleteLeftoverExecutors(),)
    assert waiting.requeue_after == EXECUTORS_RECHECK, "their ends wake the job: this is the fallback"
    assert (waiting.status.attempt, waiting.status.phase) == (1, "Restarting"), "nothing submitted yet"
    gone = run(job, restarting, at=17)
    assert gone.actions[0] == SubmitAttempt(2, "latest-checkpoint", location())


def test_lost_driver_counts_as_a_failure() -> None:
    decision = run(spec(), JobStatus(phase="Running", attempt=1))
    assert decision.status.phase == "Restarting"
    assert decision.status.last_failure is not None
    assert decision.status.last_failure.reason == "DriverLost"


def test_exhausted_restarts_record_a_failed_result() -> None:
    job = spec()
    status = JobStatus(phase="Running", attempt=3)
    status = status.model_copy(update={"restarts": status.restarts.model_copy(update={"count": 2})})
    decision = run(job, status, driver(3, DriverPhase.FAILED, exit_code=1, message="Traceback: boom"))
    result = next(a for a in decision.actions if isinstance(a, RecordResult))
    assert result.state == "Failed"
    assert "boom" in result.message


def test_job_with_a_result_is_never_restarted() -> None:
    result = JobResultEntry(job=JobKey(namespace="n", name="job"), uid="u", state="Succeeded", finished_at=T0)
    decision = run(spec(), JobStatus(phase="Running", attempt=4), result=result)
    assert decision.status.phase == "Succeeded"
    assert "SubmitAttempt" not in kinds(decision)
    assert decision.requeue_after is None


def test_recorded_result_in_status_is_final_even_without_the_store_entry() -> None:
    status = JobStatus(phase="Succeeded", attempt=2, result=JobResult(state="Succeeded", time=T0))
    decision = run(spec(), status)
    assert decision.actions == ()
    assert decision.status.phase == "Succeeded"


def test_driver_exit_zero_without_stop_is_success() -> None:
    decision = run(
        spec(), JobStatus(phase="Running", attempt=1), driver(1, DriverPhase.SUCCEEDED, exit_code=0)
    )
    assert kinds(decision) == ["RecordResult"]


def test_stop_asks_the_driver_then_escalates_to_cancel_after_the_timeout() -> None:
    job = spec(desiredState="stopped", stopTimeoutSeconds=30)
    running = driver(1, DriverPhase.RUNNING)
    asked = run(job, JobStatus(phase="Running", attempt=1), running)
    assert asked.actions[0] == RequestStop("job-1-driver", 1)  # no savepoint: a plain stop
    assert asked.status.phase == "Stopping"
    waiting = run(job, asked.status, running, at=29)
    assert kinds(waiting) == []
    escalated = run(job, asked.status, running, at=30)
    assert kinds(escalated) == ["DeleteDriver"]

    stopped = run(job, asked.status, driver(1, DriverPhase.SUCCEEDED, exit_code=0), at=5)
    assert stopped.status.phase == "Stopped"

    resumed = run(spec(), stopped.status, at=40)
    assert resumed.actions[0] == SubmitAttempt(2, "latest-checkpoint", location())


def test_a_stop_with_savepoint_records_it_before_the_pod_goes_and_resumes_from_its_batch() -> None:
    job = spec(desiredState="stopped", savepoints={"onStop": True})
    asked = run(job, JobStatus(phase="Running", attempt=1), driver(1, DriverPhase.RUNNING))
    assert asked.actions[0] == RequestStop("job-1-driver", 1, "sp-stop-0123abcd-a1")
    answer = SavepointReport(
        id="sp-stop-0123abcd-a1", location="s3://bucket/job/savepoints/sp-stop-0123abcd-a1", batch_id=7
    )
    exited = driver(1, DriverPhase.SUCCEEDED, exit_code=0, savepoint=answer)
    recorded = run(job, asked.status, exited, at=5)
    assert kinds(recorded) == [], "the savepoint is in the status before the pod that reports it goes"
    (taken,) = recorded.status.savepoints
    assert (taken.id, taken.batch_id, taken.origin) == ("sp-stop-0123abcd-a1", 7, "stop")
    stopped = run(job, recorded.status, exited, at=6)
    assert kinds(stopped) == ["DeleteDriver"]
    assert stopped.status.phase == "Stopped"
    assert "savepoint sp-stop-0123abcd-a1" in next(
        c.message for c in stopped.status.conditions if c.type == "Ready"
    )
    assert stopped.status.savepoints == recorded.status.savepoints, "recorded once"
    # Resuming restores the latest checkpoint: the stop's final one, the batch the savepoint holds.
    resumed = run(spec(savepoints={"onStop": True}), stopped.status, at=40)
    assert resumed.actions[0] == SubmitAttempt(2, "latest-checkpoint", location())


def test_a_stop_with_savepoint_that_fails_to_take_it_still_stops_and_says_so() -> None:
    job = spec(desiredState="stopped", savepoints={"onStop": True})
    asked = run(job, JobStatus(phase="Running", attempt=1), driver(1, DriverPhase.RUNNING))
    failed = SavepointReport(id="sp-stop-0123abcd-a1", location="", batch_id=0, error="S3 refused the copy")
    exited = driver(1, DriverPhase.SUCCEEDED, exit_code=0, savepoint=failed)
    answered = run(job, asked.status, exited, at=5)
    assert answered.status.savepoints == []
    assert "SavepointFailed" in [a.reason for a in answered.actions if isinstance(a, EmitEvent)]
    assert answered.status.phase == "Stopped"
    assert "savepoint" not in next(c.message for c in answered.status.conditions if c.type == "Ready")


def test_resume_waits_for_a_stopped_driver_pod_to_go() -> None:
    stopping = JobStatus(phase="Stopping", attempt=1, stop_requested_at=T0)
    decision = run(spec(), stopping, driver(1, DriverPhase.SUCCEEDED, exit_code=0))
    assert kinds(decision) == ["DeleteDriver"], "a stop's exit 0 is not the job succeeding"


def test_cancel_deletes_now_and_resume_restores_the_latest_checkpoint() -> None:
    job = spec(desiredState="cancelled")
    cancelling = run(job, JobStatus(phase="Running", attempt=1), driver(1, DriverPhase.RUNNING))
    assert kinds(cancelling) == ["DeleteDriver"]
    cancelled = run(job, cancelling.status)
    assert cancelled.status.phase == "Cancelled"
    assert run(spec(), cancelled.status).actions[0] == SubmitAttempt(2, "latest-checkpoint", location())


def test_a_resume_from_a_checkpoint_older_than_the_limit_waits_for_the_user() -> None:
    newest = CheckpointPointer(checkpoint_id=4, batch_id=9, location=location(), completed_at=T0, attempt=1)
    stopped = JobStatus(phase="Stopped", attempt=1)
    job = spec(checkpoint={"storage": "s3://bucket/job", "maxResumeAgeSeconds": 3600})

    def resume(job: JobSpec, status: JobStatus, at: float) -> Decision:
        observed = replace(observe(job), latest_checkpoint=newest)
        return decide(job, status, observed, T0 + timedelta(seconds=at), lambda: 0.5)

    assert resume(job, stopped, at=3600).actions[0] == SubmitAttempt(2, "latest-checkpoint", location())
    held = resume(job, stopped, at=3601)
    assert kinds(held) == [], "nothing starts"
    assert [a.reason for a in held.actions if isinstance(a, EmitEvent)] == ["StateTooOld"]
    ready = next(c for c in held.status.conditions if c.type == "Ready")
    assert (ready.status, ready.reason) == ("False", "StateTooOld")
    assert "3601 s old" in ready.message and "maxResumeAgeSeconds" in ready.message
    assert held.status.phase == "Stopped"
    assert resume(job, held.status, at=4000).actions == (), "said once"
    # The user's answer is a spec change: no limit (or a higher one) resumes from that checkpoint.
    unlimited = spec(checkpoint={"storage": "s3://bucket/job", "maxResumeAgeSeconds": 0})
    assert resume(unlimited, held.status, at=4000).actions[0] == SubmitAttempt(
        2, "latest-checkpoint", location()
    )


def test_only_a_change_of_what_the_attempt_runs_is_an_upgrade() -> None:
    base = spec()
    storage = {"storage": "s3://bucket/job"}
    same = [
        spec(checkpoint={**storage, "maxResumeAgeSeconds": 3600, "retainOnDelete": True}),
        spec(desiredState="stopped", stopTimeoutSeconds=5, savepoints={"onStop": True}),
        spec(upgradeRollback={"enabled": True}, liveness={"progressTimeoutSeconds": 60}),
        spec(checkpoint={**storage, "retained": 4}),  # the next attempt's driver keeps 4 pointers
        spec(restartStrategy={"type": "none"}, resultStore={"ttlSeconds": 60}, failureHistory=9),
    ]
    assert {spec_hash(job) for job in same} == {spec_hash(base)}
    changed = [
        spec(image="img:2"),
        spec(checkpoint={"storage": "s3://bucket/other"}),
        spec(arguments=["--v2"]),
    ]
    assert spec_hash(base) not in {spec_hash(job) for job in changed}


def test_spec_change_follows_the_upgrade_mode() -> None:
    old = spec()
    running = JobStatus(phase="Running", attempt=1)
    cases: tuple[tuple[UpgradeMode, RestoreFrom, str], ...] = (
        ("stateless", "nothing", location(2)),
        ("last-state", "latest-checkpoint", location(1)),
    )
    for mode, restore, directory in cases:
        new = spec(upgradeMode=mode, arguments=["--v2"])
        upgrading = run(new, running, driver(1, DriverPhase.RUNNING), submitted=old)
        assert kinds(upgrading) == ["DeleteDriver"]
        assert upgrading.status.phase == "Upgrading"
        submitted = run(new, upgrading.status, submitted=old)
        if mode == "stateless":  # the directory it leaves behind is in the status before the new run starts
            assert submitted.actions == ()
            assert submitted.status.retired_checkpoint_directories == [location(1)]
            submitted = run(new, submitted.status, submitted=old)
        assert submitted.actions[0] == SubmitAttempt(2, restore, directory)

    new = spec(upgradeMode="savepoint", arguments=["--v2"])
    upgrading = run(new, running, driver(1, DriverPhase.RUNNING), submitted=old)
    assert upgrading.actions[0] == RequestStop("job-1-driver", 1, "sp-upgrade-0123abcd-a1")
    answer = SavepointReport(id="sp-upgrade-0123abcd-a1", location="s3://bucket/job/savepoints/x", batch_id=9)
    stopped = driver(1, DriverPhase.SUCCEEDED, exit_code=0, savepoint=answer)
    finished = run(new, upgrading.status, stopped, submitted=old)
    assert kinds(finished) == [], "the savepoint is in the status before the pod that reports it goes"
    assert [(sp.id, sp.batch_id) for sp in finished.status.savepoints] == [("sp-upgrade-0123abcd-a1", 9)]
    deleting = run(new, finished.status, stopped, submitted=old)
    assert kinds(deleting) == ["DeleteDriver"]
    assert deleting.status.savepoints == finished.status.savepoints
    assert run(new, finished.status, submitted=old).actions[0] == SubmitAttempt(
        2, "latest-checkpoint", location()
    )


def test_a_savepoint_upgrade_whose_stop_hangs_is_cancelled_after_the_stop_timeout() -> None:
    old, new = spec(), spec(upgradeMode="savepoint", arguments=["--v2"], stopTimeoutSeconds=30)
    running = driver(1, DriverPhase.RUNNING)
    upgrading = run(new, JobStatus(phase="Running", attempt=1), running, submitted=old)
    assert kinds(upgrading) == ["RequestStop"]
    assert kinds(run(new, upgrading.status, running, at=29, submitted=old)) == []
    escalated = run(new, upgrading.status, running, at=30, submitted=old)
    assert kinds(escalated) == ["DeleteDriver"]
    timed_out = EmitEvent("Warning", "StopTimedOut", "no final checkpoint within 30 s; cancelling")
    assert timed_out in escalated.actions
    gone = run(new, escalated.status, at=31, submitted=old)
    assert gone.actions[0] == SubmitAttempt(2, "latest-checkpoint", location())


def test_observed_generation_follows_every_spec_change_acted_on() -> None:
    status = JobStatus(phase="Running", attempt=1, observed_generation=1)
    stop = spec(desiredState="stopped")
    observation = observe(stop, driver(1, DriverPhase.RUNNING), generation=2)
    stopping = decide(stop, status, observation, T0, lambda: 0.5)
    assert stopping.status.observed_generation == 2


def test_desired_state_and_nonce_changes_are_not_upgrades() -> None:
    assert spec_hash(spec()) == spec_hash(spec(desiredState="stopped", savepointTriggerNonce=3))
    # Timeouts apply from the next attempt: a new setting (or its default) must not restart running jobs.
    assert spec_hash(spec()) == spec_hash(spec(liveness={"progressTimeoutSeconds": 60}))
    assert spec_hash(spec()) != spec_hash(spec(arguments=["x"]))


def test_driver_of_a_later_attempt_is_adopted() -> None:
    # Crash after creating attempt 2's pod, before recording it: the next leader adopts it, no third attempt.
    decision = run(spec(), JobStatus(phase="Restarting", attempt=1), driver(2, DriverPhase.RUNNING))
    assert decision.status.attempt == 2
    assert "SubmitAttempt" not in kinds(decision)


def test_image_pull_errors_are_surfaced() -> None:
    pending = driver(1, DriverPhase.PENDING, reason="ImagePullBackOff", message="image not found")
    decision = run(spec(), JobStatus(phase="Submitting", attempt=1), pending)
    degraded = next(c for c in decision.status.conditions if c.type == "Degraded")
    assert (degraded.status, degraded.reason, degraded.message) == (
        "True",
        "ImagePullBackOff",
        "image not found",
    )


def test_a_driver_that_cannot_start_fails_after_the_start_timeout_and_is_restarted() -> None:
    """Waiting is no failure until spec.liveness.startTimeoutSeconds has passed since the attempt was
    submitted; then the restart strategy decides, with the waiting cause as the failure's reason."""
    job = spec(liveness={"startTimeoutSeconds": 120})
    submitted = JobStatus(phase="Submitting", attempt=1, attempt_submitted_at=T0)
    pending = driver(
        1, DriverPhase.PENDING, reason="CreateContainerConfigError", message='secret "s3" not found'
    )
    waiting = run(job, submitted, pending, at=100)
    assert waiting.status.phase == "Submitting" and waiting.status.last_failure is None
    assert waiting.requeue_after == 20, "looks again when the time is up"
    failed = run(job, waiting.status, pending, at=121)
    assert failed.status.phase == "Restarting"
    failure = failed.status.last_failure
    assert failure is not None and failure.reason == "CreateContainerConfigError"
    assert failure.message == (
        'not started within spec.liveness.startTimeoutSeconds (120 s): secret "s3" not found'
    )
    assert run(job, failed.status, pending, at=122).actions[-1] == DeleteDriver(
        "job-1-driver", 1, "restarting"
    )
    # Pending for a cause that passes by itself (an image being pulled): no deadline. 0: none at all.
    creating = replace(pending, reason="ContainerCreating", message="")
    assert run(job, submitted, creating, at=10_000).status.phase == "Submitting"
    never = spec(liveness={"startTimeoutSeconds": 0})
    assert run(never, submitted, pending, at=10_000).status.phase == "Submitting"


def test_a_driver_no_node_takes_is_degraded_with_the_schedulers_words_and_one_event() -> None:
    why = "no node can run the driver pod: 0/3 nodes are available: 3 Insufficient cpu"
    pending = driver(1, DriverPhase.PENDING, reason="DriverUnschedulable", message=why)
    first = run(spec(), JobStatus(phase="Submitting", attempt=1), pending)
    degraded = next(c for c in first.status.conditions if c.type == "Degraded")
    assert (degraded.status, degraded.reason, degraded.message) == ("True", "DriverUnschedulable", why)
    assert [(e.type, e.reason, e.message) for e in first.actions if isinstance(e, EmitEvent)] == [
        ("Warning", "DriverUnschedulable", why)
    ]
    again = run(spec(), first.status, pending)
    assert not [e for e in again.actions if isinstance(e, EmitEvent)], (
        "an Event when it is news, not every pass"
    )
    other = replace(pending, message=f"{why}, 1 node(s) had untolerated taint")
    assert [e.message for e in run(spec(), again.status, other).actions if isinstance(e, EmitEvent)] == [
        other.message
    ]


def test_invalid_spec_names_the_field_and_acts_on_nothing() -> None:
    decision = invalid_spec(JobStatus(), 3, "checkpoint.storage", "must be an s3:// URI", T0)
    ready = decision.status.conditions[0]
    assert (ready.status, ready.reason) == ("False", "InvalidSpec")
    assert "spec.checkpoint.storage" in ready.message
    assert decision.actions == (EmitEvent("Warning", "InvalidSpec", ready.message),)


def test_a_quota_without_room_is_said_once_and_tried_again_without_counting_a_failure() -> None:
    waiting = JobStatus(phase="Restarting", attempt=2)
    refused = "the API server refused the driver's Pod job-3-driver for now: exceeded quota: q"
    decision = deferred(waiting, 4, refused, T0)
    ready = decision.status.conditions[0]
    assert (ready.status, ready.reason, ready.message) == ("False", "QuotaExceeded", refused)
    assert decision.actions == (EmitEvent("Warning", "QuotaExceeded", refused),)
    assert decision.requeue_after == QUOTA_RETRY and not decision.waiting
    assert decision.status.model_copy(update={"conditions": []}) == waiting, "nothing else changes"
    again = deferred(decision.status, 4, refused, T0)
    assert again.actions == () and again.status == decision.status, "said once while it stays the same"


def test_manual_restore_waits_for_a_spec_change() -> None:
    waiting = JobStatus(phase="Failed", attempt=2, observed_generation=1)
    assert run(spec(), waiting).actions == ()
    fixed = spec(upgradeMode="stateless")
    observation = observe(fixed, generation=2, submitted=spec())
    retiring = decide(fixed, waiting, observation, T0, lambda: 0.5)
    assert retiring.actions == () and retiring.status.retired_checkpoint_directories == [location(1)]
    decision = decide(fixed, retiring.status, observation, T0, lambda: 0.5)
    assert decision.actions[0] == SubmitAttempt(3, "nothing", location(3))


def test_a_request_the_driver_refused_is_asked_again_by_the_current_leader() -> None:
    """A deposed leader's request (its term below the floor) is refused by the driver: the current leader
    asks again, with its own term, instead of letting the stop time out into a cancel."""
    job = spec(desiredState="stopped", stopTimeoutSeconds=30)
    asked = run(job, JobStatus(phase="Running", attempt=1), driver(1, DriverPhase.RUNNING))
    refused = driver(1, DriverPhase.RUNNING, request_refused=True)
    again = run(job, asked.status, refused, at=10)
    assert again.actions == (RequestStop("job-1-driver", 1),)
    assert kinds(run(job, again.status, driver(1, DriverPhase.RUNNING), at=11)) == [], "asked once more"
    # Refused again and again (this leader's own term below the floor): the stop still times out.
    assert again.status.stop_requested_at == T0, "the timeout counts from the first request"
    assert kinds(run(job, again.status, refused, at=30)) == ["DeleteDriver"]

    nonce = spec(savepointTriggerNonce=4)
    pending = run(nonce, JobStatus(phase="Running", attempt=2), driver(2, DriverPhase.RUNNING)).status
    refused_savepoint = driver(2, DriverPhase.RUNNING, request_refused=True)
    asked_again = run(nonce, pending, refused_savepoint, at=5)
    assert RequestSavepoint("job-2-driver", 2, "sp-4-0123abcd-a2") in asked_again.actions
    given_up = run(nonce, asked_again.status, refused_savepoint, at=nonce.stop_timeout_seconds)
    assert "RequestSavepoint" not in kinds(given_up)
    assert given_up.status.savepoint_in_progress is None, "a savepoint refused again and again fails in time"


def test_a_new_savepoint_nonce_asks_the_running_driver_once_and_records_the_answer() -> None:
    job = spec(savepointTriggerNonce=4)
    running = JobStatus(phase="Running", attempt=2)
    asked = run(job, running, driver(2, DriverPhase.RUNNING))
    assert RequestSavepoint("job-2-driver", 2, "sp-4-0123abcd-a2") in asked.actions
    assert asked.status.savepoint_in_progress is not None
    assert asked.requeue_after == job.stop_timeout_seconds

    again = run(job, asked.status, driver(2, DriverPhase.RUNNING), at=5)
    assert not any(isinstance(a, RequestSavepoint) for a in again.actions), "asked once"

    report = SavepointReport(
        id="sp-4-0123abcd-a2", location="s3://bkt/job/savepoints/sp-4-0123abcd-a2", batch_id=17
    )
    done = run(job, asked.status, driver(2, DriverPhase.RUNNING, savepoint=report), at=8)
    assert done.status.savepoint_in_progress is None
    assert done.status.handled_savepoint_nonce == 4
    taken = done.status.savepoints[-1]
    assert (taken.id, taken.batch_id, taken.trigger_nonce) == ("sp-4-0123abcd-a2", 17, 4)
    assert any(isinstance(a, EmitEvent) and a.reason == "SavepointCompleted" for a in done.actions)
    assert kinds(run(job, done.status, driver(2, DriverPhase.RUNNING, savepoint=report), at=9)) == []


def test_a_checkpoint_rollback_is_reported_once_per_attempt() -> None:
    job = spec()
    rolled = ("s3://b/q: rolled back from batch 7 to 6 (offsets/7 unreadable)",)
    first = run(job, JobStatus(phase="Running", attempt=3), driver(3, DriverPhase.RUNNING, rollbacks=rolled))
    events = [a for a in first.actions if isinstance(a, EmitEvent)]
    assert [(e.type, e.reason, e.message) for e in events] == [("Warning", "CheckpointRolledBack", rolled[0])]
    assert first.status.last_rollback is not None
    assert (first.status.last_rollback.attempt, first.status.last_rollback.message) == (3, rolled[0])

    again = run(job, first.status, driver(3, DriverPhase.RUNNING, rollbacks=rolled), at=5)
    assert not [a for a in again.actions if isinstance(a, EmitEvent)], "reported once"
    later = run(
        job, again.status.model_copy(update={"attempt": 4}), driver(4, DriverPhase.RUNNING, rollbacks=rolled)
    )
    assert any(isinstance(a, EmitEvent) and a.reason == "CheckpointRolledBack" for a in later.actions)


def test_a_savepoint_without_answer_fails_after_the_stop_timeout_and_is_not_retried() -> None:
    job = spec(savepointTriggerNonce=1, stopTimeoutSeconds=60)
    asked = run(job, JobStatus(phase="Running", attempt=1), driver(1, DriverPhase.RUNNING))
    timed_out = run(job, asked.status, driver(1, DriverPhase.RUNNING), at=60)
    assert timed_out.status.savepoint_in_progress is None
    assert timed_out.status.handled_savepoint_nonce == 1
    assert any(isinstance(a, EmitEvent) and a.reason == "SavepointFailed" for a in timed_out.actions)
    assert kinds(run(job, timed_out.status, driver(1, DriverPhase.RUNNING), at=61)) == []


def test_local_recovery_remembers_executor_nodes_and_sends_the_next_attempt_back() -> None:
    job = spec(localRecovery={"enabled": True})
    running = JobStatus(phase="Running", attempt=1)
    observation = observe(job, driver(1, DriverPhase.RUNNING), executor_nodes=("n2", "n1"))
    seen = decide(job, running, observation, T0, lambda: 0.5)
    assert seen.status.placement is not None
    assert seen.status.placement.nodes == ["n1", "n2"]
    more = observe(job, driver(1, DriverPhase.RUNNING), executor_nodes=("n3",))
    assert decide(job, seen.status, more, T0, lambda: 0.5).status.placement.nodes == ["n1", "n2", "n3"]  # type: ignore[union-attr]

    failed = run(job, seen.status, driver(1, DriverPhase.FAILED, exit_code=137))
    restarted = run(job, failed.status, at=60)
    assert restarted.actions[0] == SubmitAttempt(2, "latest-checkpoint", location(), None, ("n1", "n2"))

    without = spec()
    assert run(without, failed.status, at=60).actions[0] == SubmitAttempt(
        2, "latest-checkpoint", location(), None, ()
    )


def test_a_driver_on_a_lost_node_is_force_deleted_and_restarted() -> None:
    lost = driver(
        1, DriverPhase.FAILED, reason="NodeLost", node_lost=True, message="node n1 stopped reporting"
    )
    decision = run(spec(), JobStatus(phase="Running", attempt=1), lost)
    assert (
        DeleteDriver("job-1-driver", 1, "restarting", force=True)
        in run(spec(), decision.status, lost).actions
    )
    assert decision.status.last_failure is not None
    assert decision.status.last_failure.reason == "NodeLost"
    stuck = driver(1, DriverPhase.TERMINATING, reason="NodeLost", node_lost=True)
    waiting = run(spec(), decision.status, stuck, at=10)
    assert DeleteDriver("job-1-driver", 1, "restarting", force=True) in waiting.actions
    assert "SubmitAttempt" not in kinds(waiting), "never while the old pod object exists"


def test_the_longest_durations_a_spec_admits_decide_without_overflow() -> None:
    year = 365 * 24 * 3600
    longest = [
        {"type": "fixed-delay", "fixedDelay": {"attempts": 5, "delaySeconds": year}},
        {"type": "failure-rate", "failureRate": {"intervalSeconds": year, "delaySeconds": year}},
        {
            "type": "exponential-delay",
            "exponentialDelay": {
                "initialBackoffSeconds": year,
                "maxBackoffSeconds": year,
                "backoffMultiplier": 1000,
                "resetBackoffThresholdSeconds": year,
            },
        },
    ]
    for strategy in longest:
        job = spec(restartStrategy=strategy, stopTimeoutSeconds=year)
        failed = run(job, JobStatus(phase="Running", attempt=1), driver(1, DriverPhase.FAILED, exit_code=1))
        assert failed.status.phase == "Restarting"
        stopping = run(
            spec(desiredState="stopped", stopTimeoutSeconds=year),
            JobStatus(phase="Stopping", attempt=1, stop_requested_at=T0),
            driver(1, DriverPhase.RUNNING),
            at=year,
        )
        assert stopping.status.phase == "Stopping"
    for too_long in (
        {"stopTimeoutSeconds": 2**63 - 1},
        {"restartStrategy": longest[0] | {"fixedDelay": {"delaySeconds": 1e12}}},
    ):
        with pytest.raises(ValidationError, match="less than or equal to 31536000"):
            spec(**too_long)


def test_a_driver_with_no_restorable_checkpoint_asks_for_a_manual_restore_instead_of_restarting() -> None:
    # The default strategy restarts without limit: another attempt would find the same broken checkpoint.
    job = spec(restartStrategy={"type": "exponential-delay"})
    broken = driver(1, DriverPhase.FAILED, exit_code=2, reason=NO_RESTORABLE_CHECKPOINT, message="no batch")
    decision = run(job, JobStatus(phase="Running", attempt=1), broken)
    assert decision.status.phase == "Failed"
    assert decision.status.result is None, "not final: a spec change starts it again"
    assert DeleteDriver("job-1-driver", 1, "no restorable checkpoint") in decision.actions
    assert EmitEvent("Warning", "ManualRestoreRequired", "no batch") in decision.actions
    assert "SubmitAttempt" not in kinds(run(job, decision.status, at=600))


def test_a_stop_nobody_wants_now_is_never_a_streaming_jobs_success() -> None:
    # A deposed leader, resumed after a pause, annotated the driver with a stop: it stopped with a final
    # checkpoint and exit 0. The job still wants to run: restart from that checkpoint, no result.
    stopped = driver(1, DriverPhase.SUCCEEDED, exit_code=0, reason="Stopped", message="last batches {'q': 9}")
    decision = run(spec(), JobStatus(phase="Running", attempt=1), stopped, at=10)
    assert "RecordResult" not in kinds(decision)
    assert decision.status.phase == "Restarting"
    assert decision.status.last_failure is not None
    assert decision.status.last_failure.reason == "UnwantedStop"
    resumed = run(spec(), decision.status, at=20)
    assert resumed.actions[0] == SubmitAttempt(2, "latest-checkpoint", location())
    finished = driver(1, DriverPhase.SUCCEEDED, exit_code=0, reason="Finished", message="done")
    assert "RecordResult" in kinds(run(spec(), JobStatus(phase="Running", attempt=1), finished))


def test_a_hung_driver_is_a_failure_restarted_by_the_strategy_and_said_so() -> None:
    job = spec(liveness={"progressTimeoutSeconds": 60})
    message = "query counts showed no sign of life (no batch, no idle event) for 60 s"
    hung = driver(1, DriverPhase.FAILED, exit_code=Exit.NO_PROGRESS, reason=NO_PROGRESS, message=message)
    decision = run(job, JobStatus(phase="Running", attempt=1), hung, at=10)
    assert decision.status.phase == "Restarting"
    failure = decision.status.last_failure
    assert failure is not None
    assert (failure.reason, failure.exit_code, failure.message) == (NO_PROGRESS, 4, message)
    degraded = next(c for c in decision.status.conditions if c.type == "Degraded")
    assert (degraded.status, degraded.reason, degraded.message) == ("True", NO_PROGRESS, message)
    said = [a for a in decision.actions if isinstance(a, EmitEvent) and a.reason == NO_PROGRESS]
    assert said == [
        EmitEvent(
            "Warning",
            NO_PROGRESS,
            f"attempt 1 made no progress within spec.liveness.progressTimeoutSeconds (60 s): {message}",
        )
    ]
    assert decision.status.restarts.count == 1, "counted by the restart strategy like any failure"
    assert DeleteDriver("job-1-driver", 1, "restarting") in run(job, decision.status, hung).actions
    resubmitted = run(job, decision.status, at=20)
    assert resubmitted.actions[0] == SubmitAttempt(2, "latest-checkpoint", location())

    # With the restarts used up it ends the job, and still says why.
    exhausted = run(
        job,
        JobStatus.model_validate({"phase": "Running", "attempt": 3, "restarts": {"count": 2}}),
        driver(3, DriverPhase.FAILED, exit_code=4, reason=NO_PROGRESS, message=message),
        at=10,
    )
    assert "RecordResult" in kinds(exhausted)
    assert NO_PROGRESS in [a.reason for a in exhausted.actions if isinstance(a, EmitEvent)]
    other = run(job, JobStatus(phase="Running", attempt=1), driver(1, DriverPhase.FAILED, exit_code=1))
    assert NO_PROGRESS not in [a.reason for a in other.actions if isinstance(a, EmitEvent)]


def test_a_cause_no_restart_fixes_ends_the_job_after_configuration_failures_in_a_row() -> None:
    """Whatever the strategy allows (exponential-delay: for ever), a missing main file fails the job at the
    third attempt in a row, its result naming the cause; another cause, or an attempt that commits, resets
    the count; 0 leaves it to the strategy."""
    missing = driver(1, DriverPhase.FAILED, exit_code=2, reason="MainFileMissing", message="no /job.py")
    after_two = JobStatus(phase="Submitting", attempt=1, restarts=RestartState(configuration_failures=2))
    ended = run(spec(), after_two, missing)
    result = next(a for a in ended.actions if isinstance(a, RecordResult))
    assert result.state == "Failed" and ended.status.phase != "Restarting"
    assert result.message.startswith("MainFileMissing: no /job.py — not restarted: 3 attempt(s) in a row")
    assert "restartStrategy.configurationFailures: 3" in result.message
    found = remedy_for(ended.status.model_dump(mode="json", by_alias=True))
    assert found == ("MainFileMissing", REMEDIES["MainFileMissing"]), "what to do: the failure's own fix"

    after_one = after_two.model_copy(update={"restarts": RestartState(configuration_failures=1)})
    counted = run(spec(), after_one, missing)
    assert counted.status.phase == "Restarting" and counted.status.restarts.configuration_failures == 2
    other = replace(missing, reason="ScriptFailed", exit_code=1)
    assert run(spec(), after_two, other).status.restarts.configuration_failures == 0, "another cause"
    no_limit = spec(restartStrategy={"configurationFailures": 0})
    assert run(no_limit, after_two, missing).status.phase == "Restarting"
    running = run(spec(), after_two, driver(1, DriverPhase.RUNNING))
    assert running.status.restarts.configuration_failures == 2, "running a moment proves nothing"
    observed = observe(spec(), driver(1, DriverPhase.RUNNING))
    batch = CheckpointPointer(checkpoint_id=1, batch_id=0, location=location(), completed_at=T0, attempt=1)
    committed = replace(observed, latest_checkpoint=batch)
    worked = decide(spec(), running.status, committed, T0, lambda: 0.5)
    assert worked.status.restarts.configuration_failures == 0, "an attempt that commits a batch resets it"
    assert counted.status.failures[-1].category == "configuration", "the failure says whose cause it is"
