"""Upgrade rollback (domain/rollback.py, driven through `decide`): a spec becomes stable after the window;
a spec change whose attempt fails, or is not Running, within the window is rolled back to it; the spec the
operator then acts on is the stable one with the user's current desired state, until the spec changes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from ftspark.domain.lifecycle import (
    Decision,
    DeleteDriver,
    DriverObservation,
    DriverPhase,
    EmitEvent,
    Observation,
    SubmitAttempt,
    SubmittedGraph,
    decide,
    spec_hash,
)
from ftspark.domain.models import JobSpec, JobStatus, StableSpec, UpgradeRollback
from ftspark.domain.recovery import RestorePoint
from ftspark.domain.rollback import effective_spec

T0 = datetime(2026, 1, 1, tzinfo=UTC)
UID = "0123abcd-0000-4000-8000-000000000000"
WINDOW = 300
BASE = {
    "image": "img:1",
    "mainApplicationFile": "local:///job.py",
    "checkpoint": {"storage": "s3://bucket/job"},
    "upgradeRollback": {"enabled": True, "windowSeconds": WINDOW},
}
LOCATION = "s3://bucket/job/checkpoints/0123abcd-run-1"


def spec(**changes: Any) -> JobSpec:
    return JobSpec.model_validate({**BASE, **changes})


GOOD, BAD = spec(), spec(image="img:2")


def stable(job: JobSpec = GOOD, generation: int = 1) -> StableSpec:
    dumped = job.model_dump_json(by_alias=True, exclude_defaults=True)
    return StableSpec(generation=generation, spec_hash=spec_hash(job), spec=dumped, time=T0)


def driver(attempt: int, phase: DriverPhase, **observed: Any) -> DriverObservation:
    return DriverObservation(attempt, f"job-{attempt}-driver", phase, **observed)


def at(
    job: JobSpec,
    status: JobStatus,
    seconds: float,
    *drivers: DriverObservation,
    generation: int = 2,
    submitted: JobSpec | None = None,
) -> Decision:
    """decide() `seconds` after T0 for a job whose graph was submitted with `submitted` (default: job)."""
    observation = Observation(
        job_uid=UID,
        generation=generation,
        spec_hash=spec_hash(job),
        graph=SubmittedGraph(UID, spec_hash(submitted or job), LOCATION),
        drivers=drivers,
        restore_point=None if drivers else RestorePoint(None, ()),
    )
    return decide(job, status, observation, T0 + timedelta(seconds=seconds), lambda: 0.5)


def reasons(decision: Decision) -> list[str]:
    return [a.reason for a in decision.actions if isinstance(a, EmitEvent)]


def upgraded(**status: Any) -> JobStatus:
    """Attempt 2 runs BAD (generation 2), submitted at T0; GOOD (generation 1) is the stable spec."""
    fields: dict[str, Any] = {
        "phase": "Running",
        "attempt": 2,
        "attempt_submitted_at": T0,
        "last_stable_spec": stable(),
    }
    return JobStatus(**(fields | status))


def test_a_spec_running_for_the_window_becomes_the_stable_one() -> None:
    running = JobStatus(phase="Running", attempt=1, attempt_started_at=T0, attempt_submitted_at=T0)
    early = at(GOOD, running, WINDOW - 1, driver(1, DriverPhase.RUNNING), generation=1)
    assert early.status.last_stable_spec is None
    assert early.requeue_after == pytest.approx(1.0), "woken when the window ends"
    later = at(GOOD, running, WINDOW, driver(1, DriverPhase.RUNNING), generation=1)
    kept = later.status.last_stable_spec
    assert kept is not None
    assert (kept.generation, kept.spec_hash) == (1, spec_hash(GOOD))
    assert JobSpec.model_validate_json(kept.spec) == GOOD


def test_a_new_generation_of_the_same_spec_becomes_stable_after_the_window_unless_rolled_back() -> None:
    # Stopped and resumed (desiredState changed twice): generation 3 runs the same spec as generation 1.
    resumed = JobStatus(
        phase="Running", attempt=2, attempt_started_at=T0, attempt_submitted_at=T0, last_stable_spec=stable()
    )
    early = at(GOOD, resumed, WINDOW - 1, driver(2, DriverPhase.RUNNING), generation=3)
    assert early.status.last_stable_spec == stable(), "not before the resumed attempt ran for the window"
    later = at(GOOD, resumed, WINDOW, driver(2, DriverPhase.RUNNING), generation=3)
    assert later.status.last_stable_spec is not None
    assert (later.status.last_stable_spec.generation, later.status.last_stable_spec.spec_hash) == (
        3,
        spec_hash(GOOD),
    )
    # A rolled-back generation runs the stable spec (same hash) but is not stable itself.
    rolled = resumed.model_copy(
        update={"upgrade_rollback": UpgradeRollback(generation=4, time=T0, reason="UpgradeFailed")}
    )
    kept = at(GOOD, rolled, WINDOW * 2, driver(2, DriverPhase.RUNNING), generation=4)
    assert kept.status.last_stable_spec == stable()


def test_an_upgrade_that_fails_within_the_window_is_rolled_back_to_the_stable_spec() -> None:
    failed = driver(2, DriverPhase.FAILED, exit_code=1, reason="ScriptFailed", message="ImportError: x")
    rolled = at(BAD, upgraded(attempt_started_at=T0), 60, failed)
    assert "UpgradeRolledBack" in reasons(rolled)
    assert [a for a in rolled.actions if isinstance(a, DeleteDriver)], "the failed attempt goes"
    assert rolled.status.upgrade_rollback is not None
    assert (rolled.status.upgrade_rollback.generation, rolled.status.upgrade_rollback.reason) == (
        2,
        "UpgradeFailed",
    )
    assert rolled.status.last_failure is not None and rolled.status.last_failure.reason == "ScriptFailed"
    assert rolled.status.restarts == upgraded().restarts, "a rollback is not a restart"

    # From now on the operator acts on the stable spec: an upgrade back to it, from the latest checkpoint.
    acting_on = effective_spec(BAD, rolled.status, generation=2)
    assert spec_hash(acting_on) == spec_hash(GOOD)
    resubmitted = at(acting_on, rolled.status, 61, submitted=BAD)
    assert resubmitted.actions[0] == SubmitAttempt(3, "latest-checkpoint", LOCATION)
    assert at(acting_on, resubmitted.status, 62, driver(3, DriverPhase.FAILED, exit_code=1)).status.phase == (
        "Restarting"
    ), "the stable spec's own failures restart as usual: it is not on trial"


def test_an_upgrade_not_running_within_the_window_is_rolled_back() -> None:
    pending = driver(2, DriverPhase.PENDING, reason="ImagePullBackOff", message="img:2 not found")
    status = upgraded(phase="Submitting")
    waiting = at(BAD, status, WINDOW - 10, pending)
    assert waiting.status.upgrade_rollback is None
    assert waiting.requeue_after == pytest.approx(10.0)
    rolled = at(BAD, status, WINDOW, pending)
    assert rolled.status.upgrade_rollback is not None
    assert rolled.status.upgrade_rollback.reason == "UpgradeNotRunning"
    assert "ImagePullBackOff" in rolled.status.upgrade_rollback.message


def test_a_failure_after_the_window_or_with_rollback_off_restarts_as_usual() -> None:
    failed = driver(2, DriverPhase.FAILED, exit_code=1)
    late = at(BAD, upgraded(attempt_started_at=T0), WINDOW + 1, failed)
    assert late.status.upgrade_rollback is None and late.status.phase == "Restarting"
    off = spec(image="img:2", upgradeRollback={"enabled": False})
    assert at(off, upgraded(), 60, failed).status.phase == "Restarting"


def test_the_rollback_keeps_the_users_desired_state_and_ends_with_the_next_spec_change() -> None:
    status = upgraded(upgrade_rollback=UpgradeRollback(generation=2, time=T0, reason="UpgradeFailed"))
    stopping = effective_spec(spec(image="img:2", desiredState="stopped"), status, generation=2)
    assert (stopping.image, stopping.desired_state) == ("img:1", "stopped")
    fixed = spec(image="img:3")
    assert effective_spec(fixed, status, generation=3) == fixed, "a new generation is on trial again"
    failed = driver(4, DriverPhase.FAILED, exit_code=1)
    trial = at(fixed, status.model_copy(update={"attempt": 4}), 30, failed, generation=3)
    assert "UpgradeRolledBack" in reasons(trial)


def test_a_stable_spec_in_the_status_that_is_not_a_spec_is_an_error_not_a_guess() -> None:
    broken = upgraded(
        last_stable_spec=StableSpec(generation=1, spec_hash="x", spec='{"image": 1}', time=T0),
        upgrade_rollback=UpgradeRollback(generation=2, time=T0, reason="UpgradeFailed"),
    )
    with pytest.raises(ValidationError):
        effective_spec(BAD, broken, generation=2)
