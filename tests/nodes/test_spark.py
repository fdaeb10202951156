"""A real Spark executor pod: a PySpark driver in client mode asks Spark's Kubernetes backend for executors,
the real scheduler places them by node affinity and the node agent runs them as real JVMs."""

from __future__ import annotations

import datetime
import os
import subprocess
import sys
from pathlib import Path

import yaml
from kubernetes import client

from ftspark_dev.cluster.controlplane import ControlPlane
from ftspark_dev.cluster.versions import SPARK_IMAGE
from ftspark_dev.nodes import NodeAgent
from tests.waiting import eventually

CLIENT = Path(__file__).with_name("spark_client.py")


def spark_token(api_client: client.ApiClient, namespace: str) -> str:
    """A token of a service account that may manage executor pods in the namespace (ClusterRole edit)."""
    core = client.CoreV1Api(api_client)
    core.create_namespaced_service_account(namespace, {"metadata": {"name": "spark"}})
    client.RbacAuthorizationV1Api(api_client).create_namespaced_role_binding(
        namespace,
        {
            "metadata": {"name": "spark-edit"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
            "subjects": [{"kind": "ServiceAccount", "name": "spark", "namespace": namespace}],
        },
    )
    request = client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(audiences=[]))
    token: str = core.create_namespaced_service_account_token("spark", namespace, request).status.token
    return token


def test_spark_executors_run_as_pods_on_the_node_their_template_names(
    agent: NodeAgent, cluster: ControlPlane, api_client: client.ApiClient, namespace: str, tmp_path: Path
) -> None:
    core = client.CoreV1Api(api_client)
    target = agent.nodes[1]
    template = tmp_path / "executor.yaml"
    template.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "spec": {
                    "affinity": {
                        "nodeAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": {
                                "nodeSelectorTerms": [
                                    {
                                        "matchExpressions": [
                                            {
                                                "key": "kubernetes.io/hostname",
                                                "operator": "In",
                                                "values": [target.name],
                                            }
                                        ]
                                    }
                                ]
                            }
                        }
                    }
                },
            }
        )
    )
    token = tmp_path / "token"
    token.write_text(spark_token(api_client, namespace))
    seen: dict[str, client.V1Pod] = {}
    out, err = tmp_path / "driver.out", tmp_path / "driver.err"

    def diagnosis() -> str:
        pods = core.list_namespaced_pod(namespace).items
        states = [(p.metadata.name, p.spec.node_name, p.status.phase) for p in pods]
        logs = []
        for pod in pods:
            try:
                logs.append(agent.log(namespace, pod.metadata.name)[-2000:])
            except KeyError:
                continue
        return f"{states}\ndriver: {err.read_text()[-3000:]}\nexecutors: {logs}"

    with out.open("w") as stdout, err.open("w") as stderr:
        driver = subprocess.Popen(
            [
                sys.executable,
                str(CLIENT),
                cluster.server,
                str(cluster.ca_path),
                str(token),
                namespace,
                str(template),
                SPARK_IMAGE,
            ],
            env={k: v for k, v in os.environ.items() if k != "KUBECONFIG"},
            stdout=stdout,
            stderr=stderr,
        )
    try:

        def executors_running() -> bool:
            pods = core.list_namespaced_pod(namespace, label_selector="spark-role=executor").items
            for pod in pods:
                if pod.status.phase == "Running":
                    seen[pod.metadata.name] = pod
            return len(seen) == 2

        eventually(executors_running, timeout=120, what=diagnosis)
        driver.wait(timeout=180)
    finally:
        driver.kill()
        driver.wait()
    output = out.read_text()
    assert driver.returncode == 0, diagnosis()

    assert "sum 4950" in output
    # Every task ran in one of the executor pods: the hostname its Python worker saw is the pod's name.
    hosts = output.split("hosts ", 1)[1].split()
    assert set(hosts) <= set(seen) and hosts
    for pod in seen.values():
        assert pod.spec.node_name == target.name
        assert pod.status.pod_ip == target.ip
        created = pod.metadata.creation_timestamp
        started = pod.status.container_statuses[0].state.running.started_at
        log = agent.log(namespace, pod.metadata.name)
        registered = next(line for line in log.splitlines() if "Successfully registered with driver" in line)
        # Spark logs local time as "yy/MM/dd HH:mm:ss".
        at = datetime.datetime.strptime(registered[:17], "%y/%m/%d %H:%M:%S").astimezone(datetime.UTC)
        to_start, to_register = (started - created).total_seconds(), (at - started).total_seconds()
        print(f"{pod.metadata.name}: created → started {to_start:.0f} s → registered {to_register:.0f} s")
    print(next(line for line in output.splitlines() if line.startswith("executors registered")))
    # spark.stop() deletes its executors; the agent stopped their JVMs and finalized the pods.
    eventually(
        lambda: not core.list_namespaced_pod(namespace, label_selector="spark-role=executor").items,
        timeout=60,
        what="executor pods deleted",
    )
