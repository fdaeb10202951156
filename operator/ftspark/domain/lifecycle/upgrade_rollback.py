"""Upgrade rollback (spec.upgradeRollback; domain/rollback.py has the pure policy): a spec that ran for the
window becomes the last stable one; an upgrade that fails or does not run within the window is rolled back to
it."""

from __future__ import annotations

from datetime import datetime, timedelta

from ftspark.domain.lifecycle.actions import EmitEvent
from ftspark.domain.lifecycle.delays import POLL, SOON
from ftspark.domain.lifecycle.draft import Draft
from ftspark.domain.models import StableSpec, UpgradeRollback


def stability(draft: Draft) -> float:
    """With rollback enabled, a spec running for the window becomes the last stable one. Seconds until
    the running attempt's spec becomes stable (POLL when it is, or nothing is to be learned).

    A new generation of the same spec (only desiredState or savepoints changed) is recorded too once
    it ran for the window, so that lastStableSpec.generation names the generation a user last saw
    stable; a rolled-back generation runs the stable spec and is never recorded as stable itself."""
    policy, stable = draft.spec.upgrade_rollback, draft.status.last_stable_spec
    started, rolled_back = draft.status.attempt_started_at, draft.status.upgrade_rollback
    if (
        not policy.enabled
        or started is None
        or (stable and (stable.spec_hash, stable.generation) == (draft.obs.spec_hash, draft.obs.generation))
        or (rolled_back is not None and rolled_back.generation == draft.obs.generation)
    ):
        return POLL
    if within_window(draft, started):
        return until_window_ends(draft, started)
    spec = draft.spec.model_dump_json(by_alias=True, exclude_defaults=True)
    draft.update(
        last_stable_spec=StableSpec(
            generation=draft.obs.generation, spec_hash=draft.obs.spec_hash, spec=spec, time=draft.now
        )
    )
    return POLL


def on_trial(draft: Draft) -> bool:
    """Whether the current attempt runs a spec change that rollback may undo: rollback is on, a stable
    spec is known and differs, the attempt was submitted with this spec, and it is not rolled back yet."""
    stable, graph = draft.status.last_stable_spec, draft.obs.own_graph
    rolled_back = draft.status.upgrade_rollback
    return (
        draft.spec.upgrade_rollback.enabled
        and stable is not None
        and stable.spec_hash != draft.obs.spec_hash
        and graph is not None
        and graph.spec_hash == draft.obs.spec_hash
        and not (rolled_back is not None and rolled_back.generation == draft.obs.generation)
    )


def within_window(draft: Draft, since: datetime | None) -> bool:
    window = draft.spec.upgrade_rollback.window_seconds
    return since is not None and (draft.now - since).total_seconds() < window


def until_window_ends(draft: Draft, since: datetime | None) -> float:
    if since is None:
        return POLL
    ends = since + timedelta(seconds=draft.spec.upgrade_rollback.window_seconds)
    return max(SOON, (ends - draft.now).total_seconds())


def roll_back(draft: Draft, reason: str, what: str) -> None:
    """Act on the last stable spec from the next pass on (rollback.effective_spec), until the spec
    changes; the failed or stuck attempt goes first. The decision looks again at once."""
    stable = draft.status.last_stable_spec
    assert stable is not None, "only an attempt on trial is rolled back"
    message = (
        f"{what} within {draft.spec.upgrade_rollback.window_seconds} s of the upgrade to generation "
        f"{draft.obs.generation}: running the last stable spec (generation {stable.generation}) until the "
        "spec changes"
    )
    rolled_back = UpgradeRollback(
        generation=draft.obs.generation, time=draft.now, reason=reason, message=message
    )
    draft.update(upgrade_rollback=rolled_back)
    draft.actions.append(EmitEvent("Warning", "UpgradeRolledBack", message))
    draft.condition("Degraded", "True", reason, message)
    draft.delete_current("upgrade rolled back")
    draft.set_phase("Upgrading", "RollingBack", message)
