"""The driver runtime gives up its executors on a lost node at once (ftspark.runtime.executors), on the real
API server: the pod object is removed (a graceful deletion would leave it, bound to a node no kubelet serves),
so Spark's own pod watch sees its executor gone and replaces it. Only the driver's own executors, and only
those the node controller marked."""

from __future__ import annotations

import datetime

from kubernetes import client
from kubernetes.client.rest import ApiException

from ftspark.protocol import SPARK_APP_SELECTOR_LABEL, SPARK_ROLE_LABEL
from ftspark.runtime.executors import LostNodeExecutors
from tests.waiting import eventually

APP = "ftspark-0123abcd-2"


def _executor(core: client.CoreV1Api, namespace: str, name: str, app: str = APP) -> None:
    labels = {SPARK_APP_SELECTOR_LABEL: app, SPARK_ROLE_LABEL: "executor"}
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
