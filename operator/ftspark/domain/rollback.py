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

from ftspark.domain.models import JobSpec, JobStatus

# JobSpec fields whose change is not an upgrade (no new attempt): the next attempt, or the running one, uses
# them as they are.
NOT_UPGRADED = frozenset(
    {
        "desired_state",
        "savepoint_trigger_nonce",
        "savepoints",
        "stop_timeout_seconds",
        "liveness",
        "upgrade_rollback",
    }
)


def effective_spec(spec: JobSpec, status: JobStatus, generation: int) -> JobSpec:
    """The spec to act on: the last stable one while generation is rolled back, else spec. Raises
    pydantic.ValidationError when the stable spec in the status does not read as a spec."""
    rolled_back, stable = status.upgrade_rollback, status.last_stable_spec
    if rolled_back is None or stable is None or rolled_back.generation != generation:
        return spec
    kept = JobSpec.model_validate_json(stable.spec)
    return kept.model_copy(update={name: getattr(spec, name) for name in NOT_UPGRADED})
