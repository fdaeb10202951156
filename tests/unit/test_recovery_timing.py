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


def test_a_promoted_standby_has_no_pod_start_and_its_session_counts_as_done_with_its_lease() -> None:
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
        lease_acquired=1.8,
        executors_registered=1.8,
        session_up=1.8,
        first_batch_started=2.5,
        committed=4.2,
        standby=True,
    )
    assert summary(phases) == (
        "recovered in 4.2 s by a standby promoted (seen 1.0, submitted 0.4, lease 0.4, executors 0.0, "
        "session 0.0, first batch started 0.7, committed 1.7 s)"
    )


def test_a_lost_node_counts_from_the_failure_seen_and_an_older_driver_says_nothing_of_its_start() -> None:
    phases = recovery_phases(_failure(ended=False), _pointer(None), _at(3), _at(5))
    assert phases == RecoveryPhases(seen=0.0, submitted=2.0, pod_running=4.0, committed=8.0)


def test_a_driver_that_lies_about_its_start_gets_figures_within_the_recovery_in_order() -> None:
    """Its times are its own clock's, and a tenant's code runs beside them: none goes before the step listed
    above it, below the failure, or past the committed batch the operator read."""
    start = DriverStart(
        runtime_started=datetime(1970, 1, 1, tzinfo=UTC),
        lease_acquired=datetime(2999, 1, 1, tzinfo=UTC),
        executors_registered=_at(-5),
        session_up=datetime(1, 1, 1, tzinfo=UTC),
        first_batch_started=_at(3),
    )
    phases = recovery_phases(_failure(), _pointer(start), _at(2), _at(2.5))
    figures = [v for k, v in phases.model_dump(exclude={"standby"}).items() if v is not None]
    assert figures == sorted(figures) and all(0 <= v <= phases.committed == 9.0 for v in figures), phases
    assert phases.lease_acquired == 9.0 and phases.first_batch_started == 9.0
    assert phases.runtime_started == 2.5


def test_an_end_after_the_failure_seen_is_not_believed() -> None:
    """The kubelet's clock ahead of the operator's: the recovery counts from the failure seen."""
    failure = Failure(reason="DriverKilled", attempt=1, ended_at=_at(30), time=_at(1))
    assert recovery_phases(failure, _pointer(None), None, None).committed == 8.0
