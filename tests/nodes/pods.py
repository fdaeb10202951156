"""Pod manifests and waits shared by the node agent's tests."""

from __future__ import annotations

import textwrap
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.waiting import eventually

Manifest = dict[str, Any]


def python_pod(name: str, script: str, node: str | None = None, **spec: Any) -> Manifest:
    pod_spec: Manifest = {
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 5,
        "containers": [
            {
                "name": "main",
                "image": "python:3.11",
                "command": ["python", "-c", textwrap.dedent(script)],
                "env": [
                    {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                    {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                    {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                    {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                ],
            }
        ],
        **spec,
    }
    if node is not None:
        pod_spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}
                            ]
                        }
                    ]
                }
            }
        }
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": pod_spec}


def phase(core: client.CoreV1Api, namespace: str, name: str) -> str | None:
    try:
        value: str | None = core.read_namespaced_pod(name, namespace).status.phase
        return value
    except ApiException as error:
        if error.status == 404:
            return None
        raise


def wait_phase(
    core: client.CoreV1Api, namespace: str, name: str, wanted: str, timeout: float = 60
) -> client.V1Pod:
    eventually(lambda: phase(core, namespace, name) == wanted, timeout=timeout, what=f"{name} {wanted}")
    return core.read_namespaced_pod(name, namespace)
