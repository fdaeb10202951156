"""Where a recovery's seconds went (domain.lifecycle.timing): the operator's times and the driver's word."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from ftspark.domain.ha import CheckpointPointer, DriverStart
from ftspark.domain.lifecycle.timing import recovery_phases, summary
from ftspark.domain.models import Failure, RecoveryPhases

ENDED = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def _at(seconds: float) -> datetime:
    return ENDED + timedelta(seconds=seconds)


def _failure(*, ended: bool = True) -> Failure:
    return Failure(reason="DriverKilled", attempt=1, ended_at=ENDED if ended else None, time=_at(1))


def _pointer(start: DriverStart | None, committed: float = 9.0) -> CheckpointPointer:
    return CheckpointPointer(
        checkpoint_id=4, batch_id=7, location="s3a://b/c", completed_at=_at(committed), attempt=2, start=start
    )


def test_a_promoted_standby_has_no_pod_start_and_its_session_counts_as_done_with_its_promotion() -> None:
    start = DriverStart(
        runtime_started=_at(-300),
        promoted=_at(1.6),
        session_up=_at(-280),
        executors_registered=_at(-270),  # its warm executor
        lease_acquired=_at(1.8),
        first_batch_started=_at(2.5),
    )
    phases = recovery_phases(_failure(), _pointer(start, 4.2), _at(1.4), _at(1.4))
    assert phases == RecoveryPhases(
        seen=1.0,
        submitted=1.4,
        session_up=1.4,
        lease_acquired=1.8,
        executors_registered=1.4,
        first_batch_started=2.5,
        committed=4.2,
        standby=True,
    )
    assert summary(phases) == (
        "recovered in 4.2 s by a standby promoted (seen 1.0, submitted 0.4, session 0.0, executors 0.0, "
        "lease 0.4, first batch started 0.7, committed 1.7 s)"
    )


def test_a_lost_node_counts_from_the_failure_seen_and_an_older_driver_says_nothing_of_its_start() -> None:
    phases = recovery_phases(_failure(ended=False), _pointer(None), _at(3), _at(5))
    assert phases == RecoveryPhases(seen=0.0, submitted=2.0, pod_running=4.0, committed=8.0)


def test_a_new_driver_that_built_its_session_before_it_took_the_lease_is_timed_in_that_order() -> None:
    """It builds its session while it waits for the Lease: the session's seconds are the session's, not the
    Lease's."""
    start = DriverStart(
        runtime_started=_at(3),
        session_up=_at(6.5),
        lease_acquired=_at(6.6),
        executors_registered=_at(8),
        first_batch_started=_at(8.5),
    )
    phases = recovery_phases(_failure(), _pointer(start, 11), _at(2), _at(2.5))
    assert (phases.session_up, phases.lease_acquired, phases.executors_registered) == (6.5, 6.6, 8.0)
    assert summary(phases) == (
        "recovered in 11.0 s by a new driver (seen 1.0, submitted 1.0, pod started 0.5, runtime 0.5, session "
        "3.5, lease 0.1, executors 1.4, first batch started 0.5, committed 2.5 s)"
    )


def test_a_driver_that_lies_about_its_start_gets_figures_within_the_recovery_in_order() -> None:
    """Its times are its own clock's, and a tenant's code runs beside them: none goes before the operator's
    steps or the driver step it says came before, below the failure, or past the committed batch the
    operator read, and the Event's steps never go back."""
    start = DriverStart(
        runtime_started=datetime(1970, 1, 1, tzinfo=UTC),
        lease_acquired=datetime(2999, 1, 1, tzinfo=UTC),
        executors_registered=_at(-5),
        session_up=datetime(1, 1, 1, tzinfo=UTC),
        first_batch_started=_at(3),
    )
    phases = recovery_phases(_failure(), _pointer(start), _at(2), _at(2.5))
    figures = [v for v in phases.model_dump(exclude={"standby"}).values() if v is not None]
    assert all(2.5 <= v <= phases.committed == 9.0 for v in figures[3:]), phases  # after the pod ran
    assert phases.session_up == phases.runtime_started == phases.executors_registered == 2.5
    assert (phases.first_batch_started, phases.lease_acquired) == (3.0, 9.0)
    assert " -" not in summary(phases)


def test_an_end_after_the_failure_seen_is_not_believed() -> None:
    """The kubelet's clock ahead of the operator's: the recovery counts from the failure seen."""
    failure = Failure(reason="DriverKilled", attempt=1, ended_at=_at(30), time=_at(1))
    assert recovery_phases(failure, _pointer(None), None, None).committed == 8.0
