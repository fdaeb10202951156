"""The operator's part of the hot standby (docs/hot-standby.md), on the in-memory cluster: when a standby is
made, promoted, replaced and deleted, and that it is fenced like any attempt. The runtime's part, with real
PySpark and a real API server, is tests/runtime/test_standby.py."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from ftspark.domain.fencing import FencedOutError
from ftspark.domain.ha import JobKey
from ftspark.domain.lifecycle import DriverPhase, RefusedPromotion
from ftspark.domain.lifecycle.standby import STANDBY_START_WAIT
from ftspark.domain.models import Condition
from ftspark.manifests import AttemptPlan, driver_pod
from ftspark.protocol import DRIVER_CONTAINER, STOPPED, DriverEnv, driver_pod_name, spark_app_id
from ftspark.reconcile.nodes import NodeWatch, is_draining
from tests.unit.test_reconciler import KEY, SPEC, UID, Cluster, run_dir

WITH_STANDBY: dict[str, Any] = {**SPEC, "driver": {"standby": 1}}
WARM: dict[str, Any] = {**SPEC, "driver": {"standby": 1, "standbyExecutors": 2}}
STANDBY_2 = driver_pod_name(KEY.name, 2)


def standby_ready(cluster: Cluster) -> Condition | None:
    return next((c for c in cluster.status().conditions if c.type == "StandbyReady"), None)


def checkpointed(cluster: Cluster, spec: dict[str, Any], checkpoint_id: int) -> None:
    """Attempt 1 of the job runs and has committed a checkpoint."""
    cluster.jobs.apply(KEY, spec, uid=UID)
    cluster.reconcile()
    cluster.running()
    cluster.commit(1, checkpoint_id)


def running_with_standby(cluster: Cluster, spec: dict[str, Any] = WITH_STANDBY) -> None:
    """Attempt 1 runs, a checkpoint committed, and its standby (attempt 2) stands by, Ready."""
    checkpointed(cluster, spec, 7)
    cluster.reconcile()
    standby = cluster.drivers.pods[KEY][STANDBY_2]
    cluster.drivers.set_driver(
        KEY,
        2,
        DriverPhase.RUNNING,
        started_at=cluster.now,
        standby=True,
        spec_hash=standby.spec_hash,
        ready=True,
    )
    cluster.reconcile(after=30)


def fail_driver(cluster: Cluster, attempt: int = 1) -> None:
    """The active driver fails; its pod is gone once deleted (the standby stays)."""
    cluster.drivers.set_driver(KEY, attempt, DriverPhase.FAILED, exit_code=137, ended=True)
    cluster.reconcile()
    cluster.reconcile()  # Restarting: the failed pod is deleted
    cluster.drivers.pods[KEY].pop(driver_pod_name(KEY.name, attempt), None)


def test_a_running_attempt_gets_a_standby_for_the_next_one_that_is_not_launched() -> None:
    cluster = Cluster()
    cluster.jobs.apply(KEY, WITH_STANDBY, uid=UID)
    cluster.reconcile()
    assert len(cluster.drivers.plans) == 1, "no standby before the driver runs: nothing to stand away from"
    cluster.running()
    assert len(cluster.drivers.plans) == 1, "nor before its first checkpoint: it would slow the start down"
    condition = standby_ready(cluster)
    assert condition is not None
    assert (condition.status, condition.reason) == ("False", "Waiting")
    assert "first checkpoint" in condition.message
    cluster.commit(1, 2)
    assert cluster.reconcile(after=5) == 1.0, "a checkpoint wakes nothing: the job looked again"
    first, standby = cluster.drivers.plans
    assert (standby.attempt, standby.standby, standby.restore_from) == (2, True, "latest-checkpoint")
    assert standby.checkpoint_location == run_dir(UID, 1)
    assert standby.spec_hash and not first.standby
    condition = standby_ready(cluster)
    assert condition is not None
    assert (condition.status, condition.reason) == ("False", "Creating")
    # Made, not launched: attempt 1 still commits (the fence is not advanced), the status still says 1.
    cluster.commit(1, 3)
    assert (cluster.status().attempt, cluster.status().phase) == (1, "Running")
    graph = cluster.stores.job_graphs.get(KEY)
    assert graph is not None
    assert graph.checkpoint_location == run_dir(UID, 1)
    cluster.reconcile(after=1)
    assert len(cluster.drivers.plans) == 2, "one standby"


def test_the_condition_says_when_the_standby_is_ready() -> None:
    cluster = Cluster()
    checkpointed(cluster, WITH_STANDBY, 2)
    cluster.reconcile(after=5)
    spec_hash = cluster.drivers.pods[KEY][STANDBY_2].spec_hash
    cluster.drivers.set_driver(KEY, 2, DriverPhase.RUNNING, standby=True, spec_hash=spec_hash)
    cluster.reconcile(after=1)
    condition = standby_ready(cluster)
    assert condition is not None
    assert (condition.status, condition.reason) == ("False", "Starting")
    cluster.drivers.set_driver(KEY, 2, DriverPhase.RUNNING, standby=True, spec_hash=spec_hash, ready=True)
    cluster.reconcile(after=1)
    condition = standby_ready(cluster)
    assert condition is not None
    assert (condition.status, condition.reason) == ("True", "Ready")
    assert cluster.status().attempt == 1, "a standby of attempt 2 is no crashed submission of it"


def test_a_failed_driver_is_replaced_by_promoting_its_ready_standby_after_the_fence() -> None:
    cluster = Cluster()
    running_with_standby(cluster)
    plans = len(cluster.drivers.plans)
    fail_driver(cluster)
    (restarting,) = [e.message for e in cluster.events.emitted if e.reason == "Restarting"]
    assert "restart in 0.0 s (a first failure in a row, with a standby ready)" in restarting, restarting
    cluster.reconcile()  # no restart delay
    assert len(cluster.drivers.plans) == plans, "no new pod: the standby takes over"
    assert cluster.drivers.controls[-1] == (STANDBY_2, "promote@7")
    assert cluster.drivers.control_terms[-1] == 1, "the leader's term, as every control request"
    with pytest.raises(FencedOutError):  # attempt 1 is fenced out before the standby is asked
        cluster.commit(1, 8)
    status = cluster.status()
    assert (status.attempt, status.phase) == (2, "Submitting")
    assert "StandbyPromoted" in cluster.events.reasons()
    promoted_at = cluster.now
    assert not cluster.drivers.pods[KEY][STANDBY_2].standby
    cluster.reconcile(after=1)
    assert len([c for c in cluster.drivers.controls if c[1].startswith("promote")]) == 1, "promoted once"
    # The promoted pod runs: its attempt started at the promotion, not when its container did.
    cluster.drivers.set_driver(KEY, 2, DriverPhase.RUNNING, started_at=promoted_at.replace(year=2025))
    cluster.reconcile(after=1)
    assert cluster.status().phase == "Running"
    assert cluster.status().attempt_started_at == promoted_at
    cluster.commit(2, 8)
    cluster.reconcile(after=5)
    standby_3 = cluster.drivers.plans[-1]
    assert (standby_3.attempt, standby_3.standby) == (3, True), "the next standby"


def test_a_failure_after_another_in_a_row_waits_out_the_restart_delay_even_with_a_standby_ready() -> None:
    """The strategy's delay (fixed-delay, 5 s) keeps a failing job from a tight loop of restarts: only a first
    failure in a row skips it for a ready standby."""
    cluster = Cluster()
    running_with_standby(cluster)
    job = cluster.jobs.get(KEY)
    assert job is not None
    status = cluster.status()
    earlier = status.model_copy(
        update={"restarts": status.restarts.model_copy(update={"consecutive_failures": 1})}
    )
    cluster.jobs.write_status(job, earlier.model_dump(mode="json", by_alias=True, exclude_none=True))
    fail_driver(cluster)
    (restarting,) = [e.message for e in cluster.events.emitted if e.reason == "Restarting"]
    assert "restart in 5.0 s" in restarting, restarting
    cluster.reconcile(after=1)
    assert not any(c[1].startswith("promote") for c in cluster.drivers.controls), "not before the delay"
    cluster.reconcile(after=5)
    assert cluster.drivers.controls[-1] == (STANDBY_2, "promote@7")


def test_a_promotion_the_standby_refused_is_asked_again_with_this_leaders_term() -> None:
    cluster = Cluster()
    running_with_standby(cluster)
    fail_driver(cluster)
    cluster.reconcile(after=5)
    # The promotion came from a leader deposed since: the pod is the driver now, but it refused to take over.
    cluster.drivers.set_driver(
        KEY, 2, DriverPhase.RUNNING, started_at=cluster.now, refused_promotion=RefusedPromotion(7)
    )
    cluster.reconcile(after=1)
    assert cluster.drivers.controls[-2:] == [(STANDBY_2, "promote@7"), (STANDBY_2, "promote@7")]
    assert cluster.status().phase == "Submitting", "not running before it took over"
    cluster.drivers.set_driver(KEY, 2, DriverPhase.RUNNING, started_at=cluster.now)
    cluster.reconcile(after=1)
    assert cluster.status().phase == "Running"


@pytest.mark.parametrize(
    ("phase", "started_ago"),
    [
        pytest.param(DriverPhase.PENDING, None, id="unschedulable"),
        pytest.param(DriverPhase.RUNNING, STANDBY_START_WAIT + 1, id="running-too-long-without-its-session"),
    ],
)
def test_a_standby_that_is_not_ready_is_deleted_and_a_new_pod_started(
    phase: DriverPhase, started_ago: float | None
) -> None:
    cluster = Cluster()
    running_with_standby(cluster)
    spec_hash = cluster.drivers.pods[KEY][STANDBY_2].spec_hash
    started = None if started_ago is None else cluster.now - timedelta(seconds=started_ago)
    cluster.drivers.set_driver(
        KEY, 2, phase, standby=True, spec_hash=spec_hash, reason="Unschedulable", started_at=started
    )
    fail_driver(cluster)
    assert cluster.drivers.deleted[-1][0] != STANDBY_2, "kept while it may still become ready"
    cluster.reconcile(after=5)
    assert (STANDBY_2, False) in cluster.drivers.deleted
    assert not any(c[1].startswith("promote") for c in cluster.drivers.controls)
    assert cluster.status().attempt == 1, "nothing started while the standby still holds the name"
    cluster.reconcile(after=1)
    plan = cluster.drivers.plans[-1]
    assert (plan.attempt, plan.standby, plan.restore_batch_id) == (2, False, 7)


@pytest.mark.parametrize(
    ("phase", "fields", "force"),
    [
        pytest.param(DriverPhase.FAILED, {"reason": "OOMKilled"}, False, id="failed"),
        pytest.param(DriverPhase.FAILED, {"reason": "NodeLost", "node_lost": True}, True, id="node-lost"),
    ],
)
def test_a_lost_standby_is_replaced_without_a_restart(
    phase: DriverPhase, fields: dict[str, Any], force: bool
) -> None:
    cluster = Cluster()
    running_with_standby(cluster)
    spec_hash = cluster.drivers.pods[KEY][STANDBY_2].spec_hash
    cluster.drivers.set_driver(KEY, 2, phase, standby=True, spec_hash=spec_hash, **fields)
    cluster.reconcile(after=1)
    assert (STANDBY_2, force) in cluster.drivers.deleted
    assert "StandbyReplaced" in cluster.events.reasons()
    status = cluster.status()
    assert (status.attempt, status.phase, status.restarts.count) == (1, "Running", 0), "the job runs on"
    cluster.drivers.pods[KEY].pop(STANDBY_2, None)  # gone
    cluster.reconcile(after=1)
    replacement = cluster.drivers.plans[-1]
    assert (replacement.attempt, replacement.standby) == (2, True)


@pytest.mark.parametrize(
    "change",
    [
        pytest.param({"driver": {"standby": 0}}, id="turned-off"),
        pytest.param({"desiredState": "stopped"}, id="stopped"),
        pytest.param({"desiredState": "cancelled"}, id="cancelled"),
        pytest.param({"image": "img:2"}, id="spec-changed"),
    ],
)
def test_a_standby_goes_when_the_job_has_no_use_for_it(change: dict[str, Any]) -> None:
    cluster = Cluster()
    running_with_standby(cluster)
    cluster.jobs.apply(KEY, {**WITH_STANDBY, **change}, uid=UID)
    cluster.reconcile(after=1)
    assert (STANDBY_2, False) in cluster.drivers.deleted
    assert not any(c[1].startswith("promote") for c in cluster.drivers.controls)
    if change == {"driver": {"standby": 0}}:
        assert standby_ready(cluster) is None
        assert cluster.status().phase == "Running", "turning the standby off restarts nothing"


def test_turning_the_standby_on_restarts_nothing() -> None:
    cluster = Cluster()
    checkpointed(cluster, SPEC, 2)
    cluster.jobs.apply(KEY, WITH_STANDBY, uid=UID)
    cluster.reconcile(after=1)
    assert cluster.status().phase == "Running"
    assert [(p.attempt, p.standby) for p in cluster.drivers.plans] == [(1, False), (2, True)]


def test_a_standby_made_for_an_earlier_spec_is_never_promoted() -> None:
    cluster = Cluster()
    running_with_standby(cluster)
    cluster.drivers.set_driver(
        KEY, 2, DriverPhase.RUNNING, standby=True, spec_hash="an-earlier-spec", ready=True
    )
    fail_driver(cluster)
    cluster.reconcile(after=5)
    assert not any(c[1].startswith("promote") for c in cluster.drivers.controls)
    assert (STANDBY_2, False) in cluster.drivers.deleted


def test_a_deposed_leader_promotes_nothing() -> None:
    cluster = Cluster()
    running_with_standby(cluster)
    fail_driver(cluster)
    cluster.leading = False
    with pytest.raises(Exception, match="deposed"):
        cluster.reconcile(after=5)
    assert not any(c[1].startswith("promote") for c in cluster.drivers.controls)
    cluster.commit(1, 8)  # not fenced: nothing of the promotion happened
    assert cluster.stores.checkpoints.pointers(KEY)[0].checkpoint_id == 8


def test_a_standby_keeps_its_warm_executors_through_its_promotion_and_the_old_ones_go_first() -> None:
    cluster = Cluster()
    running_with_standby(cluster, WARM)
    standby_plan = cluster.drivers.plans[-1]
    env = {e["name"]: e.get("value") for e in standby_plan_env(standby_plan)}
    assert env[DriverEnv.STANDBY_EXECUTORS] == "2"
    assert standby_plan.spec_hash.endswith(".2"), "made for the spec and for its 2 warm executors"
    cluster.drivers.executor_pods[spark_app_id(UID, 2)] = 2  # the standby's, up and warmed
    cluster.drivers.executor_pods[spark_app_id(UID, 1)] = 1  # attempt 1's, not collected yet
    fail_driver(cluster)
    cluster.reconcile(after=5)
    assert not any(c[1].startswith("promote") for c in cluster.drivers.controls), (
        "an executor of attempt 1 could still write state: no promotion before it is gone"
    )
    kept = frozenset({spark_app_id(UID, 2)})
    assert cluster.drivers.executor_deletions[-1] == (UID, kept), "the standby's executors are spared"
    del cluster.drivers.executor_pods[spark_app_id(UID, 1)]
    cluster.reconcile(after=1)
    assert cluster.drivers.controls[-1] == (STANDBY_2, "promote@7"), "its own executors are no leftovers"
    assert cluster.drivers.executor_pods[spark_app_id(UID, 2)] == 2


def test_executors_of_a_deleted_standby_are_leftovers_of_the_attempt_it_was_for() -> None:
    cluster = Cluster()
    running_with_standby(cluster, WARM)
    cluster.drivers.set_driver(KEY, 2, DriverPhase.RUNNING, standby=True, spec_hash="an-earlier-spec")
    cluster.drivers.executor_pods[spark_app_id(UID, 2)] = 2
    fail_driver(cluster)
    cluster.reconcile(after=5)
    assert (STANDBY_2, False) in cluster.drivers.deleted
    cluster.drivers.pods[KEY].pop(STANDBY_2, None)
    cluster.reconcile(after=1)
    assert cluster.drivers.executor_deletions[-1] == (UID, frozenset())
    assert [p.attempt for p in cluster.drivers.plans if not p.standby] == [1], (
        "attempt 2's new pod would share its application id with the standby's executors"
    )


def test_changing_the_warm_executors_replaces_the_standby_and_restarts_nothing() -> None:
    cluster = Cluster()
    running_with_standby(cluster)
    cluster.jobs.apply(KEY, WARM, uid=UID)
    cluster.reconcile(after=1)
    assert (STANDBY_2, False) in cluster.drivers.deleted
    assert cluster.status().phase == "Running"
    cluster.drivers.pods[KEY].pop(STANDBY_2, None)
    cluster.reconcile(after=1)
    newest = cluster.drivers.plans[-1]
    assert (newest.attempt, newest.standby, newest.spec_hash.endswith(".2")) == (2, True, True)


def standby_plan_env(plan: AttemptPlan) -> list[dict[str, Any]]:
    (container,) = [c for c in driver_pod(plan)["spec"]["containers"] if c["name"] == DRIVER_CONTAINER]
    env: list[dict[str, Any]] = container["env"]
    return env


def _drain(cluster: Cluster, node: str, attempt: int = 1) -> None:
    """The node of the attempt's driver (running there) starts to drain; the job is looked at."""
    cluster.drivers.set_driver(KEY, attempt, DriverPhase.RUNNING, started_at=cluster.now, node=node)
    cluster.nodes.drained.add(node)
    cluster.reconcile(after=1)


