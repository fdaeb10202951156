"""The operator against the real API server and S3: submission, restarts, bad input, results, failover."""

from __future__ import annotations

import base64
import datetime
import json
import re
import threading
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import pytest
from kubernetes import client, config

from ftspark import API_GROUP, API_VERSION, PLURAL
from ftspark.adapters.k8s.cluster import KubeJobs
from ftspark.adapters.k8s.configmap_stores import STORE_LABEL, configmap_stores
from ftspark.adapters.s3.stores import S3BlobStore
from ftspark.cli import main as cli_main
from ftspark.domain.fencing import Epoch, FencedOutError, RetiredRecordError
from ftspark.domain.ha import CheckpointPointer, JobKey, JobResultEntry
from ftspark.domain.policy import NAMESPACE_LABEL_PREFIX
from ftspark.domain.savepoints import job_savepoint_id
from ftspark.protocol import (
    JOB_LABEL,
    JOB_NAMESPACE_LABEL,
    SPARK_APP_SELECTOR_LABEL,
    SPARK_ROLE_LABEL,
    ControlRequest,
    attempt_secret_name,
    driver_lease_name,
    spark_app_id,
    term_floor_name,
)
from ftspark.reconcile.nodes import NODE_LEASE_NAMESPACE
from ftspark.reconcile.pacing import CHECKPOINT_STATUS_DELAY
from ftspark_dev.cluster.controlplane import ControlPlane
from ftspark_dev.cluster.operators import (
    OperatorFleet,
    condition,
    event_reasons,
    invalid_spec,
    job_manifest,
    job_status,
    pod_names,
    report_checkpoint,
    set_driver_exited,
    set_driver_running,
)
from ftspark_dev.cluster.processes import free_port
from ftspark_dev.cluster.s3server import S3Server
from tests.waiting import eventually


def create_job(api: client.ApiClient, namespace: str, body: dict[str, object]) -> None:
    client.CustomObjectsApi(api).create_namespaced_custom_object(
        API_GROUP, API_VERSION, namespace, PLURAL, body
    )


def test_submits_runs_and_restarts_a_failed_driver(
    fleet: OperatorFleet, api_client: client.ApiClient, s3_server: S3Server, bucket: str
) -> None:
    ns, core = fleet.watch_namespace, client.CoreV1Api(api_client)
    fleet.start()
    create_job(api_client, ns, job_manifest("wordcount", bucket))

    first = eventually(
        lambda: "wordcount-1-driver" in pod_names(api_client, ns, "wordcount"),
        timeout=30,
        what=lambda: f"first driver pod\n{fleet.logs()}",
    )
    assert first
    pod = core.read_namespaced_pod("wordcount-1-driver", ns)
    assert pod.metadata.owner_references[0].kind == "FaultTolerantSparkJob"
    assert pod.spec.restart_policy == "Never"
    # No Service: executors reach their driver at its pod IP, which the pod learns from the downward API.
    assert core.list_namespaced_service(ns, label_selector="ftspark.io/job=wordcount").items == []
    stores = configmap_stores(
        api_client, S3BlobStore(s3_server.client()), fleet.seal(api_client), results_namespace=fleet.namespace
    )
    graph = stores.job_graphs.get(JobKey(namespace=ns, name="wordcount"))
    assert graph is not None, "the job graph is written before the driver pod"
    uid = client.CustomObjectsApi(api_client).get_namespaced_custom_object(
        API_GROUP, API_VERSION, ns, PLURAL, "wordcount"
    )["metadata"]["uid"]
    assert graph.uid == uid
    assert graph.checkpoint_location == f"s3://{bucket}/jobs/wordcount/checkpoints/{uid[:8]}-run-1"
    eventually(
        lambda: job_status(api_client, ns, "wordcount").get("phase") == "Submitting",
        timeout=30,
        what="Submitting (recorded after the pod is created)",
    )

    set_driver_running(core, ns, "wordcount-1-driver")
    eventually(
        lambda: job_status(api_client, ns, "wordcount").get("phase") == "Running", timeout=30, what="Running"
    )
    assert condition(job_status(api_client, ns, "wordcount"), "Ready")["status"] == "True"

    failed_at = time.monotonic()
    set_driver_exited(core, ns, "wordcount-1-driver", 1, "Traceback: ValueError: boom")
    eventually(
        lambda: pod_names(api_client, ns, "wordcount") == ["wordcount-2-driver"],
        timeout=30,
        what="attempt 2 replaces attempt 1",
    )
    recovery = time.monotonic() - failed_at
    secrets = partial(core.list_namespaced_secret, ns, label_selector="ftspark.io/job=wordcount")
    policies = partial(
        client.NetworkingV1Api(api_client).list_namespaced_network_policy,
        ns,
        label_selector="ftspark.io/job=wordcount",
    )
    eventually(
        lambda: [x.metadata.name for x in secrets().items] == ["wordcount-2-driver-rpc"]
        and [x.metadata.name for x in policies().items] == ["wordcount-2-driver"],
        timeout=30,
        what="attempt 1's RPC Secret and NetworkPolicy went with it",
    )
    status = eventually(
        lambda: next((s for s in [job_status(api_client, ns, "wordcount")] if s.get("attempt") == 2), None),
        timeout=30,
        what="attempt 2 recorded",
    )
    assert status["attempt"] == 2
    assert status["lastFailure"]["exitCode"] == 1
    assert "boom" in status["lastFailure"]["message"]
    assert status["restarts"]["count"] == 1
    assert {"Submitted", "Running", "Restarting", "Restarted"} <= set(
        event_reasons(api_client, ns, "wordcount")
    )
    print(f"driver failure -> new driver pod in {recovery:.2f} s (restart delay 1 s)")
    # The restart waited its delay (1 s, from the manifest's fixedDelay); how soon after it comes is the
    # bench's figure ("driver failure -> new pod beyond the delay"), not a loaded machine's.
    assert recovery >= 1


def _driver_lease(api: client.ApiClient, namespace: str, job: str, holder: str) -> None:
    """The job's driver Lease as its driver holds it (ftspark.runtime.fencing), renewed just now."""
    now = datetime.datetime.now(datetime.UTC)
    body = client.V1Lease(
        metadata=client.V1ObjectMeta(name=driver_lease_name(job)),
        spec=client.V1LeaseSpec(
            holder_identity=holder,
            lease_duration_seconds=15,
            acquire_time=now,
            renew_time=now,
            lease_transitions=1,
        ),
    )
    client.CoordinationV1Api(api).create_namespaced_lease(namespace, body)


def _lease_holder(api: client.ApiClient, namespace: str, job: str) -> tuple[str, int]:
    spec = client.CoordinationV1Api(api).read_namespaced_lease(driver_lease_name(job), namespace).spec
    return spec.holder_identity or "", spec.lease_transitions


@pytest.mark.parametrize(
    ("holder", "released"),
    [
        pytest.param("leased-1-driver@1", True, id="held-by-the-ended-driver"),
        # Written by the tenant, or by another attempt: the operator only ever releases its ended driver's.
        pytest.param("someone-else@1", False, id="held-by-another"),
    ],
)
def test_an_ended_driver_s_lease_is_released_for_the_next_attempt(
    fleet: OperatorFleet, api_client: client.ApiClient, bucket: str, holder: str, released: bool
) -> None:
    """Fence and go: the kubelet says the driver container terminated, so nothing of it runs; the next
    attempt need not wait out the Lease (15 s) it held."""
    ns, core = fleet.watch_namespace, client.CoreV1Api(api_client)
    fleet.start()
    create_job(api_client, ns, job_manifest("leased", bucket))
    eventually(lambda: "leased-1-driver" in pod_names(api_client, ns, "leased"), timeout=30, what="attempt 1")
    set_driver_running(core, ns, "leased-1-driver")
    eventually(
        lambda: job_status(api_client, ns, "leased").get("phase") == "Running", timeout=30, what="Running"
    )
    _driver_lease(api_client, ns, "leased", holder)

    set_driver_exited(core, ns, "leased-1-driver", 137, "")
    eventually(
        lambda: pod_names(api_client, ns, "leased") == ["leased-2-driver"], timeout=30, what="attempt 2"
    )

    assert _lease_holder(api_client, ns, "leased") == ("" if released else holder, 1), (
        "released with its transitions kept (the next holder's term is above them)"
        if released
        else "another holder's Lease is left as it is"
    )


def test_the_echoes_of_the_operators_own_writes_wake_no_reconcile(
    fleet: OperatorFleet, api_client: client.ApiClient, bucket: str
) -> None:
    """Its status writes, the pods it creates and the fence advances it writes: each comes back as a watch
    event, which would cost another pass (five requests) and, in a burst of new jobs, another turn."""
    ns, core = fleet.watch_namespace, client.CoreV1Api(api_client)
    leader = fleet.start()
    eventually(lambda: fleet.leader(api_client) == leader, timeout=30, what="a leader")

    def reconciles() -> int:
        return sum(value for _, value in fleet.counters(leader, "ftspark_reconcile_duration_seconds"))

    before = reconciles()
    create_job(api_client, ns, job_manifest("bad", bucket, sparkConf={"spark.master": "local[*]"}))
    eventually(lambda: invalid_spec(api_client, ns, "bad"), timeout=30, what=lambda: fleet.logs())
    # Not after a fixed delay: a change after that status write wakes a pass, which runs after whatever its
    # echo (earlier in the job's watch) woke; once that pass is counted, the echo's would have been too.
    _patch_spec(api_client, ns, "bad", {"sparkConf": {"spark.master": "local[2]"}})
    eventually(lambda: _observed(api_client, ns, "bad"), timeout=30, what="the change's pass")
    eventually(lambda: reconciles() - before >= 2, timeout=30, what="the change's pass counted")
    assert reconciles() - before == 2, "the creation and the change woke one pass each, the echo none"

    create_job(api_client, ns, job_manifest("echo", bucket))
    eventually(
        lambda: job_status(api_client, ns, "echo").get("phase") == "Submitting", timeout=30, what="Submitting"
    )
    time.sleep(CHECKPOINT_STATUS_DELAY + 2)  # what the fence advance's record change would have woken
    settled = reconciles()
    set_driver_running(core, ns, "echo-1-driver")
    eventually(
        lambda: job_status(api_client, ns, "echo").get("phase") == "Running", timeout=30, what="Running"
    )
    time.sleep(3)
    assert reconciles() - settled == 1, "the driver's report woke one pass, the echo of its status write none"


def test_bad_spec_gets_a_condition_and_an_event_and_no_pods_until_fixed(
    fleet: OperatorFleet, api_client: client.ApiClient, bucket: str
) -> None:
    ns = fleet.watch_namespace
    fleet.start()
    create_job(api_client, ns, job_manifest("bad", bucket, sparkConf={"spark.master": "local[*]"}))

    ready = eventually(
        lambda: invalid_spec(api_client, ns, "bad"),
        timeout=30,
        what=lambda: f"InvalidSpec condition\n{fleet.logs()}",
    )
    assert "spec.sparkConf" in str(ready["message"])
    assert "spark.master" in str(ready["message"])
    assert "InvalidSpec" in event_reasons(api_client, ns, "bad")
    # Not after a fixed delay: another pass over another bad spec must have run (its generation observed)
    # before "no pods" says anything.
    _patch_spec(api_client, ns, "bad", {"sparkConf": {"spark.master": "local[2]"}})
    eventually(lambda: _observed(api_client, ns, "bad"), timeout=30, what="a pass over the new bad spec")
    assert invalid_spec(api_client, ns, "bad")
    assert pod_names(api_client, ns, "bad") == []
    assert all(p.running() for p in fleet.replicas.values()), "no crash loop on bad input"

    client.CustomObjectsApi(api_client).patch_namespaced_custom_object(
        API_GROUP, API_VERSION, ns, PLURAL, "bad", {"spec": {"sparkConf": {"spark.master": None}}}
    )
    eventually(
        lambda: pod_names(api_client, ns, "bad") == ["bad-1-driver"], timeout=30, what="fixed job runs"
    )


