"""Upgrade rollback on the real API server (the test plays the kubelet): a spec that ran for the window is
the stable one; a spec change whose driver fails at once is rolled back, the next driver runs the stable
spec while the user's spec stays as written, and the next spec change is tried in turn."""

from __future__ import annotations

from typing import Any

from kubernetes import client

from ftspark import API_GROUP, API_VERSION, PLURAL
from ftspark_dev.cluster.operators import (
    OperatorFleet,
    event_reasons,
    job_manifest,
    job_status,
    pod_names,
    set_driver_exited,
    set_driver_running,
)
from ftspark_dev.cluster.versions import SPARK_IMAGE
from tests.waiting import eventually

JOB = "rollme"
WINDOW = 10


def _image(core: client.CoreV1Api, namespace: str, pod: str) -> str:
    image: str = core.read_namespaced_pod(pod, namespace).spec.containers[0].image
    return image


def _spec(api: client.ApiClient, namespace: str) -> dict[str, Any]:
    objects = client.CustomObjectsApi(api)
    job = objects.get_namespaced_custom_object(API_GROUP, API_VERSION, namespace, PLURAL, JOB)
    spec: dict[str, Any] = job["spec"]
    return spec


def _driver_appears(api: client.ApiClient, namespace: str, attempt: int) -> str:
    pod = f"{JOB}-{attempt}-driver"
    eventually(
        lambda: pod_names(api, namespace, JOB) == [pod],
        timeout=30,
        what=lambda: f"{pod} alone: {pod_names(api, namespace, JOB)}, {job_status(api, namespace, JOB)}",
    )
    return pod


def test_a_failing_upgrade_is_rolled_back_and_the_spec_stays_as_written(
    fleet: OperatorFleet, api_client: client.ApiClient, bucket: str
) -> None:
    ns, core = fleet.watch_namespace, client.CoreV1Api(api_client)
    objects = client.CustomObjectsApi(api_client)
    fleet.start()
    rollback = {"enabled": True, "windowSeconds": WINDOW}
    body = job_manifest(JOB, bucket, image=SPARK_IMAGE, upgradeRollback=rollback)
    objects.create_namespaced_custom_object(API_GROUP, API_VERSION, ns, PLURAL, body)
    set_driver_running(core, ns, _driver_appears(api_client, ns, 1))
    stable = eventually(
        lambda: job_status(api_client, ns, JOB).get("lastStableSpec"),
        timeout=WINDOW + 30,
        what="the first spec stable after the window",
    )
    assert stable["generation"] == 1

    # An upgrade whose driver fails at once: rolled back, the next driver runs the stable spec's image.
    objects.patch_namespaced_custom_object(
        API_GROUP, API_VERSION, ns, PLURAL, JOB, {"spec": {"image": "ftspark/spark-py:broken"}}
    )
    upgraded = _driver_appears(api_client, ns, 2)
    assert _image(core, ns, upgraded) == "ftspark/spark-py:broken"
    set_driver_running(core, ns, upgraded)
    set_driver_exited(core, ns, upgraded, 1, "ModuleNotFoundError: No module named 'newdep'")
    back = _driver_appears(api_client, ns, 3)
    assert _image(core, ns, back) == SPARK_IMAGE, "the stable spec runs"
    status = job_status(api_client, ns, JOB)
    assert status["upgradeRollback"]["generation"] == 2
    assert status["upgradeRollback"]["reason"] == "UpgradeFailed"
    assert "UpgradeRolledBack" in event_reasons(api_client, ns, JOB)
    assert _spec(api_client, ns)["image"] == "ftspark/spark-py:broken", "the user's spec is never rewritten"
    set_driver_running(core, ns, back)

    # The next change of the spec ends the rollback: it is tried in turn.
    objects.patch_namespaced_custom_object(
        API_GROUP, API_VERSION, ns, PLURAL, JOB, {"spec": {"image": "ftspark/spark-py:fixed"}}
    )
    assert _image(core, ns, _driver_appears(api_client, ns, 4)) == "ftspark/spark-py:fixed"