def _stopped(cluster: Cluster, attempt: int = 1) -> None:
    """The driver stopped at a batch boundary with a final checkpoint, as asked; its pod then goes."""
    cluster.drivers.set_driver(
        KEY, attempt, DriverPhase.SUCCEEDED, exit_code=0, reason=STOPPED, ended=True, node="n1"
    )
    cluster.reconcile(after=1)
    assert (driver_pod_name(KEY.name, attempt), True) in cluster.drivers.deleted  # ended: at once
    cluster.drivers.pods[KEY].pop(driver_pod_name(KEY.name, attempt), None)


def test_a_driver_on_a_draining_node_stops_with_a_checkpoint_and_resumes_elsewhere_counting_no_failure() -> (
    None
):
    cluster = Cluster()
    checkpointed(cluster, SPEC, 7)
    _drain(cluster, "n1")
    assert cluster.drivers.controls == [(driver_pod_name(KEY.name, 1), "stop")]
    status = cluster.status()
    assert status.phase == "Relocating"
    assert "node n1 is being drained" in next(c.message for c in status.conditions if c.type == "Ready")
    assert "NodeDraining" in cluster.events.reasons()
    cluster.reconcile(after=1)
    assert len(cluster.drivers.controls) == 1, "asked once"
    _stopped(cluster)
    cluster.reconcile(after=1)
    relocated = cluster.drivers.plans[-1]
    assert (relocated.attempt, relocated.restore_from) == (2, "latest-checkpoint")
    status = cluster.status()
    assert (status.phase, status.restarts.count, status.failures, status.last_failure) == (
        "Submitting",
        0,
        [],
        None,
    ), "no failure: a relocation is not a restart"
    assert "Relocated" in cluster.events.reasons()