def test_a_driver_pod_the_api_server_refuses_is_reported_and_nothing_is_half_created(
    fleet: OperatorFleet, api_client: client.ApiClient, bucket: str
) -> None:
    """Valid by the schema, refused by the API server (an invalid label from the podTemplate)."""
    ns, core = fleet.watch_namespace, client.CoreV1Api(api_client)
    fleet.start()
    template = {"metadata": {"labels": {"team": "not a label value!"}}}
    executors = {"instances": 1, "podTemplate": {"metadata": {"labels": {"team": "a"}}}}
    body = job_manifest("refused", bucket, driver={"podTemplate": template}, executor=executors)
    create_job(api_client, ns, body)

    ready = eventually(
        lambda: invalid_spec(api_client, ns, "refused"),
        timeout=30,
        what=lambda: f"InvalidSpec condition\n{fleet.logs()}",
    )
    assert "refused the driver's Pod refused-1-driver" in ready["message"]
    assert "not a label value!" in ready["message"]
    assert "InvalidSpec" in event_reasons(api_client, ns, "refused")
    # Not after a fixed delay: the pass that was refused is over (its generation observed), and so is what it
    # undid.
    eventually(lambda: _observed(api_client, ns, "refused"), timeout=30, what="the refused pass done")
    assert pod_names(api_client, ns, "refused") == []
    job = "ftspark.io/job=refused"
    assert core.list_namespaced_secret(ns, label_selector=job).items == [], "the Secret made first is undone"
    policies = client.NetworkingV1Api(api_client).list_namespaced_network_policy(ns, label_selector=job)
    assert policies.items == [], "and the NetworkPolicy"
    assert all(p.running() for p in fleet.replicas.values()), "no crash loop on a refused pod"

    fixed = {"metadata": {"labels": {"team": "a"}}}
    _patch_spec(api_client, ns, "refused", {"driver": {"podTemplate": fixed}})
    eventually(partial(_only_driver, api_client, ns, "refused", 1), timeout=30, what="the fixed job runs")
    assert core.read_namespaced_pod("refused-1-driver", ns).metadata.labels["team"] == "a"
    core.read_namespaced_secret(attempt_secret_name("refused-1-driver"), ns)
    client.NetworkingV1Api(api_client).read_namespaced_network_policy("refused-1-driver", ns)


def test_finished_job_is_not_restarted_by_a_new_leader(
    fleet: OperatorFleet, api_client: client.ApiClient, bucket: str
) -> None:
    ns, core = fleet.watch_namespace, client.CoreV1Api(api_client)
    first = fleet.start()
    create_job(api_client, ns, job_manifest("batch", bucket))
    eventually(lambda: pod_names(api_client, ns, "batch") == ["batch-1-driver"], timeout=30, what="driver")
    set_driver_running(core, ns, "batch-1-driver")
    set_driver_exited(core, ns, "batch-1-driver", 0, "finished")
    eventually(
        lambda: job_status(api_client, ns, "batch").get("phase") == "Succeeded", timeout=30, what="done"
    )
    assert pod_names(api_client, ns, "batch") == [], "a finished job's pods are cleaned up"

    fleet.replicas[first].kill()
    fleet.start()
    eventually(lambda: fleet.leader(api_client) not in {None, first}, timeout=30, what="a new leader")
    # The new leader reconciles the job (its status is rewritten) and starts nothing.
    client.CustomObjectsApi(api_client).patch_namespaced_custom_object_status(
        API_GROUP, API_VERSION, ns, PLURAL, "batch", {"status": {"phase": "Running"}}
    )
    eventually(
        lambda: job_status(api_client, ns, "batch").get("phase") == "Succeeded",
        timeout=30,
        what="the result wins over a stale status",
    )
    assert pod_names(api_client, ns, "batch") == []


def test_a_new_leader_finishes_the_cleanup_a_crashed_leader_left_dirty(
    fleet: OperatorFleet, api_client: client.ApiClient, s3_server: S3Server, bucket: str
) -> None:
    """FLIP-194: the result was written (dirty), the leader died before deleting the pods."""
    ns = fleet.watch_namespace
    first = fleet.start()
    _start_running(api_client, ns, "dirty", bucket)
    fleet.replicas[first].kill()
    uid = client.CustomObjectsApi(api_client).get_namespaced_custom_object(
        API_GROUP, API_VERSION, ns, PLURAL, "dirty"
    )["metadata"]["uid"]
    stores = configmap_stores(
        api_client, S3BlobStore(s3_server.client()), fleet.seal(api_client), results_namespace=fleet.namespace
    )
    lease = client.CoordinationV1Api(api_client).read_namespaced_lease("ftspark-operator", fleet.namespace)
    crashed = Epoch("operator", lease.spec.lease_transitions or 0, first)
    finished = datetime.datetime.now(datetime.UTC)
    entry = JobResultEntry(
        job=JobKey(namespace=ns, name="dirty"), uid=uid, state="Succeeded", finished_at=finished
    )
    stores.results.create_dirty(entry, crashed)
    assert pod_names(api_client, ns, "dirty") == ["dirty-1-driver"]

    fleet.start()
    eventually(lambda: pod_names(api_client, ns, "dirty") == [], timeout=30, what="the pods cleaned up")
    eventually(lambda: (stores.results.get(uid) or entry).clean, timeout=30, what="the result marked clean")
    eventually(lambda: _phase(api_client, ns, "dirty") == "Succeeded", timeout=30, what="Succeeded")


def test_standby_takes_over_after_the_leader_is_killed(
    fleet: OperatorFleet, api_client: client.ApiClient, bucket: str
) -> None:
    ns = fleet.watch_namespace
    first, second = _leader_and_standby(fleet, api_client)
    time.sleep(1)
    killed_at = time.monotonic()
    fleet.replicas[first].kill()
    create_job(api_client, ns, job_manifest("after-failover", bucket))
    eventually(
        lambda: pod_names(api_client, ns, "after-failover") == ["after-failover-1-driver"],
        timeout=30,
        what=lambda: f"the standby reconciles\n{fleet.logs()}",
    )
    takeover = time.monotonic() - killed_at
    assert fleet.leader(api_client) == second
    print(
        f"leader SIGKILL -> standby created a driver pod in {takeover:.2f} s (lease {fleet.lease_duration} s)"
    )
    assert takeover < _takeover_bound(fleet)


def _takeover_bound(fleet: OperatorFleet) -> float:
    """A standby acquires within a lease duration of the last renew plus two jittered retry periods
    (client-go's factor 1.2), and 5 s for a busy machine: beyond it, the standby waited on something else."""
    return fleet.lease_duration + 2.2 * 2 * fleet.retry_period + 5


def _observed(api: client.ApiClient, namespace: str, name: str) -> dict[str, Any] | None:
    """The job's status once a pass acted on its current spec (status.observedGeneration is its generation):
    what that pass did is done by then, its status write being its last step."""
    body = client.CustomObjectsApi(api).get_namespaced_custom_object(
        API_GROUP, API_VERSION, namespace, PLURAL, name
    )
    status: dict[str, Any] = body.get("status") or {}
    return status if status.get("observedGeneration") == body["metadata"]["generation"] else None


def _patch_spec(api: client.ApiClient, namespace: str, name: str, spec: dict[str, Any]) -> int:
    """Patch the spec; the generation it made."""
    body = client.CustomObjectsApi(api).patch_namespaced_custom_object(
        API_GROUP, API_VERSION, namespace, PLURAL, name, {"spec": spec}
    )
    return int(body["metadata"]["generation"])


def _leader_and_standby(fleet: OperatorFleet, api: client.ApiClient) -> tuple[str, str]:
    """Two replicas: the first started leads, the second stands by."""
    first = fleet.start()
    eventually(lambda: fleet.leader(api) == first, timeout=30, what="first leader")
    return first, fleet.start()


def _only_driver(api: client.ApiClient, namespace: str, job: str, attempt: int) -> bool:
    return pod_names(api, namespace, job) == [f"{job}-{attempt}-driver"]


def _start_running(api: client.ApiClient, namespace: str, name: str, bucket: str, **spec: Any) -> None:
    """Create a job, wait for its first driver, report it running (as a kubelet would), wait for Running."""
    create_job(api, namespace, job_manifest(name, bucket, **spec))
    eventually(partial(_only_driver, api, namespace, name, 1), timeout=30, what=f"{name}'s first driver")
    set_driver_running(client.CoreV1Api(api), namespace, f"{name}-1-driver")
    eventually(lambda: _phase(api, namespace, name) == "Running", timeout=30, what=f"{name} Running")


def _phase(api: client.ApiClient, namespace: str, name: str) -> str | None:
    phase: str | None = job_status(api, namespace, name).get("phase")
    return phase


def _env(core: client.CoreV1Api, namespace: str, pod: str) -> dict[str, str]:
    container = core.read_namespaced_pod(pod, namespace).spec.containers[0]
    return {e.name: e.value for e in container.env if e.value is not None}


def test_stop_with_checkpoint_then_resume(
    fleet: OperatorFleet, api_client: client.ApiClient, bucket: str
) -> None:
    ns, core = fleet.watch_namespace, client.CoreV1Api(api_client)
    fleet.start()
    _start_running(api_client, ns, "stream", bucket)

    _patch_spec(api_client, ns, "stream", {"desiredState": "stopped"})

    def stop_requested() -> bool:
        annotations: dict[str, str] = (
            core.read_namespaced_pod("stream-1-driver", ns).metadata.annotations or {}
        )
        return annotations.get("ftspark.io/control", "").startswith("stop@")

    eventually(stop_requested, timeout=30, what="the driver is asked to stop")
    assert _phase(api_client, ns, "stream") == "Stopping"
    set_driver_exited(core, ns, "stream-1-driver", 0, '{"stopped": true, "lastBatch": 7}')
    eventually(lambda: _phase(api_client, ns, "stream") == "Stopped", timeout=30, what="Stopped")
    eventually(lambda: pod_names(api_client, ns, "stream") == [], timeout=30, what="stopped driver removed")
    assert job_status(api_client, ns, "stream").get("result") is None, "a stop is not the job's end"

    _patch_spec(api_client, ns, "stream", {"desiredState": "running"})
    eventually(lambda: pod_names(api_client, ns, "stream") == ["stream-2-driver"], timeout=30, what="resumed")
    env = _env(core, ns, "stream-2-driver")
    assert env["FTSPARK_RESTORE_FROM"] == "latest-checkpoint"
    assert (
        env["FTSPARK_CHECKPOINT_LOCATION"] == _env(core, ns, "stream-2-driver")["FTSPARK_CHECKPOINT_LOCATION"]
    )
    assert env["FTSPARK_CHECKPOINT_LOCATION"].endswith("-run-1"), "resume keeps the checkpoint directory"


