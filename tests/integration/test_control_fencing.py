"""Control requests are fenced: the driver runtime's ControlWatcher, as the driver's ServiceAccount, reads the
operator's term floor and obeys only a request written with a term at or above it. A deposed leader resumed
after a pause (its term below the floor) can no longer stop a driver."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator

import pytest
from kubernetes import client, config

from ftspark import API_GROUP, API_VERSION, PLURAL
from ftspark.adapters.k8s.cluster import KubeDrivers
from ftspark.adapters.k8s.lease_lock import KubernetesLeaseLock
from ftspark.adapters.seal import RecordSeal
from ftspark.domain.fencing import Epoch
from ftspark.domain.ha import JobKey
from ftspark.domain.models import JobSpec
from ftspark.leader.elector import LeaderElectionConfig, LeaderElector
from ftspark.manifests import AttemptPlan
from ftspark.protocol import (
    CONTROL_ANNOTATION,
    CONTROL_REFUSED_ANNOTATION,
    DRIVER_SERVICE_ACCOUNT,
    ControlRequest,
    driver_pod_name,
    term_floor_name,
)
from ftspark.runtime.control import ControlWatcher
from ftspark_dev.cluster.controlplane import ControlPlane
from ftspark_dev.cluster.operators import job_manifest
from tests.conftest import fresh_namespace
from tests.waiting import eventually

LEASE = "ftspark-operator"


def lead_once(api: client.ApiClient, namespace: str, identity: str) -> Epoch:
    """Win the operator Lease (raising its term floor, as every acquisition does), then release it."""
    lock = KubernetesLeaseLock(
        api, namespace=namespace, name=LEASE, identity=identity, request_timeout=2.0, keep_term_floor=True
    )
    started: list[Epoch] = []
    stop = threading.Event()

    def leading(epoch: Epoch) -> None:
        started.append(epoch)
        stop.set()

    election = LeaderElectionConfig(identity=identity, lease_duration=3, renew_deadline=2.0, retry_period=0.5)
    LeaderElector(election, lock, on_started_leading=leading).run(stop)
    return started[0]


@pytest.fixture
def jobs_namespace(api_client: client.ApiClient) -> Iterator[str]:
    with fresh_namespace(api_client) as name:
        yield name


def test_the_driver_obeys_the_current_leaders_request_and_refuses_a_deposed_ones(
    crd: None, control_plane: ControlPlane, api_client: client.ApiClient, namespace: str, jobs_namespace: str
) -> None:
    deposed = lead_once(api_client, namespace, "replica-a")
    current = lead_once(api_client, namespace, "replica-b")
    assert deposed.term < current.term
    key = JobKey(namespace=jobs_namespace, name="fenced")
    manifest = job_manifest(key.name, "bucket")
    spec = JobSpec.model_validate(manifest["spec"])
    # A real job owns the pod: with the garbage collector running (another test's controllers), a pod owned
    # by no object would be deleted under the test.
    job = client.CustomObjectsApi(api_client).create_namespaced_custom_object(
        API_GROUP, API_VERSION, key.namespace, PLURAL, manifest
    )
    drivers = KubeDrivers(api_client, RecordSeal(RecordSeal.new_key()))
    # The operator creates the attempt: its pod, and the driver's right to read the term floor.
    drivers.create(
        AttemptPlan(
            namespace=key.namespace,
            job_name=key.name,
            job_uid=job["metadata"]["uid"],
            attempt=1,
            spec=spec,
            checkpoint_location="s3://bucket/jobs/fenced/checkpoints/run-1",
            restore_from="nothing",
            term_floor=f"{namespace}/{term_floor_name(LEASE)}",
        )
    )
    pod = driver_pod_name(key.name, 1)
    # The watcher runs as the driver does: with the driver's ServiceAccount and nothing else.
    driver_api = config.new_client_from_config(
        config_file=str(control_plane.kubeconfig_for_service_account(key.namespace, DRIVER_SERVICE_ACCOUNT))
    )
    obeyed: list[ControlRequest] = []

    def obey(request: ControlRequest) -> bool:
        obeyed.append(request)
        return True

    watcher = ControlWatcher(driver_api, key.namespace, pod, 0.2, obey, (namespace, term_floor_name(LEASE)))
    watcher.start()
    core = client.CoreV1Api(api_client)

    def refused() -> dict[str, str] | None:
        annotations = core.read_namespaced_pod(pod, key.namespace).metadata.annotations or {}
        value = annotations.get(CONTROL_REFUSED_ANNOTATION)
        return json.loads(value) if value else None

    try:
        drivers.request_stop(key, pod, deposed.term)
        stale = eventually(refused, timeout=10, what="the deposed leader's stop refused on the pod")
        written = core.read_namespaced_pod(pod, key.namespace).metadata.annotations[CONTROL_ANNOTATION]
        assert stale["request"] == written
        assert f"below the term floor {current.term}" in stale["reason"]
        assert obeyed == []

        core.patch_namespaced_pod(
            pod, key.namespace, {"metadata": {"annotations": {CONTROL_ANNOTATION: "stop@x"}}}
        )
        eventually(
            lambda: (refused() or {}).get("request") == "stop@x", timeout=10, what="a request without a term"
        )
        assert obeyed == []

        drivers.request_savepoint(key, pod, current.term, "sp-1-a1")
        eventually(lambda: obeyed, timeout=10, what="the current leader's savepoint obeyed")
        assert obeyed == [ControlRequest("savepoint", "sp-1-a1", current.term)]
    finally:
        watcher.stop()
    # Least privilege: the driver may read the term floor, and no other ConfigMap of the operator.
    driver_core = client.CoreV1Api(driver_api)
    assert driver_core.read_namespaced_config_map(term_floor_name(LEASE), namespace).data == {
        "term": str(current.term)
    }
    with pytest.raises(client.ApiException) as denied:
        driver_core.list_namespaced_config_map(namespace)
    assert denied.value.status == 403