def test_a_drained_driver_hands_over_to_its_standby_and_a_standby_on_a_draining_node_is_replaced() -> None:
    cluster = Cluster()
    running_with_standby(cluster)
    spec_hash = cluster.drivers.pods[KEY][STANDBY_2].spec_hash
    cluster.drivers.set_driver(
        KEY, 2, DriverPhase.RUNNING, standby=True, spec_hash=spec_hash, ready=True, node="n3"
    )
    cluster.nodes.drained.add("n3")
    cluster.reconcile(after=1)
    assert (STANDBY_2, False) in cluster.drivers.deleted, "its node drains: the standby is made again"
    assert cluster.status().phase == "Running", "the job runs on"
    cluster.drivers.set_driver(
        KEY, 2, DriverPhase.RUNNING, standby=True, spec_hash=spec_hash, ready=True, node="n2"
    )
    _drain(cluster, "n1")
    assert cluster.status().phase == "Relocating"
    _stopped(cluster)
    cluster.reconcile(after=1)
    assert cluster.drivers.controls[-1] == (STANDBY_2, "promote@7")
    status = cluster.status()
    assert (status.attempt, status.restarts.count, status.failures) == (2, 0, [])
    assert "StandbyPromoted" in cluster.events.reasons()


def test_a_node_that_starts_to_drain_wakes_the_jobs_whose_drivers_run_there_once() -> None:
    drains = NodeWatch()
    other = JobKey(namespace="team-b", name="other")
    drains.driver_seen(KEY, "counts-1-driver", "n1")
    drains.driver_seen(other, "other-1-driver", "n2")
    assert not is_draining({}) and is_draining({"unschedulable": True})
    assert is_draining({"taints": [{"key": "ToBeDeletedByClusterAutoscaler", "effect": "NoSchedule"}]})
    assert drains.node_seen("n1", True) == [KEY]
    assert drains.node_seen("n1", True) == [], "woken when it starts to drain, not at every node event"
    assert drains.draining("n1") and not drains.draining("n2")
    drains.driver_seen(KEY, "counts-1-driver", "", gone=True)
    drains.node_seen("n1", False)
    assert drains.node_seen("n1", True) == [], "no driver there any more"