def test_a_drained_node_moves_its_driver_off_with_a_final_checkpoint_and_counts_no_failure(
    fleet: OperatorFleet, api_client: client.ApiClient, bucket: str
) -> None:
    """The namespace's PodDisruptionBudget makes the API server refuse the driver's eviction (a drain's); the
    cordon (the node watch) makes the operator stop it with a final checkpoint and start the next attempt,
    which the scheduler places elsewhere, without a failure counted."""
    ns, core, policy = fleet.watch_namespace, client.CoreV1Api(api_client), client.PolicyV1Api(api_client)
    node = f"drained-{ns}"
    # Tainted: no scheduler places another pod there; the driver is bound to it by hand, as a scheduler would.
    taint = client.V1Taint(key="ftspark.test/private", effect="NoSchedule")
    core.create_node(
        client.V1Node(metadata=client.V1ObjectMeta(name=node), spec=client.V1NodeSpec(taints=[taint]))
    )
    try:
        fleet.start()
        create_job(api_client, ns, job_manifest("moving", bucket))
        eventually(
            lambda: pod_names(api_client, ns, "moving") == ["moving-1-driver"], timeout=30, what="driver"
        )
        target = client.V1ObjectReference(kind="Node", name=node)
        binding = client.V1Binding(metadata=client.V1ObjectMeta(name="moving-1-driver"), target=target)
        core.create_namespaced_pod_binding("moving-1-driver", ns, binding, _preload_content=False)
        set_driver_running(core, ns, "moving-1-driver")
        eventually(lambda: _phase(api_client, ns, "moving") == "Running", timeout=30, what="Running")
        budget = policy.read_namespaced_pod_disruption_budget("ftspark-drivers", ns)
        assert budget.spec.max_unavailable == 0
        eviction = client.V1Eviction(metadata=client.V1ObjectMeta(name="moving-1-driver", namespace=ns))
        with pytest.raises(client.ApiException) as refused:
            core.create_namespaced_pod_eviction("moving-1-driver", ns, eviction)
        assert refused.value.status == 429, "a drain's eviction waits"

        core.patch_node(node, {"spec": {"unschedulable": True}})

        def stop_requested() -> bool:
            annotations = core.read_namespaced_pod("moving-1-driver", ns).metadata.annotations or {}
            return str(annotations.get("ftspark.io/control", "")).startswith("stop@")

        eventually(stop_requested, timeout=30, what="the driver on the cordoned node asked to stop")
        assert _phase(api_client, ns, "moving") == "Relocating"
        set_driver_exited(core, ns, "moving-1-driver", 0, '{"stopped": true, "lastBatch": 7}')
        eventually(
            lambda: pod_names(api_client, ns, "moving") == ["moving-2-driver"], timeout=30, what="resumed"
        )
        assert _env(core, ns, "moving-2-driver")["FTSPARK_RESTORE_FROM"] == "latest-checkpoint"
        status = job_status(api_client, ns, "moving")
        assert (status["restarts"].get("count", 0), status.get("failures", [])) == (0, []), "no failure"
        assert {"NodeDraining", "Relocated"} <= set(event_reasons(api_client, ns, "moving"))
        assert [b.metadata.name for b in policy.list_namespaced_pod_disruption_budget(ns).items] == [
            "ftspark-drivers"
        ], "one budget for the namespace's drivers, made once"
    finally:
        core.delete_node(node)


def test_an_evicted_driver_is_restarted_outside_the_strategys_count_and_a_script_failure_is_not(
    fleet: OperatorFleet, api_client: client.ApiClient, bucket: str
) -> None:
    """restartStrategy allows no restart at all; an eviction (a cause outside the job) is restarted anyway,
    and says whose cause it was; the script's own failure then ends the job."""
    ns, core = fleet.watch_namespace, client.CoreV1Api(api_client)
    fleet.start()
    strict = {"type": "fixed-delay", "fixedDelay": {"attempts": 0, "delaySeconds": 0}}
    _start_running(api_client, ns, "evicted", bucket, restartStrategy=strict)
    evicted = {"phase": "Failed", "reason": "Evicted", "message": "The node was low on resource: memory."}
    core.patch_namespaced_pod_status("evicted-1-driver", ns, {"status": evicted})
    eventually(
        lambda: "evicted-2-driver" in pod_names(api_client, ns, "evicted"), timeout=30, what="attempt 2"
    )
    status = job_status(api_client, ns, "evicted")
    assert (
        status["lastFailure"]["reason"] == "Evicted" and status["lastFailure"]["category"] == "infrastructure"
    )
    assert status["restarts"].get("count", 0) == 0, "not counted by the strategy"
    set_driver_running(core, ns, "evicted-2-driver")
    set_driver_exited(core, ns, "evicted-2-driver", 1, "boom")
    eventually(lambda: _phase(api_client, ns, "evicted") == "Failed", timeout=30, what="Failed")
    assert job_status(api_client, ns, "evicted")["lastFailure"]["category"] == "application"


