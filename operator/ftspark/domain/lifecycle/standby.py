"""The hot standby (docs/hot-standby.md): when the job has one made, kept, replaced or deleted, which one a
restart promotes, and what the StandbyReady condition says."""

from __future__ import annotations

from typing import Literal

from ftspark.domain.lifecycle.actions import CreateStandby, EmitEvent
from ftspark.domain.lifecycle.delays import FIRST_COMMIT_RECHECK, STANDBY_RECHECK
from ftspark.domain.lifecycle.draft import Draft
from ftspark.domain.lifecycle.observation import DriverObservation, DriverPhase, SubmittedGraph
from ftspark.domain.models import JobSpec
from ftspark.protocol import RestoreFrom

# How long after its container started a standby that is not Ready yet is waited for by a restart: a JVM and
# a SparkSession start in 10-20 s on two busy cores.
STANDBY_START_WAIT = 60.0


def made_for(hash_of_spec: str, warm: int) -> str:
    """A standby's spec-hash label: the spec's hash and, when it keeps executors warm, how many. A change of
    that number replaces the standby, though, like the standby setting, it restarts nothing."""
    return f"{hash_of_spec}.{warm}" if warm else hash_of_spec


def warm_executors(spec: JobSpec) -> int:
    """How many executors the job's standby keeps warm: as asked (driver.standbyExecutors); one made because
    the driver's node fell silent keeps all of them, as its promotion would come with the node's loss, the
    job's executors there lost with it (the driver runtime keeps none with dynamic allocation)."""
    return spec.driver.standby_executors if spec.driver.standby else spec.executor.instances


def promotable(
    draft: Draft, restore_from: RestoreFrom, graph: SubmittedGraph | None, recovered: str | None
) -> DriverObservation | None:
    """The standby this submission can promote instead of starting a pod: only for a restart after a
    failure or a relocation off a drained node, from the latest checkpoint of the job graph it was made
    with, and only a Ready one made for this attempt and this spec."""
    return ready(draft) if _may_promote(draft, restore_from, graph, recovered) else None


def starting(
    draft: Draft, restore_from: RestoreFrom, graph: SubmittedGraph | None, recovered: str | None
) -> bool:
    """No standby is ready to take over, but one that could be promoted is starting: its container has run
    for less than STANDBY_START_WAIT, its session not up yet. It is nearer to taking over than a new pod
    would be (a standby made when the driver's node fell silent, at the node's loss that came sooner than its
    start), so the restart waits for it. Past that, it is replaced by a new pod as before."""
    if not _may_promote(draft, restore_from, graph, recovered) or ready(draft) is not None:
        return False
    return any(
        s.phase == DriverPhase.RUNNING
        and s.started_at is not None
        and (draft.now - s.started_at).total_seconds() < STANDBY_START_WAIT
        and s.pod_name not in draft.settled
        and not _outdated(draft, s)
        for s in draft.standbys
    )


def _may_promote(
    draft: Draft, restore_from: RestoreFrom, graph: SubmittedGraph | None, recovered: str | None
) -> bool:
    return (
        draft.status.phase in {"Restarting", "Relocating"}
        and restore_from == "latest-checkpoint"
        and graph is not None
        and recovered is None
    )


def ready(draft: Draft) -> DriverObservation | None:
    """A standby that could take over now: running, its session up, made for this spec."""
    return next(
        (s for s in draft.standbys if s.phase == DriverPhase.RUNNING and s.ready and not _outdated(draft, s)),
        None,
    )


def _unwanted(draft: Draft) -> str:
    """Why the job has no use for a standby now ("" when it has)."""
    graph = draft.obs.own_graph
    if not draft.spec.driver.standby and not _for_a_silent_node(draft):
        return "spec.driver.standby is 0"
    if draft.spec.desired_state != "running" or draft.obs.result or draft.status.result:
        return "the job is not to run"
    if draft.status.phase not in {"Running", "Restarting", "Relocating", "Submitting"}:
        return f"the job is {draft.status.phase}"
    if graph is None or graph.spec_hash != draft.obs.spec_hash:
        return "the job's spec is changing"
    return ""


def _for_a_silent_node(draft: Draft) -> bool:
    """A standby the job gets without asking for one: its driver's node stopped renewing its Lease, so it may
    be dead, which the node controller says only a grace period later; the standby starts meanwhile, and is
    kept through the restart that verdict causes (docs/hot-standby.md, "A standby when the driver's node
    falls silent")."""
    current = draft.current
    if current is not None and current.node_silent and current.phase == DriverPhase.RUNNING:
        return True
    return draft.status.phase == "Restarting" and bool(draft.standbys)