def _silent(cluster: Cluster) -> None:
    """Attempt 1 of a job that asks for no standby runs on n1, checkpointed; then n1 stops renewing its
    Lease."""
    checkpointed(cluster, SPEC, 7)
    cluster.drivers.set_driver(KEY, 1, DriverPhase.RUNNING, started_at=cluster.now, node="n1")
    cluster.reconcile(after=1)
    assert len(cluster.drivers.plans) == 1, "no standby asked for"
    cluster.nodes.silenced.add("n1")
    cluster.reconcile(after=1)
    _, standby = cluster.drivers.plans
    # Its promotion would come with the node's loss, the job's executors there lost too: it keeps them all.
    assert (standby.attempt, standby.standby, standby.standby_executors) == (2, True, 1)
    (said,) = [e.message for e in cluster.events.emitted if e.reason == "DriverNodeSilent"]
    assert "node n1 of driver counts-1-driver stopped renewing its Lease" in said, said
    assert standby_ready(cluster) is None, "StandbyReady is an asked-for standby's"


@pytest.mark.parametrize("ready_at_the_verdict", [True, False])
def test_a_driver_whose_node_falls_silent_gets_a_standby_promoted_on_the_node_controllers_verdict(
    ready_at_the_verdict: bool,
) -> None:
    """Not ready at the verdict: its session still starting, the restart waits for it, not for a new pod."""
    cluster = Cluster()
    _silent(cluster)
    spec_hash = cluster.drivers.pods[KEY][STANDBY_2].spec_hash
    standby = {"standby": True, "spec_hash": spec_hash, "started_at": cluster.now}
    cluster.drivers.set_driver(KEY, 2, DriverPhase.RUNNING, ready=ready_at_the_verdict, **standby)
    cluster.reconcile(after=5)
    assert cluster.drivers.controls == [], "silence is no verdict: nothing is promoted"
    assert STANDBY_2 in cluster.drivers.pods[KEY], "kept while the node is silent"
    cluster.commit(1, 8)  # the driver may well be alive: it still commits
    # The node controller's verdict: the node is lost.
    cluster.drivers.set_driver(KEY, 1, DriverPhase.FAILED, reason="NodeLost", node_lost=True, node="n1")
    cluster.reconcile()
    cluster.reconcile()  # Restarting: the lost pod is deleted at once
    assert ("counts-1-driver", True) in cluster.drivers.deleted
    cluster.drivers.pods[KEY].pop("counts-1-driver", None)
    cluster.reconcile(after=1)
    if not ready_at_the_verdict:
        cluster.reconcile(after=10)
        assert cluster.drivers.controls == [] and len(cluster.drivers.plans) == 2, "waited for"
        assert (STANDBY_2, False) not in cluster.drivers.deleted
        cluster.drivers.set_driver(KEY, 2, DriverPhase.RUNNING, ready=True, **standby)
        cluster.reconcile(after=1)
    assert cluster.drivers.controls[-1] == (STANDBY_2, "promote@8")
    assert len(cluster.drivers.plans) == 2, "no new pod: the standby took over"


