"""Upgrade rollback (the Flink Kubernetes Operator's `kubernetes.operator.deployment.rollback.enabled`).

A spec is stable once an attempt running it has been Running for upgradeRollback.windowSeconds; the status
keeps it (lastStableSpec). A spec change whose attempt fails, or is not Running, within windowSeconds of its
submission is rolled back: the status records the generation (upgradeRollback), and while the spec keeps that
generation the operator acts on the last stable spec instead, with the user's current values of the fields
that never cause an upgrade (desiredState, savepoints, ...). The spec itself is never written, it is the
user's (and Git's): the next change of it ends the rollback.

Whoever may write the job's status could write lastStableSpec: the reconciler validates the spec read from it
and applies the same policy as to the spec, so it grants nothing the spec would not.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypeVar

from pydantic import BaseModel

from ftspark.domain.models import JobSpec, JobStatus

# JobSpec fields whose change is not an upgrade (no new attempt): the next attempt, or the running one, uses
# them as they are. True: the whole field; a mapping: those of its fields (pydantic's `exclude` shape).
NOT_UPGRADED: Mapping[str, Any] = {
    "desired_state": True,
    "savepoint_trigger_nonce": True,
    "savepoints": True,
    "stop_timeout_seconds": True,
    "liveness": {"progress_timeout_seconds": True, "start_timeout_seconds": True},
    "upgrade_rollback": True,
    "restart_strategy": True,
    "result_store": True,
    "ttl_seconds_after_finished": True,
    "failure_history": True,
    "checkpoint": {"retain_on_delete": True, "max_resume_age_seconds": True, "retained": True},
    "driver": {"standby": True, "standby_executors": True, "disruption_budget": True},
}
# Of those, what only the driver reads (its environment) or is made with its pod: a change reaches the next
# attempt, not the running one. The others are the operator's to read, at its next look.
NEXT_ATTEMPT: frozenset[tuple[str, ...]] = frozenset(
    {
        ("stop_timeout_seconds",),
        ("liveness", "progress_timeout_seconds"),
        ("checkpoint", "retained"),
        ("driver", "disruption_budget"),  # made with each attempt's pod
    }
)
OnChange = Literal["applies now", "next attempt", "restarts the job", "as its fields say"]


def on_change(path: tuple[str, ...]) -> OnChange:
    """What a change of the spec field at path (its Python names, e.g. ("checkpoint", "retained")) does to a
    running job: an upgrade (a new attempt, per upgradeMode) unless NOT_UPGRADED names it or a field above."""
    fields: Any = NOT_UPGRADED
    for depth, name in enumerate(path):
        if not isinstance(fields, Mapping) or name not in fields:
            return "restarts the job"
        fields = fields[name]
        if fields is True:
            excluded = path[: depth + 1]
            return "next attempt" if excluded in NEXT_ATTEMPT else "applies now"
    return "as its fields say"  # a part of which only some fields are excluded


Model = TypeVar("Model", bound=BaseModel)


def effective_spec(spec: JobSpec, status: JobStatus, generation: int) -> JobSpec:
    """The spec to act on: the last stable one while generation is rolled back, else spec. Raises
    pydantic.ValidationError when the stable spec in the status does not read as a spec."""
    rolled_back, stable = status.upgrade_rollback, status.last_stable_spec
    if rolled_back is None or stable is None or rolled_back.generation != generation:
        return spec
    return _overlay(JobSpec.model_validate_json(stable.spec), spec, NOT_UPGRADED)


def _overlay(kept: Model, current: Model, fields: Mapping[str, Any]) -> Model:
    """kept with current's values of fields (nested as in NOT_UPGRADED)."""
    update = {
        name: getattr(current, name)
        if part is True
        else _overlay(getattr(kept, name), getattr(current, name), part)
        for name, part in fields.items()
    }
    return kept.model_copy(update=update)