def test_the_ui_service_selects_the_serving_driver_and_the_status_and_cli_say_where(
    fleet: OperatorFleet,
    api_client: client.ApiClient,
    bucket: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    ns, core = fleet.watch_namespace, client.CoreV1Api(api_client)
    fleet.start()
    _start_running(api_client, ns, "shown", bucket, ui={"enabled": True})
    service = core.read_namespaced_service("shown-ui", ns)
    driver = core.read_namespaced_pod("shown-1-driver", ns)
    assert service.spec.selector.items() <= driver.metadata.labels.items()
    assert [p.port for p in service.spec.ports] == [4040]
    assert service.metadata.owner_references[0].kind == "FaultTolerantSparkJob"
    url = "http://shown-ui." + ns + ".svc:4040"
    eventually(lambda: job_status(api_client, ns, "shown").get("uiUrl") == url, timeout=30, what="uiUrl")
    base = ["--kubeconfig", str(fleet.control_plane.kubeconfig), "-n", ns]
    assert cli_main([*base, "ui", "shown", "--print-only"]) == 0
    assert capsys.readouterr().out.strip() == f"{ns}/shown: Spark UI at {url}"
    create_job(api_client, ns, job_manifest("dark", bucket))
    assert cli_main([*base, "ui", "dark"]) == 1
    assert "set spec.ui.enabled: true" in capsys.readouterr().err


def test_a_run_due_while_no_operator_led_is_started_once_when_one_leads_again(
    fleet: OperatorFleet, api_client: client.ApiClient, bucket: str
) -> None:
    """A ScheduledSparkJob made while no replica runs, every minute: past the next minute a replica starts;
    it makes the run due then (one FaultTolerantSparkJob, named after its minute, owned by the schedule),
    which runs to Succeeded as any job."""
    ns, core = fleet.watch_namespace, client.CoreV1Api(api_client)
    objects = client.CustomObjectsApi(api_client)
    template = job_manifest("unused", bucket)["spec"]
    body = {
        "apiVersion": f"{API_GROUP}/{API_VERSION}",
        "kind": "ScheduledSparkJob",
        "metadata": {"name": "tick"},
        "spec": {"schedule": "* * * * *", "template": template},
    }
    made = objects.create_namespaced_custom_object(API_GROUP, API_VERSION, ns, "scheduledsparkjobs", body)
    uid = made["metadata"]["uid"]
    created = datetime.datetime.fromisoformat(made["metadata"]["creationTimestamp"].replace("Z", "+00:00"))
    due = created.replace(second=0, microsecond=0) + datetime.timedelta(minutes=1)
    time.sleep(max(0.0, (due - datetime.datetime.now(datetime.UTC)).total_seconds()) + 1)
    fleet.start()
    run = f"tick-{int(due.timestamp()) // 60}"

    def runs() -> list[str]:
        listed = objects.list_namespaced_custom_object(
            API_GROUP, API_VERSION, ns, PLURAL, label_selector="ftspark.io/schedule=tick"
        )
        return [item["metadata"]["name"] for item in listed["items"]]

    eventually(lambda: runs() == [run], timeout=30, what="the run due while no operator led")
    job = objects.get_namespaced_custom_object(API_GROUP, API_VERSION, ns, PLURAL, run)
    assert [o["uid"] for o in job["metadata"]["ownerReferences"]] == [uid]
    assert job["spec"]["mainApplicationFile"] == template["mainApplicationFile"]
    schedule = objects.get_namespaced_custom_object(API_GROUP, API_VERSION, ns, "scheduledsparkjobs", "tick")
    assert schedule["status"]["lastRun"] == run and schedule["status"]["nextScheduleTime"]
    eventually(lambda: pod_names(api_client, ns, run) == [f"{run}-1-driver"], timeout=30, what="its driver")
    set_driver_exited(core, ns, f"{run}-1-driver", 0, "done")
    eventually(lambda: _phase(api_client, ns, run) == "Succeeded", timeout=30, what="the run Succeeded")
    minutes = sorted(int(name.rsplit("-", 1)[1]) for name in runs())
    assert minutes[0] == int(due.timestamp()) // 60, "none for a time before it, nor twice for it"
    assert len(minutes) == len(set(minutes))


def test_a_schedules_history_deletes_its_own_finished_runs_never_a_job_that_only_wears_its_label(
    fleet: OperatorFleet, api_client: client.ApiClient, bucket: str
) -> None:
    """Hostile: a tenant's job labelled (and annotated) as a run of the schedule is not its run: only a job
    the schedule owns is deleted beyond its history."""
    ns, objects = fleet.watch_namespace, client.CustomObjectsApi(api_client)
    template = job_manifest("unused", bucket)["spec"]
    body = {
        "apiVersion": f"{API_GROUP}/{API_VERSION}",
        "kind": "ScheduledSparkJob",
        "metadata": {"name": "hist"},
        "spec": {"schedule": "0 0 1 1 *", "successfulRunsHistoryLimit": 0, "template": template},
    }
    made = objects.create_namespaced_custom_object(API_GROUP, API_VERSION, ns, "scheduledsparkjobs", body)
    owner = {"apiVersion": f"{API_GROUP}/{API_VERSION}", "kind": "ScheduledSparkJob", "name": "hist"}
    finished = {"result": {"state": "Succeeded", "time": "2026-01-01T00:00:00Z"}, "phase": "Succeeded"}
    for name, owners in (("hist-1", [{**owner, "uid": made["metadata"]["uid"]}]), ("forged", [])):
        manifest = job_manifest(name, bucket)
        manifest["metadata"] |= {
            "labels": {"ftspark.io/schedule": "hist"},
            "annotations": {"ftspark.io/due": "2026-01-01T00:00:00+00:00"},
            "ownerReferences": owners,
        }
        create_job(api_client, ns, manifest)
        objects.patch_namespaced_custom_object_status(
            API_GROUP, API_VERSION, ns, PLURAL, name, {"status": finished}
        )
    fleet.start()

    def names() -> list[str]:
        listed = objects.list_namespaced_custom_object(API_GROUP, API_VERSION, ns, PLURAL)
        return sorted(item["metadata"]["name"] for item in listed["items"])

    eventually(lambda: names() == ["forged"], timeout=30, what="its own finished run deleted, the other kept")


def test_stop_that_times_out_is_escalated_to_cancel(
    fleet: OperatorFleet, api_client: client.ApiClient, bucket: str
) -> None:
    ns = fleet.watch_namespace
    fleet.start()
    _start_running(api_client, ns, "stuck", bucket, stopTimeoutSeconds=2)
    asked = time.monotonic()
    _patch_spec(api_client, ns, "stuck", {"desiredState": "stopped"})
    eventually(
        lambda: pod_names(api_client, ns, "stuck") == [], timeout=30, what="the stuck driver is cancelled"
    )
    # Not before its own 2 s (the default is 120 s: the wait above would have failed).
    assert time.monotonic() - asked >= 2
    eventually(lambda: _phase(api_client, ns, "stuck") == "Stopped", timeout=30, what="Stopped")
    assert "StopTimedOut" in event_reasons(api_client, ns, "stuck")


def test_a_resume_from_too_old_a_checkpoint_waits_for_the_user(
    fleet: OperatorFleet, api_client: client.ApiClient, s3_server: S3Server, bucket: str
) -> None:
    ns, core = fleet.watch_namespace, client.CoreV1Api(api_client)
    fleet.start()
    limit = {"storage": f"s3://{bucket}/jobs/aged", "maxResumeAgeSeconds": 600}
    _start_running(api_client, ns, "aged", bucket, checkpoint=limit)
    # The driver committed batch 7 an hour ago (as it reports it, and as it is in storage).
    graph = configmap_stores(
        api_client, S3BlobStore(s3_server.client()), fleet.seal(api_client), results_namespace=fleet.namespace
    )
    key = JobKey(namespace=ns, name="aged")
    stored = graph.job_graphs.get(key)
    assert stored is not None
    location = f"{stored.checkpoint_location}/query-0"
    s3_server.client().put_object(
        Bucket=bucket, Key=location.removeprefix(f"s3://{bucket}/") + "/commits/7", Body=b"v1"
    )
    an_hour_ago = datetime.datetime.now(datetime.UTC) - datetime.timedelta(hours=1)
    pointer = CheckpointPointer(
        checkpoint_id=1, batch_id=7, location=location, completed_at=an_hour_ago, attempt=1
    )
    graph.checkpoints.add(key, pointer, Epoch("driver", 1, "aged-1-driver"), retained=3)
    _patch_spec(api_client, ns, "aged", {"desiredState": "stopped"})
    eventually(
        lambda: (core.read_namespaced_pod("aged-1-driver", ns).metadata.annotations or {}).get(
            "ftspark.io/control"
        ),
        timeout=30,
        what="the driver asked to stop",
    )
    set_driver_exited(core, ns, "aged-1-driver", 0, '{"stopped": true}')
    eventually(lambda: _phase(api_client, ns, "aged") == "Stopped", timeout=30, what="Stopped")

    _patch_spec(api_client, ns, "aged", {"desiredState": "running"})

    def too_old() -> dict[str, Any] | None:
        ready = condition(job_status(api_client, ns, "aged"), "Ready")
        return ready if ready.get("reason") == "StateTooOld" else None

    ready = eventually(too_old, timeout=30, what="Ready=False StateTooOld")
    assert ready["status"] == "False" and "maxResumeAgeSeconds" in ready["message"], ready
    assert "StateTooOld" in event_reasons(api_client, ns, "aged")
    # Not after a fixed delay: the pass that refused the resume is over (the generation that asked for it is
    # observed) before "no pods" says anything.
    eventually(lambda: _observed(api_client, ns, "aged"), timeout=30, what="the refusing pass done")
    assert pod_names(api_client, ns, "aged") == [], "nothing starts from state that old"
    _patch_spec(api_client, ns, "aged", {"checkpoint": {**limit, "maxResumeAgeSeconds": 0}})
    eventually(lambda: pod_names(api_client, ns, "aged") == ["aged-2-driver"], timeout=30, what="resumed")
    assert _env(core, ns, "aged-2-driver")["FTSPARK_RESTORE_BATCH"] == "7"


def test_spec_change_is_rolled_out_by_upgrade_mode(
    fleet: OperatorFleet, api_client: client.ApiClient, bucket: str
) -> None:
    ns, core = fleet.watch_namespace, client.CoreV1Api(api_client)
    fleet.start()
    for name, mode in (("keeps-state", "last-state"), ("drops-state", "stateless")):
        create_job(api_client, ns, job_manifest(name, bucket, upgradeMode=mode))
        eventually(partial(_only_driver, api_client, ns, name, 1), timeout=30, what="driver")
        set_driver_running(core, ns, f"{name}-1-driver")
        before = _env(core, ns, f"{name}-1-driver")["FTSPARK_CHECKPOINT_LOCATION"]
        # Edits that restart nothing, as the last column of docs/reference.md says: the operator takes them
        # in (it observes their generation) and attempt 1 runs on.
        untouched = {
            "restartStrategy": {"type": "fixed-delay", "fixedDelay": {"attempts": 7, "delaySeconds": 3}},
            "resultStore": {"ttlSeconds": 60},
            "checkpoint": {"retained": 9},
            "failureHistory": 5,
        }
        patched = _patch_spec(api_client, ns, name, untouched)
        observed = partial(
            lambda job, generation: job_status(api_client, ns, job).get("observedGeneration") == generation,
            name,
            patched,
        )
        eventually(observed, timeout=30, what="the edit observed")
        assert _only_driver(api_client, ns, name, 1), "an edit that restarts nothing restarted the job"
        assert job_status(api_client, ns, name)["phase"] == "Running", "no upgrade under way"
        _patch_spec(api_client, ns, name, {"arguments": ["--version", "2"]})
        eventually(partial(_only_driver, api_client, ns, name, 2), timeout=30, what="upgraded")
        after = _env(core, ns, f"{name}-2-driver")
        pod = core.read_namespaced_pod(f"{name}-2-driver", ns)
        assert pod.spec.containers[0].args[-2:] == ["--version", "2"]
        if mode == "last-state":
            assert after["FTSPARK_CHECKPOINT_LOCATION"] == before
            assert after["FTSPARK_RESTORE_FROM"] == "latest-checkpoint"
        else:
            assert after["FTSPARK_CHECKPOINT_LOCATION"] != before
            assert after["FTSPARK_RESTORE_FROM"] == "nothing"


def test_sigterm_hands_leadership_over_without_waiting_out_the_lease(
    fleet: OperatorFleet, api_client: client.ApiClient, bucket: str
) -> None:
    # A lease far longer than a retry period: the standby takes a released Lease at its next retry (1.1 s at
    # most), one not released only a lease duration (20 s) after the leader's last renew. Half of that tells
    # the two apart on a machine of any speed, and costs nothing when the Lease is released.
    fleet.lease_duration, fleet.renew_deadline = 20, 15.0
    ns = fleet.watch_namespace
    first, second = _leader_and_standby(fleet, api_client)
    eventually(lambda: fleet.probe(second, "/healthz") == (200, "following"), timeout=30, what="standby")
    stopped_at = time.monotonic()
    fleet.replicas[first].stop()  # SIGTERM: stop reconciling, release the Lease, exit 0
    eventually(
        lambda: fleet.leader(api_client) == second,
        timeout=2 * fleet.lease_duration,
        interval=0.05,
        what="hand-over",
    )
    handover = time.monotonic() - stopped_at
    create_job(api_client, ns, job_manifest("after-handover", bucket))
    eventually(lambda: pod_names(api_client, ns, "after-handover") == ["after-handover-1-driver"], timeout=30)
    print(f"SIGTERM -> standby holds the Lease in {handover:.2f} s")
    assert handover < fleet.lease_duration / 2, "the standby waited the lease out: it was not released"


def test_driver_service_account_may_run_spark_and_nothing_more(
    fleet: OperatorFleet, control_plane: ControlPlane, api_client: client.ApiClient, bucket: str
) -> None:
    ns, core = fleet.watch_namespace, client.CoreV1Api(api_client)
    fleet.start()
    create_job(api_client, ns, job_manifest("rbac", bucket))
    eventually(lambda: pod_names(api_client, ns, "rbac") == ["rbac-1-driver"], timeout=30, what="driver")
    assert core.read_namespaced_pod("rbac-1-driver", ns).spec.service_account_name == "ftspark-driver"
    driver = config.new_client_from_config(
        config_file=str(control_plane.kubeconfig_for_service_account(ns, "ftspark-driver"))
    )
    driver_core = client.CoreV1Api(driver)
    executor = client.V1Pod(
        metadata=client.V1ObjectMeta(name="rbac-1-exec-1"),
        spec=client.V1PodSpec(containers=[client.V1Container(name="executor", image="x")]),
    )
    driver_core.create_namespaced_pod(ns, executor)  # Spark creates its executors
    client.CoordinationV1Api(driver).create_namespaced_lease(
        ns, client.V1Lease(metadata=client.V1ObjectMeta(name="rbac-driver"))
    )  # the runtime's self-fencing Lease
    driver_core.patch_namespaced_pod(
        "rbac-1-driver", ns, {"metadata": {"annotations": {"ftspark.io/rollbacks": "[]"}}}
    )  # the runtime answers on its pod
    exposed = client.V1Service(
        metadata=client.V1ObjectMeta(name="exposed"),
        spec=client.V1ServiceSpec(
            ports=[client.V1ServicePort(port=7078)], external_i_ps=["198.51.100.7"], selector={"a": "b"}
        ),
    )
    forbidden: list[Callable[[], object]] = [
        partial(driver_core.read_namespaced_secret, "rbac-1-driver-rpc", ns),  # even its own RPC secret
        partial(driver_core.list_namespaced_secret, ns),
        partial(driver_core.create_namespaced_service, ns, exposed),
        partial(driver_core.delete_collection_namespaced_pod, ns),
        partial(driver_core.delete_namespaced_config_map, "rbac-jobgraph", ns),
        partial(driver_core.create_namespaced_config_map, ns, {"metadata": {"name": "planted"}}),
        partial(driver_core.list_namespaced_pod, fleet.namespace),
        partial(client.RbacAuthorizationV1Api(driver).list_namespaced_role, ns),
    ]
    for attempt in forbidden:
        with pytest.raises(client.ApiException) as denied:
            attempt()
        assert denied.value.status == 403


def test_result_outlives_the_job_until_its_retention_and_ttl_after_finished_deletes_the_job(
    fleet: OperatorFleet, api_client: client.ApiClient, bucket: str
) -> None:
    ns, core = fleet.watch_namespace, client.CoreV1Api(api_client)
    objects = client.CustomObjectsApi(api_client)
    leader = fleet.start()
    spec = {"resultStore": {"ttlSeconds": 2}, "ttlSecondsAfterFinished": 8}
    create_job(api_client, ns, job_manifest("short", bucket, **spec))
    eventually(lambda: pod_names(api_client, ns, "short") == ["short-1-driver"], timeout=30, what="driver")
    set_driver_exited(core, ns, "short-1-driver", 0, "done")
    eventually(lambda: _phase(api_client, ns, "short") == "Succeeded", timeout=30, what="Succeeded")
    past_retention = time.monotonic() + 2
    uid = objects.get_namespaced_custom_object(API_GROUP, API_VERSION, ns, PLURAL, "short")["metadata"]["uid"]

    def result_kept() -> bool:
        names = {cm.metadata.name for cm in core.list_namespaced_config_map(fleet.namespace).items}
        return f"ftspark-result-{uid}" in names

    def expiry_sweeps() -> float:
        page = fleet.probe(leader, "/metrics")[1]
        return _metric(page, 'ftspark_housekeeping_steps_total{outcome="ok",step="expire_results"}') or 0.0

    # A deletion decided on an older read is refused by the API server (the job changed since): an edit
    # between the operator's read and its delete keeps the job.
    stale = KubeJobs(api_client).get(JobKey(namespace=ns, name="short"))
    assert stale is not None
    objects.patch_namespaced_custom_object(
        API_GROUP, API_VERSION, ns, PLURAL, "short", {"metadata": {"labels": {"edited": "yes"}}}
    )
    KubeJobs(api_client).delete_unchanged(stale)
    assert _phase(api_client, ns, "short") == "Succeeded", "not deleted: it changed since it was read"

    time.sleep(max(0.0, past_retention - time.monotonic()))
    swept = expiry_sweeps()
    eventually(lambda: expiry_sweeps() > swept, timeout=30, what="a retention sweep past the retention")
    assert _phase(api_client, ns, "short") == "Succeeded", "within its ttlSecondsAfterFinished"
    assert result_kept(), "past the retention, but the job still exists: its result stays"
    eventually(
        lambda: not objects.list_namespaced_custom_object(API_GROUP, API_VERSION, ns, PLURAL)["items"],
        timeout=30,
        what="the job deleted by its ttlSecondsAfterFinished",
    )
    reasons = [e.reason for e in core.list_namespaced_event(ns).items if e.involved_object.name == "short"]
    assert "FinishedJobDeleted" in reasons
    eventually(lambda: not result_kept(), timeout=30, what="the orphaned result expires")


def _report_checkpoints(
    api: client.ApiClient, s3: S3Server, fleet: OperatorFleet, job: str, location: str, batches: list[int]
) -> None:
    """What a driver (attempt 1) reports: pointers to committed batches, with ids from the job's counter
    (0, 1, ...: not the batch ids)."""
    stores = configmap_stores(
        api, S3BlobStore(s3.client()), fleet.seal(api), results_namespace=fleet.namespace
    )
    key = JobKey(namespace=fleet.watch_namespace, name=job)
    for batch in batches:
        report_checkpoint(stores.checkpoints, key, location, batch)


def test_restart_restores_the_newest_checkpoint_that_is_really_there(
    fleet: OperatorFleet, api_client: client.ApiClient, s3_server: S3Server, bucket: str
) -> None:
    ns, core, s3 = fleet.watch_namespace, client.CoreV1Api(api_client), s3_server.client()
    fleet.start()
    create_job(api_client, ns, job_manifest("restore", bucket))
    eventually(
        lambda: pod_names(api_client, ns, "restore") == ["restore-1-driver"], timeout=30, what="driver"
    )
    set_driver_running(core, ns, "restore-1-driver")
    location = _env(core, ns, "restore-1-driver")["FTSPARK_CHECKPOINT_LOCATION"]
    prefix = location.removeprefix(f"s3://{bucket}/")
    for batch in (4, 5):  # batch 6's commit never reached S3
        s3.put_object(Bucket=bucket, Key=f"{prefix}/commits/{batch}", Body=b"v1\n{}")
    _report_checkpoints(api_client, s3_server, fleet, "restore", location, [4, 5, 6])

    def newest_pointer() -> dict[str, Any] | None:
        shown: dict[str, Any] = job_status(api_client, ns, "restore").get("latestCheckpoint", {})
        return shown if shown.get("id") == 2 else None

    newest = eventually(newest_pointer, timeout=30, what="the newest pointer shows in status")
    assert (newest["id"], newest["batchId"], newest["location"]) == (2, 6, location)

    set_driver_exited(core, ns, "restore-1-driver", 137, "killed")
    eventually(
        lambda: pod_names(api_client, ns, "restore") == ["restore-2-driver"], timeout=30, what="attempt 2"
    )
    env = _env(core, ns, "restore-2-driver")
    assert (env["FTSPARK_RESTORE_FROM"], env["FTSPARK_RESTORE_BATCH"]) == ("latest-checkpoint", "5")
    assert "CheckpointSkipped" in event_reasons(api_client, ns, "restore")


def test_the_operators_own_s3_unreachable_is_said_on_the_job_not_only_in_its_log(
    fleet: OperatorFleet, api_client: client.ApiClient, s3_server: S3Server, bucket: str
) -> None:
    """A wrong S3 endpoint in the operator's own settings (not the job's) shows at the first restart, when
    the operator looks for the checkpoint to restore: Reconciled=False with botocore's words and an Event,
    and no next driver until it can look."""
    ns, core = fleet.watch_namespace, client.CoreV1Api(api_client)
    fleet.s3_endpoint = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    fleet.start()
    _start_running(api_client, ns, "blind", bucket)
    location = _env(core, ns, "blind-1-driver")["FTSPARK_CHECKPOINT_LOCATION"]
    _report_checkpoints(api_client, s3_server, fleet, "blind", location, [3])
    set_driver_exited(core, ns, "blind-1-driver", 137, "killed")
    said = eventually(
        lambda: condition(job_status(api_client, ns, "blind"), "Reconciled"), timeout=60, what="Reconciled"
    )
    assert (said["status"], said["reason"]) == ("False", "OperatorError"), said
    assert said["message"].startswith("the operator's S3 (its endpoint and credentials, not the job's)"), said
    assert fleet.s3_endpoint in said["message"], "botocore's words name the endpoint"
    assert "OperatorError" in event_reasons(api_client, ns, "blind")
    assert pod_names(api_client, ns, "blind") == [], "no next attempt without knowing what to restore"


def test_no_usable_checkpoint_asks_for_a_manual_restore_instead_of_starting_empty(
    fleet: OperatorFleet, api_client: client.ApiClient, s3_server: S3Server, bucket: str
) -> None:
    ns, core = fleet.watch_namespace, client.CoreV1Api(api_client)
    fleet.start()
    create_job(api_client, ns, job_manifest("lost", bucket))
    eventually(lambda: pod_names(api_client, ns, "lost") == ["lost-1-driver"], timeout=30, what="driver")
    location = _env(core, ns, "lost-1-driver")["FTSPARK_CHECKPOINT_LOCATION"]
    _report_checkpoints(api_client, s3_server, fleet, "lost", location, [1, 2])  # nothing of them in S3
    set_driver_exited(core, ns, "lost-1-driver", 1, "crashed")
    eventually(lambda: _phase(api_client, ns, "lost") == "Failed", timeout=30, what="Failed")
    assert "ManualRestoreRequired" in event_reasons(api_client, ns, "lost")
    assert "manual restore required" in condition(job_status(api_client, ns, "lost"), "Ready")["message"]
    # Not after a fixed delay: the pass that gave up is over (its generation observed) before "no pods" says
    # anything.
    eventually(lambda: _observed(api_client, ns, "lost"), timeout=30, what="the failing pass done")
    assert pod_names(api_client, ns, "lost") == []

    _patch_spec(
        api_client, ns, "lost", {"upgradeMode": "stateless"}
    )  # the user accepts starting without state
    eventually(lambda: pod_names(api_client, ns, "lost") == ["lost-2-driver"], timeout=30, what="restarted")
    assert _env(core, ns, "lost-2-driver")["FTSPARK_CHECKPOINT_LOCATION"] != location


def test_operator_restart_adopts_the_running_driver_and_a_lost_driver_is_replaced(
    fleet: OperatorFleet, api_client: client.ApiClient, bucket: str
) -> None:
    ns, core = fleet.watch_namespace, client.CoreV1Api(api_client)
    first = fleet.start()
    _start_running(api_client, ns, "adopted", bucket)

    fleet.replicas[first].kill()
    second = fleet.start()
    eventually(lambda: fleet.leader(api_client) == second, timeout=30, what="the new operator leads")

    def passes() -> int:
        return sum(value for _, value in fleet.counters(second, "ftspark_reconcile_duration_seconds"))

    # Not after a fixed delay: the new leader's pass over the job (its only one) is over.
    eventually(passes, timeout=30, what="the new leader's pass over the job")
    assert pod_names(api_client, ns, "adopted") == ["adopted-1-driver"], "no duplicate submission"
    assert job_status(api_client, ns, "adopted")["attempt"] == 1

    core.delete_namespaced_pod("adopted-1-driver", ns)  # e.g. a node drain: the pod is simply gone
    eventually(
        lambda: pod_names(api_client, ns, "adopted") == ["adopted-2-driver"], timeout=30, what="replaced"
    )
    assert job_status(api_client, ns, "adopted")["lastFailure"]["reason"] == "DriverLost"


def test_image_pull_errors_show_in_the_status(
    fleet: OperatorFleet, api_client: client.ApiClient, bucket: str
) -> None:
    ns, core = fleet.watch_namespace, client.CoreV1Api(api_client)
    fleet.start()
    create_job(api_client, ns, job_manifest("typo", bucket, image="ftspark/no-such-image:0"))
    eventually(lambda: pod_names(api_client, ns, "typo") == ["typo-1-driver"], timeout=30, what="driver")
    waiting = {"reason": "ImagePullBackOff", "message": 'Back-off pulling image "ftspark/no-such-image:0"'}
    core.patch_namespaced_pod_status(
        "typo-1-driver",
        ns,
        {
            "status": {
                "phase": "Pending",
                "containerStatuses": [
                    {
                        "name": "driver",
                        "image": "ftspark/no-such-image:0",
                        "imageID": "",
                        "ready": False,
                        "restartCount": 0,
                        "state": {"waiting": waiting},
                    }
                ],
            }
        },
    )

    def degraded() -> dict[str, Any] | None:
        found = condition(job_status(api_client, ns, "typo"), "Degraded")
        return found if found.get("reason") == "ImagePullBackOff" else None

    shown = eventually(degraded, timeout=30, what="Degraded=ImagePullBackOff")
    assert shown["status"] == "True"
    assert "no-such-image" in shown["message"]


def _metric(text: str, name: str) -> float | None:
    """The value of one sample (name with its labels, as exposed) in a /metrics page."""
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.rsplit(" ", 1)[1])
    return None


