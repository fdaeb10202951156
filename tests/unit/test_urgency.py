"""Which watch events jump the work queue: failures, deletions and users' edits; not the bulk of a burst."""

from __future__ import annotations

from typing import Any

import pytest

from ftspark.reconcile.urgency import driver_event_is_urgent, job_event_is_urgent


def _job(generation: int, observed: int | None) -> dict[str, Any]:
    status = {} if observed is None else {"observedGeneration": observed}
    return {"metadata": {"name": "j", "generation": generation}, "status": status}


@pytest.mark.parametrize(
    ("event_type", "body", "urgent"),
    [
        ("ADDED", _job(1, None), False),  # a new job: one of a burst, perhaps
        (None, _job(1, None), False),
        ("MODIFIED", _job(1, 1), False),  # our own status write
        ("ADDED", _job(3, 3), False),  # a new leader's first pass
        ("MODIFIED", _job(4, 3), True),  # the user's edit: stop, savepoint, upgrade
        ("ADDED", _job(4, 3), True),  # an edit no leader saw yet
        ("DELETED", _job(1, 1), True),
        ("MODIFIED", {"metadata": {}}, False),
    ],
)
def test_job_events(event_type: str | None, body: dict[str, Any], urgent: bool) -> None:
    assert job_event_is_urgent(event_type, body) is urgent


def _pod(phase: str, *states: dict[str, Any], deleting: bool = False) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "j-1-driver"}
    if deleting:
        metadata["deletionTimestamp"] = "2026-11-24T00:00:00Z"
    statuses = [{"name": "driver", "state": state} for state in states]
    return {"metadata": metadata, "status": {"phase": phase, "containerStatuses": statuses}}


@pytest.mark.parametrize(
    ("event_type", "body", "urgent"),
    [
        ("ADDED", _pod("Pending"), False),
        ("MODIFIED", _pod("Pending", {"waiting": {"reason": "ContainerCreating"}}), False),
        ("MODIFIED", _pod("Running", {"running": {}}), False),
        ("MODIFIED", _pod("Running", {"terminated": {"exitCode": 1}}), True),  # before the phase follows
        ("MODIFIED", _pod("Failed", {"terminated": {"exitCode": 1}}), True),
        ("MODIFIED", _pod("Succeeded"), True),
        ("MODIFIED", _pod("Unknown"), True),  # its node stopped reporting
        ("MODIFIED", _pod("Running", {"running": {}}, deleting=True), True),  # evicted, drained, deleted
        ("DELETED", _pod("Running", {"running": {}}), True),
        ("MODIFIED", {"metadata": {}}, False),
    ],
)
def test_driver_pod_events(event_type: str | None, body: dict[str, Any], urgent: bool) -> None:
    assert driver_event_is_urgent(event_type, body) is urgent
