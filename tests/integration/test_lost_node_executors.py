"""Executors on a lost node are removed at once, on the real API server (a graceful deletion would leave
them, bound to a node no kubelet serves): by the driver runtime, its own (ftspark.runtime.executors), so that
Spark's pod watch sees the executor gone and replaces it; by the operator, an ended attempt's, so that the
next attempt does not wait out their grace period."""

from __future__ import annotations

import datetime

from kubernetes import client
from kubernetes.client.rest import ApiException

from ftspark import API_GROUP, API_VERSION, PLURAL
from ftspark.protocol import (
    JOB_LABEL,
    SPARK_APP_SELECTOR_LABEL,
    SPARK_ROLE_LABEL,
    driver_pod_name,
    spark_app_id,
)
from ftspark.runtime.executors import LostNodeExecutors
from ftspark_dev.cluster.operators import OperatorFleet, job_manifest, set_driver_exited, set_driver_running
from tests.waiting import eventually

APP = "ftspark-0123abcd-2"


def _executor(
    core: client.CoreV1Api, namespace: str, name: str, app: str = APP, job: dict[str, str] | None = None
) -> None:
    labels = {SPARK_APP_SELECTOR_LABEL: app, SPARK_ROLE_LABEL: "executor", **(job or {})}
    core.create_namespaced_pod(
        namespace,
        client.V1Pod(
            metadata=client.V1ObjectMeta(name=name, labels=labels),
            spec=client.V1PodSpec(
                node_name="node-a", containers=[client.V1Container(name="executor", image="x")]
            ),
        ),
    )


def _running(core: client.CoreV1Api, namespace: str, name: str, *, node_lost: bool) -> None:
    """As its kubelet last reported it; node_lost: then marked by the node controller (Ready=False)."""
    now = datetime.datetime.now(datetime.UTC).isoformat()
    ready = {"type": "Ready", "status": "False" if node_lost else "True", "lastTransitionTime": now}
    container = {
        "name": "executor",
        "image": "x",
        "imageID": "",
        "ready": True,
        "restartCount": 0,
        "state": {"running": {"startedAt": now}},
    }
    status = {"phase": "Running", "conditions": [ready], "containerStatuses": [container]}
    core.patch_namespaced_pod_status(name, namespace, {"status": status})


def _exists(core: client.CoreV1Api, namespace: str, name: str) -> bool:
    try:
        core.read_namespaced_pod(name, namespace)
    except ApiException as error:
        if error.status == 404:
            return False
        raise
    return True


def _first_driver(fleet: OperatorFleet, api: client.ApiClient, job: str, bucket: str) -> str:
    """An operator, the job created, its first driver pod there; the job's uid."""
    fleet.start()
    jobs = client.CustomObjectsApi(api)
    ns = fleet.watch_namespace
    jobs.create_namespaced_custom_object(API_GROUP, API_VERSION, ns, PLURAL, job_manifest(job, bucket))
    name = driver_pod_name(job, 1)
    eventually(lambda: _exists(client.CoreV1Api(api), ns, name), timeout=30, what=name)
    uid: str = jobs.get_namespaced_custom_object(API_GROUP, API_VERSION, ns, PLURAL, job)["metadata"]["uid"]
    return uid


def test_executors_on_a_lost_node_are_removed_at_once_and_only_the_drivers_own(
    api_client: client.ApiClient, namespace: str
) -> None:
    core = client.CoreV1Api(api_client)
    for name in ("lost-before", "lost-after", "fine"):
        _executor(core, namespace, name)
    _executor(core, namespace, "another-apps", app="ftspark-0123abcd-1")
    _running(core, namespace, "lost-before", node_lost=True)  # met by the first listing
    _running(core, namespace, "fine", node_lost=False)
    _running(core, namespace, "another-apps", node_lost=True)
    executors = LostNodeExecutors(api_client, namespace, APP)
    executors.start()
    try:
        eventually(lambda: not _exists(core, namespace, "lost-before"), timeout=30, what="lost-before gone")
        _running(core, namespace, "lost-after", node_lost=True)  # met by the watch
        eventually(lambda: not _exists(core, namespace, "lost-after"), timeout=30, what="lost-after gone")
    finally:
        executors.stop()
    # The watch met the marks in order: the ones before "lost-after" were looked at and left.
    assert _exists(core, namespace, "fine"), "an executor on a node that reports is left alone"
    assert _exists(core, namespace, "another-apps"), "another application's executor is none of its concern"


def test_an_ended_attempts_executor_on_a_lost_node_does_not_hold_the_next_attempt_for_its_grace_period(
    fleet: OperatorFleet, api_client: client.ApiClient, bucket: str
) -> None:
    """The next attempt waits until the previous one's executors are gone. One on a lost node would go only
    once its graceful deletion is overdue (30 s, the pod's default grace period): the operator removes it at
    once instead, as it does a lost node's driver pod."""
    ns, core = fleet.watch_namespace, client.CoreV1Api(api_client)
    uid = _first_driver(fleet, api_client, "lost", bucket)
    first, second = driver_pod_name("lost", 1), driver_pod_name("lost", 2)
    _executor(core, ns, "lost-1-exec-1", app=spark_app_id(uid, 1), job={JOB_LABEL: "lost"})
    _running(core, ns, "lost-1-exec-1", node_lost=True)
    set_driver_running(core, ns, first)
    set_driver_exited(core, ns, first, 1, "boom")
    # Well within the 30 s the graceful deletion would hold it (restart delay 1 s).
    eventually(lambda: _exists(core, ns, second), timeout=20, what=lambda: f"driver 2\n{fleet.logs()}")
    assert not _exists(core, ns, "lost-1-exec-1")


def test_an_ended_attempt_whose_pods_say_nothing_runs_does_not_wait_for_their_kubelets(
    fleet: OperatorFleet, api_client: client.ApiClient, bucket: str
) -> None:
    """An attempt's driver and executor whose containers ended (on their kubelet's word) have nothing left to
    stop: the operator removes the driver pod at once rather than waiting for its kubelet to confirm a
    graceful deletion, and does not wait for the executor pod to go (its driver's deletion takes it, as
    its owner). No kubelet runs here, so a graceful deletion of a pod bound to a node would never end:
    without either change, driver 2 never comes."""
    ns, core = fleet.watch_namespace, client.CoreV1Api(api_client)
    uid = _first_driver(fleet, api_client, "ended", bucket)
    first, second = driver_pod_name("ended", 1), driver_pod_name("ended", 2)
    core.create_namespaced_pod_binding(
        first,
        ns,
        client.V1Binding(
            metadata=client.V1ObjectMeta(name=first),
            target=client.V1ObjectReference(kind="Node", name="node-a"),
        ),
        _preload_content=False,  # the client cannot read the Status the API server answers with
    )
    _executor(core, ns, "ended-1-exec-1", app=spark_app_id(uid, 1), job={JOB_LABEL: "ended"})
    exited = {"terminated": {"exitCode": 1, "reason": "Error"}}
    container = {"name": "executor", "image": "x", "imageID": "", "ready": False, "restartCount": 0}
    status = {"phase": "Failed", "containerStatuses": [container | {"state": exited}]}
    core.patch_namespaced_pod_status("ended-1-exec-1", ns, {"status": status})
    set_driver_running(core, ns, first)
    set_driver_exited(core, ns, first, 137, "killed")
    eventually(lambda: _exists(core, ns, second), timeout=20, what=lambda: f"driver 2\n{fleet.logs()}")
    assert not _exists(core, ns, first)
