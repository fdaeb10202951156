"""Where a recovery's seconds went (status.lastFailure.recoveryPhases): the operator's own times (the failure
seen, the next attempt submitted and running) and the new driver's word on its start (DriverStart, sent with
its checkpoint pointers), each as seconds from the failure to the step.

The driver's steps are taken in the order its clock says they happened: a new driver builds its session while
it waits for the Lease, a standby long before the failure, an older driver took the Lease first. Its times are
its own clock's and a tenant's code runs beside them: each is held between the step before it and the
committed batch, so no figure is negative, out of order or beyond the recovery itself.
"""

from __future__ import annotations

from datetime import datetime

from ftspark.domain.ha import CheckpointPointer, DriverStart
from ftspark.domain.models import Failure, RecoveryPhases


def recovery_phases(
    failure: Failure,
    committed: CheckpointPointer,
    submitted_at: datetime | None,
    running_at: datetime | None,
) -> RecoveryPhases:
    """failure: the one recovered from; committed: the first pointer a later attempt wrote; submitted_at,
    running_at: that attempt's submission and its driver's start, as the status recorded them (None when the
    status is already another attempt's)."""
    ended = failure.ended_at
    origin = ended if ended is not None and ended <= failure.time else failure.time
    end = max(0.0, (committed.completed_at - origin).total_seconds())
    reached = 0.0

    def step(at: datetime | None) -> float | None:
        nonlocal reached
        if at is None:
            return None
        reached = min(end, max(reached, (at - origin).total_seconds()))
        return round(reached, 1)

    start = committed.start or DriverStart(runtime_started=committed.completed_at)
    standby = start.promoted is not None
    started = committed.start is not None and not standby  # a standby's pod and runtime started long before
    driver = {
        "runtime_started": start.runtime_started if started else None,
        "session_up": start.session_up,
        "lease_acquired": start.lease_acquired,
        "executors_registered": start.executors_registered,
        "first_batch_started": start.first_batch_started,
    }
    seen = step(failure.time) or 0.0
    submitted = step(submitted_at)
    pod_running = step(running_at if not standby else None)
    happened = sorted(((name, at) for name, at in driver.items() if at is not None), key=lambda item: item[1])
    return RecoveryPhases(
        seen=seen,
        submitted=submitted,
        pod_running=pod_running,
        **{name: step(at) for name, at in happened},
        committed=round(end, 1),
        standby=standby,
    )


def summary(phases: RecoveryPhases) -> str:
    """One line for an Event: each step's own seconds, in the order they were done."""
    done = [(value, label) for name, label in _LABELS if (value := getattr(phases, name)) is not None]
    parts, before = [], 0.0
    # sorted is stable: steps done together keep _LABELS' order
    for value, label in sorted(done, key=lambda step: step[0]):
        parts.append(f"{label} {value - before:.1f}")
        before = value
    way = "a standby promoted" if phases.standby else "a new driver"
    return f"recovered in {phases.committed:.1f} s by {way} ({', '.join(parts)} s)"


_LABELS = (
    ("seen", "seen"),
    ("submitted", "submitted"),
    ("pod_running", "pod started"),
    ("runtime_started", "runtime"),
    ("session_up", "session"),
    ("lease_acquired", "lease"),
    ("executors_registered", "executors"),
    ("first_batch_started", "first batch started"),
    ("committed", "committed"),
)