def test_a_driver_on_a_silent_node_is_given_up_once_its_own_lease_went_unrenewed_for_its_duration() -> None:
    """Before the node controller's verdict, in a job that asked for a standby: the driver's Lease, held by
    it and seen unchanged for its duration (15 s) by the operator's clock. Not while it still changes, nor
    when another holds it."""
    cluster = Cluster()
    running_with_standby(cluster)
    cluster.drivers.set_driver(KEY, 1, DriverPhase.RUNNING, started_at=cluster.now, node="n1")
    cluster.nodes.silenced.add("n1")
    cluster.drivers.lease_holders[KEY] = "counts-0-driver@0"
    cluster.nodes.lease_ages[KEY] = 60.0
    cluster.reconcile(after=5)
    assert cluster.drivers.controls == [], "a Lease this driver never held proves nothing of it"
    cluster.drivers.lease_holders[KEY] = "counts-1-driver@1"
    cluster.nodes.lease_ages[KEY] = 14.0
    cluster.reconcile(after=5)
    assert cluster.drivers.controls == [], "renewed 14 s ago, as far as the operator knows: it may commit"
    cluster.nodes.lease_ages[KEY] = 15.0
    cluster.reconcile()
    cluster.reconcile()  # Restarting: the pod is deleted at once, as a lost node's
    assert ("counts-1-driver", True) in cluster.drivers.deleted
    cluster.drivers.pods[KEY].pop("counts-1-driver", None)
    cluster.reconcile(after=1)
    assert cluster.drivers.controls[-1] == (STANDBY_2, "promote@7")
    failure = cluster.status().last_failure
    assert failure is not None and failure.reason == "NodeLost", failure
    assert "Lease was not renewed for 15 s" in failure.message, failure.message


