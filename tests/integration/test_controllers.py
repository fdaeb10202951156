"""The real kube-scheduler places pods by node affinity; the real garbage collector follows owners."""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Iterator

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from ftspark_dev.cluster.controlplane import ControlPlane
from tests.waiting import eventually

pytestmark = pytest.mark.controllers

ZONE_LABEL = "ftspark.io/test-zone"


def _ready_node(name: str, zone: str) -> client.V1Node:
    return client.V1Node(metadata=client.V1ObjectMeta(name=name, labels={ZONE_LABEL: zone}))


def _mark_ready(core: client.CoreV1Api, name: str) -> None:
    """What a kubelet reports: capacity and a Ready condition (fresh enough for this test's lifetime)."""
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    resources = {"cpu": "4", "memory": "8Gi", "pods": "110"}
    core.patch_node_status(
        name,
        {
            "status": {
                "capacity": resources,
                "allocatable": resources,
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "reason": "KubeletReady",
                        "message": "test node",
                        "lastHeartbeatTime": now,
                        "lastTransitionTime": now,
                    }
                ],
            }
        },
    )


@pytest.fixture
def zoned_nodes(cluster: ControlPlane, api_client: client.ApiClient) -> Iterator[dict[str, str]]:
    """Two Ready nodes in zones a and b; returns zone -> node name."""
    core = client.CoreV1Api(api_client)
    suffix = uuid.uuid4().hex[:6]
    nodes = {zone: f"node-{zone}-{suffix}" for zone in ("a", "b")}
    for zone, name in nodes.items():
        core.create_node(_ready_node(name, zone))
        _mark_ready(core, name)
    yield nodes
    for name in nodes.values():
        core.delete_node(name)


def _pod_with_required_zone(name: str, zone: str) -> client.V1Pod:
    term = client.V1NodeSelectorTerm(
        match_expressions=[client.V1NodeSelectorRequirement(key=ZONE_LABEL, operator="In", values=[zone])]
    )
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V1PodSpec(
            affinity=client.V1Affinity(
                node_affinity=client.V1NodeAffinity(
                    required_during_scheduling_ignored_during_execution=client.V1NodeSelector(
                        node_selector_terms=[term]
                    )
                )
            ),
            containers=[
                client.V1Container(
                    name="main",
                    image="busybox",
                    resources=client.V1ResourceRequirements(requests={"cpu": "100m", "memory": "64Mi"}),
                )
            ],
        ),
    )


def test_scheduler_binds_pod_to_node_matching_required_affinity(
    zoned_nodes: dict[str, str], api_client: client.ApiClient, namespace: str
) -> None:
    core = client.CoreV1Api(api_client)
    for index in range(3):
        core.create_namespaced_pod(namespace, _pod_with_required_zone(f"to-b-{index}", "b"))
    core.create_namespaced_pod(namespace, _pod_with_required_zone("nowhere", "no-such-zone"))

    def bound_nodes() -> list[str] | None:
        pods = [core.read_namespaced_pod(f"to-b-{index}", namespace) for index in range(3)]
        names = [pod.spec.node_name for pod in pods]
        return names if all(names) else None

    assert eventually(bound_nodes, timeout=60, what="pods bound") == [zoned_nodes["b"]] * 3

    def unschedulable() -> bool:
        conditions = core.read_namespaced_pod("nowhere", namespace).status.conditions or []
        return any(
            c.type == "PodScheduled" and c.status == "False" and c.reason == "Unschedulable"
            for c in conditions
        )

    eventually(unschedulable, timeout=60, what="pod with unsatisfiable affinity reported Unschedulable")
    assert core.read_namespaced_pod("nowhere", namespace).spec.node_name is None


def test_deleting_owner_garbage_collects_dependents(
    cluster: ControlPlane, api_client: client.ApiClient, namespace: str
) -> None:
    core = client.CoreV1Api(api_client)
    owner = core.create_namespaced_config_map(
        namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="owner"))
    )
    reference = client.V1OwnerReference(
        api_version="v1", kind="ConfigMap", name="owner", uid=owner.metadata.uid
    )
    for index in range(3):
        core.create_namespaced_config_map(
            namespace,
            client.V1ConfigMap(
                metadata=client.V1ObjectMeta(name=f"dependent-{index}", owner_references=[reference])
            ),
        )
    core.create_namespaced_config_map(
        namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="unowned"))
    )

    core.delete_namespaced_config_map("owner", namespace, propagation_policy="Background")

    def dependents_gone() -> bool:
        names = {cm.metadata.name for cm in core.list_namespaced_config_map(namespace).items}
        return not any(name.startswith("dependent-") for name in names)

    eventually(dependents_gone, timeout=60, what="dependents garbage-collected")
    try:
        core.read_namespaced_config_map("unowned", namespace)
    except ApiException as error:  # pragma: no cover - the assertion message is the point
        raise AssertionError(f"the collector removed an object without owner: {error}") from error