def test_metrics_and_probes(
    fleet: OperatorFleet, api_client: client.ApiClient, s3_server: S3Server, bucket: str
) -> None:
    ns = fleet.watch_namespace
    first, second = _leader_and_standby(fleet, api_client)
    eventually(lambda: fleet.probe(second, "/readyz")[0] == 200, timeout=30, what="standby serving")
    _start_running(api_client, ns, "observed", bucket)
    _report_checkpoints(api_client, s3_server, fleet, "observed", f"s3://{bucket}/observed", [3, 7])
    labels = f'{{job="observed",namespace="{ns}"}}'
    eventually(
        lambda: _metric(fleet.probe(first, "/metrics")[1], f"ftspark_job_last_checkpoint_id{labels}") == 1,
        timeout=30,
        what="the newest checkpoint id in the metrics",
    )
    age = _metric(fleet.probe(first, "/metrics")[1], f"ftspark_job_checkpoint_age_seconds{labels}")
    assert age is not None and 0 <= age < 30

    leader_page = fleet.probe(first, "/metrics")[1]
    assert _metric(leader_page, "ftspark_leader") == 1
    assert _metric(leader_page, 'ftspark_jobs{phase="Running"}') == 1
    assert (_metric(leader_page, 'ftspark_reconcile_duration_seconds_count{outcome="ok"}') or 0) >= 2
    assert _metric(leader_page, f'ftspark_job_restarts{{job="observed",namespace="{ns}"}}') == 0
    # What the chart's alert rules read: the job's phase and its conditions, one series each.
    assert _metric(leader_page, f'ftspark_job_phase{{job="observed",namespace="{ns}",phase="Running"}}') == 1
    ready = re.findall(
        rf'ftspark_job_condition{{job="observed",namespace="{ns}",reason="\w+",type="Ready"}} (\S+)',
        leader_page,
    )
    assert ready == ["1.0"], leader_page
    assert _metric(fleet.probe(second, "/metrics")[1], "ftspark_leader") == 0
    status, body = fleet.probe(first, "/healthz")
    assert status == 200
    assert body.startswith("leading, renewed")
    assert fleet.probe(second, "/healthz") == (200, "following")

    fleet.replicas[first].kill()
    eventually(lambda: _metric(fleet.probe(second, "/metrics")[1], "ftspark_leader") == 1, timeout=30)
    gap = _metric(fleet.probe(second, "/metrics")[1], "ftspark_failover_duration_seconds")
    assert gap is not None
    assert fleet.lease_duration <= gap < _takeover_bound(fleet)


