"""Which watch events go to the work queue's urgent lane: what a user waits for (a driver that failed or went,
a job deleted, a spec edited) as opposed to bulk work (new jobs, pods starting, a new leader's first pass).
Read from the event's body alone: deciding must not cost a request per event."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# A pod in these phases has ended, or its node stopped reporting.
_ENDED_PHASES = frozenset({"Succeeded", "Failed", "Unknown"})


def job_event_is_urgent(event_type: str | None, body: Mapping[str, Any]) -> bool:
    """A deletion, or a change of the spec of a job already reconciled (a new job is bulk: in a burst of
    creations, each waits its turn)."""
    if event_type == "DELETED":
        return True
    observed = (body.get("status") or {}).get("observedGeneration")
    return observed is not None and (body.get("metadata") or {}).get("generation") != observed


def driver_event_is_urgent(event_type: str | None, body: Mapping[str, Any]) -> bool:
    """The driver pod went, is going, has ended, or one of its containers has terminated."""
    if event_type == "DELETED" or (body.get("metadata") or {}).get("deletionTimestamp"):
        return True
    status = body.get("status") or {}
    if status.get("phase") in _ENDED_PHASES:
        return True
    return any(
        "terminated" in (container.get("state") or {}) for container in status.get("containerStatuses") or ()
    )