def test_a_job_that_asked_for_no_standby_waits_for_the_verdict_whatever_its_drivers_lease_says() -> None:
    """The standby its node's silence made is still warming its executors: promoted then, it took over colder
    and later than at the verdict (docs/hot-standby.md)."""
    cluster = Cluster()
    _silent(cluster)
    spec_hash = cluster.drivers.pods[KEY][STANDBY_2].spec_hash
    standby = {"standby": True, "spec_hash": spec_hash, "started_at": cluster.now, "ready": True}
    cluster.drivers.set_driver(KEY, 2, DriverPhase.RUNNING, **standby)
    cluster.drivers.lease_holders[KEY] = "counts-1-driver@1"
    cluster.nodes.lease_ages[KEY] = 60.0
    cluster.reconcile(after=5)
    assert cluster.drivers.controls == [] and "counts-1-driver" in cluster.drivers.pods[KEY]


def test_a_driver_lease_is_timed_from_its_nodes_first_overdue_renewal_and_wakes_its_job_once() -> None:
    """The node is late at 12 s (a renewal overdue), silent at 20 s: the driver's Lease is looked at from the
    first, so its 15 s can end soon after the second."""
    now = [0.0]
    nodes = NodeWatch(silence_seconds=20, clock=lambda: now[0])
    nodes.driver_seen(KEY, "counts-1-driver", "n1")

    def at(seconds: float) -> None:  # n2's kubelet renews every 10 s: the others are heard
        now[0] = seconds
        nodes.lease_seen("n2", f"t{seconds // 10 * 10:.0f}")

    nodes.lease_seen("n1", "t0")
    at(0.0)
    at(12.5)
    assert nodes.late("n1") and not nodes.silent("n1") and not nodes.late("n2")
    assert nodes.newly_late() == [KEY] and nodes.newly_silent() == []
    assert nodes.lease_unchanged_for(KEY, "v1", 15.0) == 0.0, "counted from the operator's first sight"
    at(21.0)
    assert nodes.newly_silent() == [KEY] and nodes.newly_late() == []
    assert nodes.lease_unchanged_for(KEY, "v1", 15.0) == 8.5
    assert nodes.lapses_due() == []
    assert nodes.lease_unchanged_for(KEY, "v2", 15.0) == 0.0, "renewed: counted again"
    at(36.0)
    assert nodes.lapses_due() == [KEY]
    assert nodes.lapses_due() == [], "woken once"
    assert nodes.lease_seen("n1", "t36") == [KEY]
    assert nodes.newly_late() == [] and not nodes.late("n1")
    assert nodes.lapses_due() == [] and nodes.lease_unchanged_for(KEY, "v2", 15.0) == 0.0, "forgotten"