def test_cluster_wide_operator_manages_jobs_in_any_namespace(
    fleet: OperatorFleet, api_client: client.ApiClient, bucket: str
) -> None:
    cluster_wide = OperatorFleet(fleet.control_plane, fleet.s3, fleet.namespace, "", fleet.log_dir)
    cluster_wide.start()
    try:
        create_job(api_client, fleet.watch_namespace, job_manifest("anywhere", bucket))
        eventually(
            lambda: pod_names(api_client, fleet.watch_namespace, "anywhere") == ["anywhere-1-driver"],
            timeout=30,
            what=lambda: f"cluster-wide reconcile\n{cluster_wide.logs()}",
        )
    finally:
        cluster_wide.stop_all()


def test_executor_pod_template_is_delivered_to_spark(
    fleet: OperatorFleet, api_client: client.ApiClient, bucket: str
) -> None:
    ns, core = fleet.watch_namespace, client.CoreV1Api(api_client)
    fleet.start()
    template = {"spec": {"tolerations": [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}]}}
    create_job(api_client, ns, job_manifest("templated", bucket, executor={"podTemplate": template}))
    eventually(
        lambda: pod_names(api_client, ns, "templated") == ["templated-1-driver"], timeout=30, what="driver"
    )
    stored = _executor_template(core, ns, "templated-1-driver")
    assert stored["spec"]["tolerations"][0]["key"] == "spot"
    pod = core.read_namespaced_pod("templated-1-driver", ns)
    assert pod.spec.volumes[0].secret.secret_name == attempt_secret_name("templated-1-driver")
    conf = _env(core, ns, "templated-1-driver")["FTSPARK_SPARK_CONF"]
    assert '"spark.kubernetes.executor.podTemplateFile": "/etc/ftspark/executor/pod-template.json"' in conf


def _executor_template(core: client.CoreV1Api, namespace: str, driver: str) -> dict[str, Any]:
    """The executor pod template the attempt's Secret holds for Spark."""
    secret = core.read_namespaced_secret(attempt_secret_name(driver), namespace)
    template: dict[str, Any] = json.loads(base64.b64decode(secret.data["pod-template.json"]))
    return template


def test_savepoint_nonce_round_trip_through_the_driver_pod(
    fleet: OperatorFleet, api_client: client.ApiClient, bucket: str
) -> None:
    ns, core = fleet.watch_namespace, client.CoreV1Api(api_client)
    fleet.start()
    _start_running(api_client, ns, "snap", bucket)

    _patch_spec(api_client, ns, "snap", {"savepointTriggerNonce": 1})
    uid = client.CustomObjectsApi(api_client).get_namespaced_custom_object(
        API_GROUP, API_VERSION, ns, PLURAL, "snap"
    )["metadata"]["uid"]
    savepoint_id = job_savepoint_id("1", uid, 1)  # the job's uid in it: no other job names its folder

    def asked() -> bool:
        annotations = core.read_namespaced_pod("snap-1-driver", ns).metadata.annotations or {}
        return bool(annotations.get("ftspark.io/control", "").startswith(f"savepoint@{savepoint_id};"))

    eventually(asked, timeout=30, what=f"the driver is asked for savepoint {savepoint_id}")
    # With the leader's term, the one its acquisition raised the term floor to.
    floor = core.read_namespaced_config_map(term_floor_name("ftspark-operator"), fleet.namespace).data["term"]
    annotations = core.read_namespaced_pod("snap-1-driver", ns).metadata.annotations
    assert ControlRequest.parse(annotations["ftspark.io/control"]) == ControlRequest(
        "savepoint", savepoint_id, int(floor)
    )
    location = f"s3://{bucket}/jobs/snap/savepoints/{savepoint_id}"
    answer = json.dumps({"id": savepoint_id, "location": location, "batches": {"counts": 12}})
    core.patch_namespaced_pod(
        "snap-1-driver", ns, {"metadata": {"annotations": {"ftspark.io/savepoint": answer}}}
    )

    def recorded() -> list[dict[str, Any]]:
        savepoints: list[dict[str, Any]] = job_status(api_client, ns, "snap").get("savepoints", [])
        return savepoints

    taken = eventually(recorded, timeout=30, what="the savepoint in status")[-1]
    assert (taken["id"], taken["location"], taken["batchId"], taken["triggerNonce"]) == (
        savepoint_id,
        location,
        12,
        1,
    )
    assert "SavepointCompleted" in event_reasons(api_client, ns, "snap")
    assert job_status(api_client, ns, "snap")["handledSavepointNonce"] == 1


def _bound_claim_uid(core: client.CoreV1Api, namespace: str, claim: str, volume: str) -> str:
    """The claim's uid once it is bound to that volume; "" before (or while it does not exist)."""
    try:
        found = core.read_namespaced_persistent_volume_claim(claim, namespace)
    except client.ApiException as error:
        if error.status == 404:
            return ""
        raise
    bound = found.status.phase == "Bound" and found.spec.volume_name == volume
    return str(found.metadata.uid) if bound else ""


def test_local_recovery_sends_the_next_attempts_executors_back_to_their_nodes(
    cluster: ControlPlane, fleet: OperatorFleet, api_client: client.ApiClient, bucket: str
) -> None:
    """Placement, the job's volume and key; and a claim deleted by hand while the job lives (which releases
    the pre-bound volume: it would bind no claim again) made anew by the next attempt on the same volume,
    bound by the PersistentVolume controller."""
    ns, core = fleet.watch_namespace, client.CoreV1Api(api_client)
    # A directory other than localRecovery's default is the job's own hostPath: the namespace must allow it.
    core.patch_namespace(ns, {"metadata": {"labels": {f"{NAMESPACE_LABEL_PREFIX}hostPath": "true"}}})
    fleet.start()
    _start_running(
        api_client, ns, "local", bucket, localRecovery={"enabled": True, "hostPath": "/mnt/ftspark"}
    )
    uid = client.CustomObjectsApi(api_client).get_namespaced_custom_object(
        API_GROUP, API_VERSION, ns, PLURAL, "local"
    )["metadata"]["uid"]
    for index, node in enumerate(
        ("node-a", "node-b"), start=1
    ):  # what Spark's allocator creates, as bound pods
        labels = {
            "spark-app-selector": f"ftspark-{uid[:8]}-1",
            "spark-role": "executor",
            "spark-exec-id": str(index),
        }
        core.create_namespaced_pod(
            ns,
            client.V1Pod(
                metadata=client.V1ObjectMeta(name=f"local-1-exec-{index}", labels=labels),
                spec=client.V1PodSpec(
                    node_name=node, containers=[client.V1Container(name="executor", image="x")]
                ),
            ),
        )
    # Any change of the driver pod wakes the job (in a real run, its checkpoint reports do): a pass then
    # sees both executors. (The same status again would be no change: no event.)
    core.patch_namespaced_pod("local-1-driver", ns, {"metadata": {"annotations": {"test/wake": "executors"}}})

    def placement() -> list[str] | None:
        nodes: list[str] | None = (job_status(api_client, ns, "local").get("placement") or {}).get("nodes")
        return nodes

    eventually(
        lambda: placement() == ["node-a", "node-b"], timeout=30, what=lambda: f"placement: {placement()}"
    )
    claim_name, volume_name = f"local-local-state-{uid[:8]}", f"ftspark-local-state-{uid}"
    claim_bound = partial(_bound_claim_uid, core, ns, claim_name, volume_name)

    def volume_phase() -> str:
        return str(core.read_persistent_volume(volume_name).status.phase)

    first_claim = eventually(claim_bound, timeout=60, what=lambda: f"the claim bound ({volume_phase()})")
    core.delete_namespaced_persistent_volume_claim(claim_name, ns)
    eventually(lambda: volume_phase() == "Released", timeout=60, what=lambda: f"released: {volume_phase()}")

    set_driver_exited(core, ns, "local-1-driver", 137, "killed")
    eventually(partial(_only_driver, api_client, ns, "local", 2), timeout=30, what="attempt 2")
    second_claim = eventually(claim_bound, timeout=60, what=lambda: f"bound again ({volume_phase()})")
    assert second_claim != first_claim, "a new claim, on the same volume"
    assert core.read_persistent_volume(volume_name).spec.claim_ref.uid == second_claim
    selector = f"{JOB_LABEL}=local,{JOB_NAMESPACE_LABEL}={ns}"
    assert [v.metadata.name for v in core.list_persistent_volume(label_selector=selector).items] == [
        volume_name
    ], "no second volume"
    template = _executor_template(core, ns, "local-2-driver")
    preference = template["spec"]["affinity"]["nodeAffinity"][
        "preferredDuringSchedulingIgnoredDuringExecution"
    ][0]
    assert preference["preference"]["matchExpressions"][0]["values"] == ["node-a", "node-b"]
    # The job's node directory, through its claim on the volume made for it (no hostPath in the pod).
    volumes = template["spec"]["volumes"]
    assert not [v for v in volumes if "hostPath" in v]
    [claim_name] = [v["persistentVolumeClaim"]["claimName"] for v in volumes if "persistentVolumeClaim" in v]
    claim = core.read_namespaced_persistent_volume_claim(claim_name, ns)
    assert [o.uid for o in claim.metadata.owner_references] == [uid]
    volume = core.read_persistent_volume(claim.spec.volume_name)
    assert volume.spec.host_path.path == f"/mnt/ftspark/jobs/{ns}/{uid}"
    assert (volume.spec.claim_ref.namespace, volume.spec.claim_ref.name) == (ns, claim_name)
    # One key per job, made with its first attempt and owned by the job; every attempt mounts it.
    [secret] = [v["secret"]["secretName"] for v in volumes if "secret" in v]
    key = core.read_namespaced_secret(secret, ns)
    assert [o.uid for o in key.metadata.owner_references] == [uid]
    assert len(base64.b64decode(key.data["key"])) == 32

    # Cluster-scoped, the volume does not go with the job: the leader's sweep deletes it once the job is gone.
    client.CustomObjectsApi(api_client).delete_namespaced_custom_object(
        API_GROUP, API_VERSION, ns, PLURAL, "local"
    )

    def volume_deleted() -> bool:
        try:
            return bool(core.read_persistent_volume(volume.metadata.name).metadata.deletion_timestamp)
        except client.ApiException as error:
            return bool(error.status == 404)

    eventually(volume_deleted, timeout=30, what=lambda: f"the job's volume deleted\n{fleet.logs()}")


