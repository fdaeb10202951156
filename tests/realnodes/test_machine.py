"""Real nodes do real things to the machine (links, iptables, cgroups, mounts, sysctls) and undo all of it."""

from __future__ import annotations

import json
from pathlib import Path

from ftspark_dev.controlplane import ControlPlane
from ftspark_dev.realnodes import PAUSE_IMAGE, HostState, RealNodes, network
from ftspark_dev.realnodes.images import OPERATOR_IMAGE


def _pod(name: str, node: str, command: list[str], labels: dict[str, str] | None = None) -> str:
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "labels": labels or {}},
            "spec": {
                "nodeName": node,
                "restartPolicy": "Never",
                "containers": [
                    {"name": "main", "image": OPERATOR_IMAGE, "imagePullPolicy": "Never", "command": command}
                ],
            },
        }
    )


def test_a_run_leaves_the_machine_as_it_found_it(images: dict[str, Path]) -> None:
    before = HostState.read()
    nodes = RealNodes(
        nodes=2, images={k: images[k] for k in (PAUSE_IMAGE, OPERATOR_IMAGE)}, prefix="machine"
    ).open()
    try:
        with ControlPlane(
            address=network.HOST_ADDRESS, service_cidr=network.SERVICE_CIDR, service_account_admission=True
        ) as plane:
            plane.start_controllers()
            nodes.start(plane)
            print(f"\n2 real nodes Ready {nodes.start_seconds:.1f} s after their start (images imported)")
            plane.kubectl("wait", "--for=create", "serviceaccount/default", "--timeout=60s")
            # A server on one node behind a ClusterIP Service, a client on the other: CNI bridges, routing
            # between nodes and kube-proxy's rules all take part.
            server = ["python", "-m", "http.server", "8080", "--directory", "/etc"]
            plane.kubectl("apply", "-f", "-", stdin=_pod("server", "machine1", server, {"app": "server"}))
            plane.kubectl("expose", "pod", "server", "--port=80", "--target-port=8080", "--name=server")
            plane.kubectl("wait", "--for=condition=Ready", "pod/server", "--timeout=120s")
            ip = plane.kubectl("get", "service", "server", "-o", "jsonpath={.spec.clusterIP}").stdout
            assert ip.startswith("198.19.0."), ip
            # The Service routes once the endpoint controller and kube-proxy have caught up: retry until then.
            fetch = (
                "import time, urllib.request as u\n"
                "for _ in range(30):\n"
                "    try:\n"
                f"        print(u.urlopen('http://{ip}/hostname', timeout=2).read()); break\n"
                "    except OSError: time.sleep(1)\n"
                "else: raise SystemExit('the Service never answered')\n"
            )
            client = ["python", "-c", fetch]
            plane.kubectl("apply", "-f", "-", stdin=_pod("client", "machine2", client))
            plane.kubectl("wait", "--for=jsonpath={.status.phase}=Succeeded", "pod/client", "--timeout=110s")
            during = HostState.read()
            # A node loss leaves containers, mounts and network namespaces behind: the teardown still copes.
            nodes.kill_node("machine1")
    finally:
        nodes.stop()
    assert {change.split(":")[0] for change in before.changes(during)} >= {
        "link added",
        "cgroup added",
        "iptables added",
        "mount added",
    }, "the run changed nothing on the machine: this check could not fail"
    left = before.changes(HostState.read())
    assert left == [], "\n".join(left)