def test_a_silent_node_that_speaks_again_takes_its_standby_back_and_restarts_nothing() -> None:
    cluster = Cluster()
    _silent(cluster)
    cluster.nodes.silenced.discard("n1")
    cluster.reconcile(after=1)
    assert (STANDBY_2, False) in cluster.drivers.deleted
    cluster.drivers.pods[KEY].pop(STANDBY_2, None)
    cluster.reconcile(after=30)
    status = cluster.status()
    assert (status.attempt, status.phase, status.restarts.count) == (1, "Running", 0)
    assert len(cluster.drivers.plans) == 2, "not made again"


def test_a_node_falls_silent_once_its_lease_is_not_renewed_and_speaks_again_with_a_renewal() -> None:
    now = [0.0]
    nodes = NodeWatch(silence_seconds=20, clock=lambda: now[0])
    other = JobKey(namespace="team-b", name="other")
    nodes.driver_seen(KEY, "counts-1-driver", "n1")
    nodes.driver_seen(other, "other-1-driver", "n2")
    assert nodes.lease_seen("n1", "t0") == [] and nodes.lease_seen("n2", "t0") == []
    now[0] = 15.0
    assert nodes.lease_seen("n2", "t15") == []
    now[0] = 19.5
    assert not nodes.silent("n1"), "not yet 20 s"
    now[0] = 21.0
    assert nodes.silent("n1") and not nodes.silent("n2")
    assert not nodes.silent("n3"), "a node whose Lease was never seen: no evidence"
    assert nodes.lease_seen("n1", "t0") == [], "the same renewTime again is no renewal"
    assert nodes.newly_silent() == [KEY]
    assert nodes.newly_silent() == [], "woken when it falls silent, not at every look"
    assert nodes.lease_seen("n1", "t21") == [KEY], "speaking again wakes its jobs"
    assert not nodes.silent("n1")
    nodes.lease_gone("n2")
    now[0] = 100.0
    assert not nodes.silent("n2"), "a deleted node's Lease says nothing"
    assert not NodeWatch(clock=lambda: now[0]).silent("n1"), "silence_seconds 0: never"
    # A new leader (its predecessor perhaps dead with the node): a first sighting's age counts, up to 20 s.
    leader = NodeWatch(silence_seconds=20, clock=lambda: now[0])
    leader.driver_seen(KEY, "counts-1-driver", "n1")
    leader.lease_seen("n1", "t0", age=45.0)
    leader.lease_seen("n2", "t99", age=1.0)
    assert not leader.silent("n1"), "never silent at a first sighting"
    now[0] = 101.0
    assert leader.silent("n1") and leader.newly_silent() == [KEY]
    leader.lease_seen("n1", "t1", age=45.0)
    assert not leader.silent("n1"), "a renewal's age is not credited: the watch saw it change now"


def test_silence_is_believed_only_while_the_other_nodes_are_heard() -> None:
    now = [0.0]
    nodes = NodeWatch(silence_seconds=20, clock=lambda: now[0])
    for node in ("n1", "n2", "n3", "n4"):
        nodes.lease_seen(node, "t0")
    now[0] = 15.0
    for node in ("n2", "n3", "n4"):
        nodes.lease_seen(node, "t15")
    now[0] = 30.0
    nodes.lease_seen("n3", "t30")
    nodes.lease_seen("n4", "t30")
    assert nodes.silent("n1"), "one of four, the others heard"
    now[0] = 36.0
    assert nodes.silent("n1") and nodes.silent("n2"), "half of them"
    now[0] = 40.0
    nodes.lease_seen("n4", "t40")
    now[0] = 51.0
    assert not nodes.silent("n1"), "three of four silent: the API server's trouble more likely"
    now[0] = 61.0
    assert not nodes.silent("n1"), "no Lease changed within 20 s: the watch hears nothing"
    nodes.lease_seen("n2", "t61")
    nodes.lease_seen("n3", "t61")
    assert nodes.silent("n1"), "heard again"