def test_local_recovery_refused_by_pod_security_says_which_level_it_needs(
    fleet: OperatorFleet, api_client: client.ApiClient, bucket: str
) -> None:
    """Spark creates the executors, not the operator: one is tried (dry run) before the attempt. Its init
    step runs as root, which "restricted" refuses."""
    ns, core = fleet.watch_namespace, client.CoreV1Api(api_client)
    core.patch_namespace(ns, {"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "restricted"}}})
    fleet.start()
    create_job(api_client, ns, job_manifest("hostpath", bucket, localRecovery={"enabled": True}))

    ready = eventually(
        lambda: invalid_spec(api_client, ns, "hostpath"),
        timeout=30,
        what=lambda: f"InvalidSpec condition\n{fleet.logs()}",
    )
    assert "violates PodSecurity" in ready["message"]
    assert "pod-security.kubernetes.io/enforce=baseline" in ready["message"]
    assert "InvalidSpec" in event_reasons(api_client, ns, "hostpath")
    assert pod_names(api_client, ns, "hostpath") == []
    # Nothing of it was made: no volume, no claim.
    selector = f"{JOB_LABEL}=hostpath,{JOB_NAMESPACE_LABEL}={ns}"
    assert core.list_persistent_volume(label_selector=selector).items == []
    assert core.list_namespaced_persistent_volume_claim(ns).items == []


def test_a_full_resource_quota_is_said_in_the_status_and_the_attempt_starts_once_it_has_room(
    fleet: OperatorFleet, api_client: client.ApiClient, bucket: str
) -> None:
    """The API server's "exceeded quota" reaches the job's status and Events (not only the operator's log),
    nothing of the attempt is left half made, and the attempt starts by itself once the quota has room."""
    ns, core = fleet.watch_namespace, client.CoreV1Api(api_client)
    quota = client.V1ResourceQuota(
        metadata=client.V1ObjectMeta(name="no-pods"), spec=client.V1ResourceQuotaSpec(hard={"pods": "0"})
    )
    core.create_namespaced_resource_quota(ns, quota)
    # What the quota controller would report (this API server runs none): the admission reads the status.
    core.patch_namespaced_resource_quota_status(
        "no-pods", ns, {"status": {"hard": {"pods": "0"}, "used": {"pods": "0"}}}
    )
    fleet.start()
    create_job(api_client, ns, job_manifest("quota", bucket))

    ready = eventually(
        lambda: (found := condition(job_status(api_client, ns, "quota"), "Ready")).get("reason")
        == "QuotaExceeded"
        and found,
        timeout=30,
        what=lambda: f"QuotaExceeded condition\n{fleet.logs()}",
    )
    assert "exceeded quota: no-pods" in ready["message"], ready
    assert "QuotaExceeded" in event_reasons(api_client, ns, "quota")
    assert pod_names(api_client, ns, "quota") == []
    secrets = [secret.metadata.name for secret in core.list_namespaced_secret(ns).items]
    assert not [name for name in secrets if name.startswith("quota-1")], f"left half made: {secrets}"
    status = job_status(api_client, ns, "quota")
    assert (status["phase"], status["restarts"]["count"]) == ("Pending", 0), "waiting for room is no failure"

    core.delete_namespaced_resource_quota("no-pods", ns)
    eventually(
        lambda: pod_names(api_client, ns, "quota") == ["quota-1-driver"],
        timeout=30,
        what="the driver pod once the quota is gone",
    )
    eventually(
        lambda: condition(job_status(api_client, ns, "quota"), "Ready").get("reason") == "Submitted",
        timeout=30,
        what=lambda: f"the quota's reason gone: {job_status(api_client, ns, 'quota')}",
    )


def test_a_limit_range_refusing_the_driver_pod_is_said_as_an_invalid_spec(
    fleet: OperatorFleet, api_client: client.ApiClient, bucket: str
) -> None:
    """An admission's 403 on what the spec made (here a LimitRange) is the spec's to change: InvalidSpec with
    the API server's words, not a reconcile failing on every pass with them only in the operator's log."""
    ns, core = fleet.watch_namespace, client.CoreV1Api(api_client)
    limits = client.V1LimitRangeItem(type="Container", max={"memory": "100Mi"})
    core.create_namespaced_limit_range(
        ns,
        client.V1LimitRange(
            metadata=client.V1ObjectMeta(name="small"), spec=client.V1LimitRangeSpec([limits])
        ),
    )
    fleet.start()
    create_job(api_client, ns, job_manifest("big", bucket))
    ready = eventually(
        lambda: invalid_spec(api_client, ns, "big"), timeout=30, what=lambda: f"InvalidSpec\n{fleet.logs()}"
    )
    assert "maximum memory usage per Container is 100Mi" in ready["message"], ready
    assert "InvalidSpec" in event_reasons(api_client, ns, "big")
    assert pod_names(api_client, ns, "big") == []


def _ha_config_maps(core: client.CoreV1Api, namespace: str, job: str) -> list[str]:
    """The job's HA records (not the executor templates of its attempts, which carry the job label too)."""
    selector = f"ftspark.io/job={job},{STORE_LABEL}"
    found = core.list_namespaced_config_map(namespace, label_selector=selector).items
    return sorted(c.metadata.name for c in found)


def _to_second_attempt_with_checkpoints(
    api: client.ApiClient, s3: S3Server, fleet: OperatorFleet, bucket: str, name: str
) -> None:
    core = client.CoreV1Api(api)
    _start_running(api, fleet.watch_namespace, name, bucket)
    location = _env(core, fleet.watch_namespace, f"{name}-1-driver")["FTSPARK_CHECKPOINT_LOCATION"]
    for batch in (1, 2):
        s3.client().put_object(
            Bucket=bucket, Key=f"{location.removeprefix(f's3://{bucket}/')}/commits/{batch}", Body=b"v1\n{}"
        )
    _report_checkpoints(api, s3, fleet, name, location, [1, 2])
    set_driver_exited(core, fleet.watch_namespace, f"{name}-1-driver", 137, "killed")
    eventually(partial(_only_driver, api, fleet.watch_namespace, name, 2), timeout=30, what="attempt 2")


def test_a_job_recreated_under_the_same_name_starts_afresh(
    cluster: ControlPlane,
    fleet: OperatorFleet,
    api_client: client.ApiClient,
    s3_server: S3Server,
    bucket: str,
) -> None:
    """Deleting a job deletes its HA data; a new job of the same name never inherits pointers or fences."""
    ns, core, jobs = fleet.watch_namespace, client.CoreV1Api(api_client), client.CustomObjectsApi(api_client)
    key = JobKey(namespace=ns, name="again")
    stores = configmap_stores(
        api_client, S3BlobStore(s3_server.client()), fleet.seal(api_client), results_namespace=fleet.namespace
    )
    first = fleet.start()
    _to_second_attempt_with_checkpoints(api_client, s3_server, fleet, bucket, "again")
    assert _ha_config_maps(core, ns, "again") == ["again-checkpoints", "again-jobgraph"]

    # Deleted while the leader watches: its HA data goes, and its driver cannot bring its pointers back.
    jobs.delete_namespaced_custom_object(API_GROUP, API_VERSION, ns, PLURAL, "again")
    eventually(lambda: _ha_config_maps(core, ns, "again") == [], timeout=30, what="HA data deleted")
    now = datetime.datetime.now(datetime.UTC)
    late = CheckpointPointer(checkpoint_id=3, batch_id=3, location="s3://x", completed_at=now, attempt=2)
    with pytest.raises(RetiredRecordError):
        stores.checkpoints.add(key, late, Epoch("driver", 2, "again-2-driver"), retained=3)
    assert _ha_config_maps(core, ns, "again") == []
    eventually(lambda: pod_names(api_client, ns, "again") == [], timeout=60, what="pods garbage-collected")

    # Deleted and re-created while no leader watches: the new job (a new uid) finds the old one's data.
    _to_second_attempt_with_checkpoints(api_client, s3_server, fleet, bucket, "again")
    fleet.replicas[first].kill()
    jobs.delete_namespaced_custom_object(API_GROUP, API_VERSION, ns, PLURAL, "again")
    eventually(lambda: pod_names(api_client, ns, "again") == [], timeout=60, what="pods garbage-collected")
    assert _ha_config_maps(core, ns, "again") == ["again-checkpoints", "again-jobgraph"]
    create_job(api_client, ns, job_manifest("again", bucket))
    uid = jobs.get_namespaced_custom_object(API_GROUP, API_VERSION, ns, PLURAL, "again")["metadata"]["uid"]
    fleet.start()

    eventually(partial(_only_driver, api_client, ns, "again", 1), timeout=30, what="a first attempt")
    graph = stores.job_graphs.get(key)
    assert graph is not None and graph.uid == uid
    assert stores.checkpoints.pointers(key) == []
    # The pod is created before the status that records it is written.
    status = eventually(
        lambda: next((s for s in [job_status(api_client, ns, "again")] if s.get("attempt")), None),
        timeout=30,
        what="the new job's status",
    )
    assert status["attempt"] == 1
    assert "latestCheckpoint" not in status
    assert uid[:8] in _env(core, ns, "again-1-driver")["FTSPARK_CHECKPOINT_LOCATION"]


def _pass_after_a_touch(
    fleet: OperatorFleet, leader: str, api: client.ApiClient, namespace: str, job: str
) -> None:
    """Touch the job and wait for a pass after it: what it decides on what is there now has been decided
    (not after a fixed delay)."""
    passes = sum(value for _, value in fleet.counters(leader, "ftspark_reconcile_duration_seconds"))
    client.CustomObjectsApi(api).patch_namespaced_custom_object(
        API_GROUP, API_VERSION, namespace, PLURAL, job, {"metadata": {"annotations": {"test/touched": "1"}}}
    )
    eventually(
        lambda: sum(v for _, v in fleet.counters(leader, "ftspark_reconcile_duration_seconds")) > passes,
        timeout=30,
        what=f"a pass of {job} after a touch",
    )


class NodeLease:
    """A Lease renewed every 0.3 s while `speaking` is set: a node's in kube-node-lease, as its kubelet renews
    it, or (holder given) a driver's, as its runtime does."""

    def __init__(
        self,
        api: client.ApiClient,
        node: str,
        namespace: str = NODE_LEASE_NAMESPACE,
        holder: str = "",
        duration: int = 40,
    ) -> None:
        self.node, self._namespace, self._leases = node, namespace, client.CoordinationV1Api(api)
        self.speaking, self._stop = threading.Event(), threading.Event()
        self._leases.create_namespaced_lease(
            namespace,
            client.V1Lease(
                metadata=client.V1ObjectMeta(name=node),
                spec=client.V1LeaseSpec(
                    holder_identity=holder or node, lease_duration_seconds=duration, renew_time=_now()
                ),
            ),
        )
        self.speaking.set()
        self._thread = threading.Thread(target=self._renew, daemon=True)
        self._thread.start()

    def _renew(self) -> None:
        while not self._stop.wait(0.3):
            if self.speaking.is_set():
                body = {"spec": {"renewTime": _now().isoformat()}}
                self._leases.patch_namespaced_lease(self.node, self._namespace, body)

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self._leases.delete_namespaced_lease(self.node, self._namespace)


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def test_a_driver_whose_node_falls_silent_gets_a_standby_promoted_on_the_node_controllers_verdict(
    fleet: OperatorFleet, api_client: client.ApiClient, s3_server: S3Server, bucket: str
) -> None:
    """The job asks for no standby. Its driver's node stops renewing its Lease: a standby is made (and
    taken back when the node speaks again), then promoted once the node controller marks the driver's pod
    lost. On the real API server, the operator's own node-Lease watch."""
    ns, core, job = fleet.watch_namespace, client.CoreV1Api(api_client), "quiet"
    fleet.node_silence_seconds = 2.0
    lease = NodeLease(api_client, f"silent-{ns}")
    neighbour = NodeLease(api_client, f"heard-{ns}")  # silence is believed only while others are heard
    try:
        leader = fleet.start()
        create_job(api_client, ns, job_manifest(job, bucket))
        eventually(lambda: pod_names(api_client, ns, job) == ["quiet-1-driver"], timeout=30, what="driver")
        target = client.V1ObjectReference(kind="Node", name=lease.node)
        binding = client.V1Binding(metadata=client.V1ObjectMeta(name="quiet-1-driver"), target=target)
        core.create_namespaced_pod_binding("quiet-1-driver", ns, binding, _preload_content=False)
        set_driver_running(core, ns, "quiet-1-driver")
        eventually(lambda: _phase(api_client, ns, job) == "Running", timeout=30, what="Running")
        _commit_a_batch(fleet, api_client, s3_server, bucket, JobKey(namespace=ns, name=job), 4)
        # While the node speaks: past the silence threshold, a pass after the checkpoint makes no standby.
        time.sleep(2 * fleet.node_silence_seconds)
        _pass_after_a_touch(fleet, leader, api_client, ns, job)
        assert pod_names(api_client, ns, job) == ["quiet-1-driver"], "no standby asked for, none needed"

        lease.speaking.clear()
        standby = eventually(
            lambda: "quiet-2-driver" in pod_names(api_client, ns, job), timeout=30, what="a standby"
        )
        assert standby and _labels(core, ns, "quiet-2-driver")["ftspark.io/standby"] == "true"
        assert "DriverNodeSilent" in event_reasons(api_client, ns, job)
        lease.speaking.set()
        eventually(
            lambda: pod_names(api_client, ns, job) == ["quiet-1-driver"], timeout=30, what="taken back"
        )

        lease.speaking.clear()
        eventually(lambda: "quiet-2-driver" in pod_names(api_client, ns, job), timeout=30, what="made again")
        set_driver_running(core, ns, "quiet-2-driver", ready=True)
        set_driver_running(core, ns, "quiet-1-driver", node_lost=True)  # the node controller's verdict
        assert eventually(partial(_control, core, ns, "quiet-2-driver"), timeout=30).startswith("promote@")
        status = job_status(api_client, ns, job)
        assert (status["attempt"], status["lastFailure"]["reason"]) == (2, "NodeLost"), status
    finally:
        lease.close()
        neighbour.close()


def test_a_driver_on_a_silent_node_is_given_up_once_its_own_lease_lapses_before_the_verdict(
    fleet: OperatorFleet, api_client: client.ApiClient, s3_server: S3Server, bucket: str
) -> None:
    """The job asked for a standby. Its driver's node stops renewing its Lease: while the driver renews its
    own, nothing happens; once that Lease goes unrenewed for its duration the driver is given up (NodeLost)
    and the standby promoted, with no verdict of the node controller. An executor of the driver's on the
    silent node does not hold it up."""
    ns, core, job = fleet.watch_namespace, client.CoreV1Api(api_client), "lapse"
    fleet.node_silence_seconds = 2.0
    lease = NodeLease(api_client, f"lapse-{ns}")
    neighbour = NodeLease(api_client, f"near-{ns}")  # silence is believed only while others are heard
    driver_lease = NodeLease(api_client, driver_lease_name(job), ns, "lapse-1-driver@1", duration=2)
    try:
        leader = fleet.start()
        _start_running(api_client, ns, job, bucket, driver={"standby": 1})
        target = client.V1ObjectReference(kind="Node", name=lease.node)
        binding = client.V1Binding(metadata=client.V1ObjectMeta(name="lapse-1-driver"), target=target)
        core.create_namespaced_pod_binding("lapse-1-driver", ns, binding, _preload_content=False)
        _commit_a_batch(fleet, api_client, s3_server, bucket, JobKey(namespace=ns, name=job), 4)
        eventually(lambda: "lapse-2-driver" in pod_names(api_client, ns, job), timeout=30, what="a standby")
        set_driver_running(core, ns, "lapse-2-driver", ready=True)
        _create_executors(api_client, ns, job, attempts=(1,), node=lease.node)
        lease.speaking.clear()
        # The driver renews its Lease: alive, and heard by the API server (only its kubelet is not).
        time.sleep(3 * 2)
        _pass_after_a_touch(fleet, leader, api_client, ns, job)
        assert not _control(core, ns, "lapse-2-driver"), "it may still commit"
        assert "lapse-1-driver" in pod_names(api_client, ns, job)
        driver_lease.speaking.clear()
        stopped = time.monotonic()
        assert eventually(partial(_control, core, ns, "lapse-2-driver"), timeout=30).startswith("promote@")
        # An executor on the silent node is removed at once: a graceful deletion there would take its 30 s.
        assert time.monotonic() - stopped < 20, "waited for the executor's graceful deletion"
        status = job_status(api_client, ns, job)
        assert (status["attempt"], status["lastFailure"]["reason"]) == (2, "NodeLost"), status
        assert "Lease was not renewed" in status["lastFailure"]["message"], status
    finally:
        driver_lease.close()
        lease.close()
        neighbour.close()


def _control(core: client.CoreV1Api, namespace: str, pod: str) -> str:
    """The control request on the pod ("" when none)."""
    annotations = core.read_namespaced_pod(pod, namespace).metadata.annotations or {}
    return str(annotations.get("ftspark.io/control", ""))


def _commit_a_batch(
    fleet: OperatorFleet, api: client.ApiClient, s3_server: S3Server, bucket: str, key: JobKey, batch: int
) -> None:
    """The running driver's work: the batch committed in the job's checkpoint directory, and reported."""
    stores = configmap_stores(
        api, S3BlobStore(s3_server.client()), fleet.seal(api), results_namespace=fleet.namespace
    )
    graph = stores.job_graphs.get(key)
    assert graph is not None
    location = graph.checkpoint_location
    commit = f"{location.removeprefix(f's3://{bucket}/')}/commits/{batch}"
    s3_server.client().put_object(Bucket=bucket, Key=commit, Body=b"v1\n{}")
    report_checkpoint(stores.checkpoints, key, location, batch)


def _lose_standby(api: client.ApiClient, namespace: str, job: str, pod: str) -> None:
    """Its node stops reporting: it is removed at once and made again."""
    core = client.CoreV1Api(api)
    lost_uid = core.read_namespaced_pod(pod, namespace).metadata.uid  # before: the removal may come at once
    set_driver_running(core, namespace, pod, node_lost=True)

    def replaced() -> bool:
        pods = core.list_namespaced_pod(namespace, field_selector=f"metadata.name={pod}").items
        return bool(pods) and pods[0].metadata.uid != lost_uid

    eventually(replaced, timeout=30, what="the lost standby replaced")
    assert "StandbyReplaced" in event_reasons(api, namespace, job)


def _create_executors(
    api: client.ApiClient, namespace: str, job: str, attempts: tuple[int, ...], node: str | None = None
) -> None:
    """An executor pod of each attempt, `<job>-<attempt>-exec-1`, as Spark makes it (its labels; the job's
    label from the operator's sparkConf); on that node, given one."""
    uid = client.CustomObjectsApi(api).get_namespaced_custom_object(
        API_GROUP, API_VERSION, namespace, PLURAL, job
    )["metadata"]["uid"]
    for attempt in attempts:
        app = spark_app_id(uid, attempt)
        labels = {JOB_LABEL: job, SPARK_APP_SELECTOR_LABEL: app, SPARK_ROLE_LABEL: "executor"}
        pod = client.V1Pod(
            metadata=client.V1ObjectMeta(name=f"{job}-{attempt}-exec-1", labels=labels),
            spec=client.V1PodSpec(
                containers=[client.V1Container(name="executor", image="x")], node_name=node
            ),
        )
        client.CoreV1Api(api).create_namespaced_pod(namespace, pod)


def _labels(core: client.CoreV1Api, namespace: str, pod: str) -> dict[str, str]:
    return dict(core.read_namespaced_pod(pod, namespace).metadata.labels or {})


def test_a_ready_standby_is_promoted_after_the_fence_and_a_lost_one_is_replaced(
    fleet: OperatorFleet, api_client: client.ApiClient, s3_server: S3Server, bucket: str
) -> None:
    """The standby keeps an executor warm: attempt 1's executors go before the promotion, its own stay."""
    ns, core, job = fleet.watch_namespace, client.CoreV1Api(api_client), "hot"
    leader = fleet.start()
    _start_running(api_client, ns, job, bucket, driver={"standby": 1, "standbyExecutors": 1})
    stores = configmap_stores(
        api_client, S3BlobStore(s3_server.client()), fleet.seal(api_client), results_namespace=fleet.namespace
    )
    key = JobKey(namespace=ns, name=job)
    graph = stores.job_graphs.get(key)
    assert graph is not None
    location = graph.checkpoint_location
    s3_server.client().put_object(
        Bucket=bucket, Key=f"{location.removeprefix(f's3://{bucket}/')}/commits/4", Body=b"v1\n{}"
    )

    def commit(attempt: int, checkpoint_id: int) -> None:
        pointer = CheckpointPointer(
            checkpoint_id=checkpoint_id,
            batch_id=checkpoint_id,
            location=location,
            completed_at=datetime.datetime.now(datetime.UTC),
            attempt=attempt,
        )
        stores.checkpoints.add(key, pointer, Epoch("driver", attempt, f"hot-{attempt}-driver"), retained=3)

    _pass_after_a_touch(fleet, leader, api_client, ns, job)
    assert pod_names(api_client, ns, job) == ["hot-1-driver"], (
        "no standby before the attempt's first checkpoint"
    )
    commit(1, 4)  # the standby comes once the attempt is past its start; it changes no fence
    eventually(
        lambda: pod_names(api_client, ns, job) == ["hot-1-driver", "hot-2-driver"], timeout=30, what="standby"
    )
    env = _env(core, ns, "hot-2-driver")
    label = _labels(core, ns, "hot-2-driver")["ftspark.io/standby"]
    assert (label, env["FTSPARK_STANDBY"], env["FTSPARK_STANDBY_EXECUTORS"]) == ("true", "1", "1")
    eventually(  # the attempt's objects come with it: the session it starts needs them
        lambda: core.list_namespaced_secret(ns, field_selector="metadata.name=hot-2-driver-rpc").items,
        timeout=30,
        what="the standby's RPC Secret",
    )
    assert job_status(api_client, ns, job)["attempt"] == 1, "a standby is no attempt"
    assert condition(job_status(api_client, ns, job), "StandbyReady")["status"] == "False"

    _lose_standby(api_client, ns, job, "hot-2-driver")
    status = job_status(api_client, ns, job)
    assert (status["attempt"], status["phase"], status["restarts"].get("count", 0)) == (1, "Running", 0)

    set_driver_running(core, ns, "hot-2-driver", ready=True)
    eventually(
        lambda: condition(job_status(api_client, ns, job), "StandbyReady").get("status") == "True",
        timeout=30,
        what="StandbyReady",
    )
    _create_executors(api_client, ns, job, attempts=(1, 2))  # attempt 1's, and the standby's warm one
    set_driver_exited(core, ns, "hot-1-driver", 137, "killed")

    def promoted() -> str | None:
        pod = core.read_namespaced_pod("hot-2-driver", ns)
        # In one patch: no standby any more, and the pod the job's UI Service selects.
        if (pod.metadata.labels or {}).keys() & {"ftspark.io/standby", "ftspark.io/serving"} != {
            "ftspark.io/serving"
        }:
            return None
        return str((pod.metadata.annotations or {}).get("ftspark.io/control", "")) or None

    request = ControlRequest.parse(eventually(promoted, timeout=30, what="the standby promoted"))
    assert request is not None and (request.action, request.argument) == ("promote", "4")
    assert request.term is not None, "fenced by the leader's term"
    # The checkpoint storage goes to attempt 2 before it is asked to take over: attempt 1 is fenced out.
    with pytest.raises(FencedOutError):
        commit(1, 5)
    eventually(lambda: job_status(api_client, ns, job).get("attempt") == 2, timeout=30, what="attempt 2")
    assert "hot-1-driver" not in pod_names(api_client, ns, job)
    executors = core.list_namespaced_pod(ns, label_selector=f"{SPARK_ROLE_LABEL}=executor").items
    assert [(p.metadata.name, p.metadata.deletion_timestamp) for p in executors] == [
        ("hot-2-exec-1", None)
    ], "attempt 1's executor deleted before the promotion, the standby's own kept"
    assert "StandbyPromoted" in event_reasons(api_client, ns, job)

    set_driver_running(core, ns, "hot-2-driver")
    eventually(lambda: _phase(api_client, ns, job) == "Running", timeout=30, what="attempt 2 Running")
    commit(2, 5)
    eventually(
        lambda: pod_names(api_client, ns, job) == ["hot-2-driver", "hot-2-exec-1", "hot-3-driver"],
        timeout=30,
        what="the next standby",
    )
    assert job_status(api_client, ns, job)["restarts"]["count"] == 1, "a promotion is a restart"
