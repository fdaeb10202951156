"""Fault injection: a killed pod, a killed and restarted node, and the same from the CLI."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from kubernetes import client

from ftspark_dev.cluster.controlplane import ControlPlane
from ftspark_dev.nodes import NodeAgent
from tests.nodes.pods import python_pod, wait_phase
from tests.waiting import eventually

TOOLS = Path(__file__).resolve().parents[2] / "tools"
SLEEPER = 'import os, time; print("pid", os.getpid(), flush=True); time.sleep(600)'


def started_pid(agent: NodeAgent, namespace: str, name: str) -> int:
    def pid_line() -> str | None:
        lines = agent.log(namespace, name).splitlines()
        return next((line for line in lines if line.startswith("pid")), None)

    return int(eventually(pid_line, timeout=20, what=f"{name} printed its pid").split()[1])


def node_ready(core: client.CoreV1Api, name: str) -> str:
    conditions = core.read_node(name).status.conditions
    return str(next(c.status for c in conditions if c.type == "Ready"))


def test_killed_pod_fails_with_137(agent: NodeAgent, api_client: client.ApiClient, namespace: str) -> None:
    core = client.CoreV1Api(api_client)
    core.create_namespaced_pod(namespace, python_pod("driver", SLEEPER))
    wait_phase(core, namespace, "driver", "Running")
    pid = started_pid(agent, namespace, "driver")

    agent.kill_pod(namespace, "driver")
    pod = wait_phase(core, namespace, "driver", "Failed")

    assert pod.status.container_statuses[0].state.terminated.exit_code == 137
    assert not os.path.exists(f"/proc/{pid}")


def test_killed_node_goes_unknown_and_restarts(
    agent: NodeAgent, api_client: client.ApiClient, namespace: str
) -> None:
    core = client.CoreV1Api(api_client)
    node = agent.nodes[0]
    core.create_namespaced_pod(namespace, python_pod("victim", SLEEPER, node=node.name))
    wait_phase(core, namespace, "victim", "Running")
    pid = started_pid(agent, namespace, "victim")

    killed = time.monotonic()
    agent.kill_node(node.name)
    assert not os.path.exists(f"/proc/{pid}")
    eventually(lambda: node_ready(core, node.name) == "Unknown", timeout=60, what="node Ready=Unknown")
    unknown = time.monotonic() - killed
    # The node-lifecycle controller marks the pods of an unreachable node not ready; the phase stays.
    eventually(
        lambda: any(
            c.type == "Ready" and c.status == "False"
            for c in core.read_namespaced_pod("victim", namespace).status.conditions
        ),
        timeout=30,
        what="pod Ready=False",
    )
    assert core.read_namespaced_pod("victim", namespace).status.phase == "Running"

    agent.restart_node(node.name)
    eventually(lambda: node_ready(core, node.name) == "True", timeout=30, what="node Ready again")
    pod = wait_phase(core, namespace, "victim", "Failed")
    assert pod.status.container_statuses[0].state.terminated.exit_code == 137
    # The restarted node runs new pods.
    core.create_namespaced_pod(namespace, python_pod("after", "print('back')", node=node.name))
    wait_phase(core, namespace, "after", "Succeeded")
    print(f"node killed → Ready=Unknown: {unknown:.1f} s")


def test_cli_runs_nodes_and_kills_a_pod(
    cluster: ControlPlane, api_client: client.ApiClient, namespace: str, tmp_path: Path
) -> None:
    core = client.CoreV1Api(api_client)
    root = tmp_path / "nodes"
    command = [sys.executable, "-m", "ftspark_dev.nodes", "--root", str(root)]
    prefix = f"cli{namespace[-6:]}"
    env = {**os.environ, "PYTHONPATH": str(TOOLS)}
    agent = subprocess.Popen(
        [
            *command,
            "run",
            "--kubeconfig",
            str(cluster.kubeconfig),
            "--nodes",
            "1",
            "--prefix",
            prefix,
            "--first-ip",
            "40",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    try:
        eventually(lambda: (root / "control.sock").exists(), timeout=30, what="the agent's socket")
        core.create_namespaced_pod(namespace, python_pod("cli-pod", SLEEPER, node=f"{prefix}-0"))
        wait_phase(core, namespace, "cli-pod", "Running")
        status = subprocess.run(
            [*command, "status"], check=True, capture_output=True, text=True, env=env
        ).stdout
        assert f"{namespace}/cli-pod" in status and "127.0.0.40" in status

        subprocess.run([*command, "kill-pod", f"{namespace}/cli-pod"], check=True, env=env)
        pod = wait_phase(core, namespace, "cli-pod", "Failed")
        assert pod.status.container_statuses[0].state.terminated.exit_code == 137
        log = subprocess.run(
            [*command, "log", f"{namespace}/cli-pod"], check=True, capture_output=True, text=True, env=env
        )
        assert log.stdout.startswith("pid")
    finally:
        agent.terminate()
        output, _ = agent.communicate(timeout=30)
    assert agent.returncode == 0, output
    assert not (root / "control.sock").exists()
    eventually(
        lambda: not core.list_node(label_selector=f"kubernetes.io/hostname={prefix}-0").items, timeout=10
    )


def test_pods_run_on_through_an_api_server_restart(
    agent: NodeAgent, cluster: ControlPlane, api_client: client.ApiClient, namespace: str
) -> None:
    """As a kubelet: the containers do not notice, heartbeats resume, and the end the API server missed is
    reported once it is back."""
    core = client.CoreV1Api(api_client)
    core.create_namespaced_pod(namespace, python_pod("steady", 'import time; time.sleep(4); print("done")'))
    wait_phase(core, namespace, "steady", "Running")
    cluster.restart_apiserver(down_seconds=8)  # the pod ends while the API server is down
    pod = wait_phase(core, namespace, "steady", "Succeeded", timeout=30)
    assert pod.status.container_statuses[0].state.terminated.exit_code == 0
    assert "done" in agent.log(namespace, "steady")
    assert [node_ready(core, node.name) for node in agent.nodes] == ["True"] * len(agent.nodes)
    core.create_namespaced_pod(namespace, python_pod("later", "print('still a node')"))
    wait_phase(core, namespace, "later", "Succeeded")