def tend(draft: Draft) -> float | None:
    """Delete each standby the job cannot promote (not wanted, outdated, failed, on a lost node), make
    one when the running attempt has none, and say so in the StandbyReady condition. When to look again,
    if sooner than the rest of the decision says."""
    not_wanted = _unwanted(draft)
    kept: list[DriverObservation] = []
    for standby in draft.standbys:
        if standby.pod_name in draft.settled:
            continue
        why = not_wanted or _outdated(draft, standby)
        if not why:
            kept.append(standby)
            continue
        if standby.phase == DriverPhase.FAILED or standby.node_lost:
            message = f"standby {standby.pod_name} lost ({why}); another one is made"
            draft.actions.append(EmitEvent("Warning", "StandbyReplaced", message))
        draft.delete(standby, why)
        draft.settled.add(standby.pod_name)
    asked = bool(draft.spec.driver.standby)  # the condition is the asked-for standby's, not a silence's

    def say(value: Literal["True", "False"], reason: str, message: str) -> None:
        if asked:
            draft.condition("StandbyReady", value, reason, message)

    if not asked:
        draft.update(conditions=[c for c in draft.status.conditions if c.type != "StandbyReady"])
    if not_wanted:
        say("False", "NotNeeded", not_wanted)
        return STANDBY_RECHECK if draft.settled else None
    if kept:
        standby = kept[0]
        if standby.ready and standby.phase == DriverPhase.RUNNING:
            say("True", "Ready", f"{standby.pod_name} is ready to take over")
            return None
        why = standby.reason or f"{standby.phase.lower()}, its SparkSession not up yet"
        say("False", "Starting", f"{standby.pod_name}: {why}")
        return None
    if draft.standbys:
        say("False", "Replacing", "the previous standby is being deleted")
        return STANDBY_RECHECK
    if not _may_make(draft):
        say("False", "Waiting", "waiting for the attempt to run")
        return None
    if not _committed(draft):
        # Its JVM and session would take CPU from the attempt's own start and restore.
        say("False", "Waiting", f"waiting for attempt {draft.status.attempt}'s first checkpoint")
        return FIRST_COMMIT_RECHECK
    attempt = draft.status.attempt + 1
    location = draft.status.checkpoint_directory
    assert location is not None, "a running attempt has its checkpoint directory"
    placement = draft.status.placement
    nodes = tuple(placement.nodes) if placement and draft.spec.local_recovery.enabled else ()
    draft.actions.append(CreateStandby(attempt, location, warm_executors(draft.spec), nodes))
    say("False", "Creating", f"the standby for attempt {attempt} is made")
    if not asked and draft.current is not None:
        message = (
            f"node {draft.current.node} of driver {draft.current.pod_name} stopped renewing its Lease: a "
            f"standby for attempt {attempt} is made, to take over if the node is found lost"
        )
        draft.actions.append(EmitEvent("Warning", "DriverNodeSilent", message))
    return STANDBY_RECHECK


def _committed(draft: Draft) -> bool:
    """The running attempt has completed a checkpoint: it is past its start and restore."""
    newest = draft.obs.latest_checkpoint
    return newest is not None and newest.attempt == draft.status.attempt


def _outdated(draft: Draft, standby: DriverObservation) -> str:
    if standby.attempt != draft.status.attempt + 1:
        return f"a standby for attempt {standby.attempt}, the next one is {draft.status.attempt + 1}"
    if standby.spec_hash != made_for(draft.obs.spec_hash, warm_executors(draft.spec)):
        return "made for an earlier spec"
    if standby.phase in {DriverPhase.FAILED, DriverPhase.SUCCEEDED}:
        return f"it ended ({standby.reason or standby.phase})"
    if standby.node_lost:
        return "its node stopped reporting"
    if standby.node_draining:
        return "its node is being drained"
    if standby.phase == DriverPhase.TERMINATING:
        return "being deleted"
    return ""


def _may_make(draft: Draft) -> bool:
    """Only beside a running driver (its node is what the standby avoids) and, with localRecovery, once
    its executors' nodes are known (the standby's executors are placed there)."""
    current = draft.current
    if draft.status.phase != "Running" or current is None or current.phase != DriverPhase.RUNNING:
        return False
    placement = draft.status.placement
    return not draft.spec.local_recovery.enabled or (
        placement is not None and placement.attempt == draft.status.attempt
    )
