"""The node agent: registers Nodes, keeps their heartbeats, runs the pods bound to them, and injects faults.

Heartbeats, as a kubelet sends them: the node's Lease in kube-node-lease is renewed every 2 s (leaseDuration
40 s) and its NodeStatus (Ready with lastHeartbeatTime) is written every 10 s. A killed node stops both; the
controller-manager's node-lifecycle controller (--node-monitor-grace-period=20s, --node-monitor-period=2s in
ftspark_dev.cluster.controlplane) sets the Node's conditions to Unknown 20-22 s after the last renewal, marks
its pods Ready=False and taints the node node.kubernetes.io/unreachable:NoExecute; the taint-eviction
controller deletes the pods after their toleration (300 s by default, from the DefaultTolerationSeconds
admission plugin), and the deletions complete only when the node comes back (or someone force-deletes).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

from ftspark_dev.nodes import volumes
from ftspark_dev.nodes.pods import (
    API_UNREACHABLE,
    NodeView,
    PodRunner,
    marked_pids,
    merge_patch,
    now,
    signal_marked,
)

log = logging.getLogger(__name__)
Manifest = dict[str, Any]

LEASE_NAMESPACE = "kube-node-lease"
LEASE_DURATION = 40
LEASE_RENEW_SECONDS = 2.0
STATUS_SECONDS = 10.0
_WATCH_SECONDS = 5  # each watch ends after this and the node re-lists: a resync
_KUBELET_VERSION = "v1.34.12"
_ROOT_PREFIX = "ftspark-nodes-"
_OWNER_FILE = "owner.pid"
# Mountpoints are shared by every agent of this process: two agents may mount at the same host path.
_MOUNTPOINTS = volumes.HostMountpoints()


@dataclass(frozen=True)
class Resources:
    cpu: str = "4"
    memory: str = "8Gi"
    pods: int = 110


class Node:
    """One Node object and the processes of its pods. start/kill/restart are the node's life and faults."""

    def __init__(self, agent: NodeAgent, name: str, ip: str, labels: dict[str, str]):
        self.agent = agent
        self.name = name
        self.ip = ip
        self.labels = labels
        self.root = agent.root / name
        self.epoch = 0
        self.running = False
        self.runners: dict[str, PodRunner] = {}
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.view = NodeView(
            name=name,
            ip=ip,
            root=self.root,
            api=agent.api,
            api_host=agent.api_host,
            api_port=agent.api_port,
            marker=f"{os.getpid()}/{name}/",
            mountpoints=_MOUNTPOINTS,
            alive=self.alive,
        )

    def alive(self, epoch: int) -> bool:
        return self.running and epoch == self.epoch

    # -- life ----------------------------------------------------------------------------------------------

    def start(self) -> None:
        with self._lock:
            if self.running:
                return
            self.epoch += 1
            self.running = True
            self._stop = threading.Event()
            self.root.mkdir(parents=True, exist_ok=True)
            (self.root / "host").mkdir(exist_ok=True)
            self._register()
            self._threads = [
                threading.Thread(
                    target=target, args=(self.epoch, self._stop), name=f"{self.name}-{kind}", daemon=True
                )
                for kind, target in (("heartbeat", self._heartbeat), ("pods", self._watch_pods))
            ]
            for thread in self._threads:
                thread.start()

    def kill(self) -> None:
        """The node dies at once: every process of every pod gets SIGKILL and the heartbeats stop."""
        with self._lock:
            self.running = False
            self._stop.set()
            signal_marked(self.view.marker, signal.SIGKILL)
            runners = list(self.runners.values())
            self.runners.clear()
        for runner in runners:
            runner.join(timeout=10)
        # The watch may sit in its request for up to _WATCH_SECONDS; it acts on nothing of a later epoch.

    def restart(self) -> None:
        """Kill (if running) and start again: pods that were running are reported lost (Failed) unless their
        restartPolicy restarts them; pending ones start."""
        self.kill()
        self.start()

    def stop(self, grace_seconds: float, delete: bool) -> None:
        """Shut down: SIGTERM every pod process, SIGKILL after grace_seconds, optionally delete the Node."""
        signal_marked(self.view.marker, signal.SIGTERM)
        deadline = time.monotonic() + grace_seconds
        while time.monotonic() < deadline and any(r.has_processes() for r in list(self.runners.values())):
            time.sleep(0.1)
        self.kill()
        if delete:
            with contextlib.suppress(ApiException):
                self.agent.core.delete_node(self.name)
            with contextlib.suppress(ApiException):
                client.CoordinationV1Api(self.agent.api).delete_namespaced_lease(self.name, LEASE_NAMESPACE)

    # -- registration and heartbeats -----------------------------------------------------------------------

    def _node_status(self, ready_since: str) -> Manifest:
        stamp = now()
        capacity = {
            "cpu": self.agent.resources.cpu,
            "memory": self.agent.resources.memory,
            "pods": str(self.agent.resources.pods),
            "ephemeral-storage": "100Gi",
        }

        def condition(kind: str, status: str, reason: str, since: str) -> Manifest:
            return {
                "type": kind,
                "status": status,
                "reason": reason,
                "message": f"process-backed node {reason}",
                "lastHeartbeatTime": stamp,
                "lastTransitionTime": since,
            }

        return {
            "capacity": capacity,
            "allocatable": capacity,
            "conditions": [
                condition("MemoryPressure", "False", "KubeletHasSufficientMemory", ready_since),
                condition("DiskPressure", "False", "KubeletHasNoDiskPressure", ready_since),
                condition("PIDPressure", "False", "KubeletHasSufficientPID", ready_since),
                condition("Ready", "True", "KubeletReady", ready_since),
            ],
            "addresses": [
                {"type": "InternalIP", "address": self.ip},
                {"type": "Hostname", "address": self.name},
            ],
            "nodeInfo": {
                "machineID": self.name,
                "systemUUID": self.name,
                "bootID": f"{self.name}-{self.epoch}",
                "kernelVersion": os.uname().release,
                "osImage": "ftspark process-backed node",
                "containerRuntimeVersion": "ftspark-local://1",
                "kubeletVersion": _KUBELET_VERSION,
                "kubeProxyVersion": "",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
        }

    def _register(self) -> None:
        core = self.agent.core
        body = {"metadata": {"name": self.name, "labels": self.labels}}
        try:
            node = core.create_node(body)
        except ApiException as error:
            if error.status != 409:
                raise
            node = core.patch_node(self.name, body)
        self._ready_since = now()
        merge_patch(
            self.agent.api,
            f"/api/v1/nodes/{self.name}/status",
            {"status": self._node_status(self._ready_since)},
        )
        lease = {
            "metadata": {
                "name": self.name,
                "ownerReferences": [
                    {"apiVersion": "v1", "kind": "Node", "name": self.name, "uid": node.metadata.uid}
                ],
            },
            "spec": {
                "holderIdentity": self.name,
                "leaseDurationSeconds": LEASE_DURATION,
                "renewTime": _micro_now(),
            },
        }
        coordination = client.CoordinationV1Api(self.agent.api)
        try:
            coordination.create_namespaced_lease(LEASE_NAMESPACE, lease)
        except ApiException as error:
            if error.status != 409:
                raise
            # A restarted node takes its Lease over again, whatever it held.
            merge_patch(
                self.agent.api,
                f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NAMESPACE}/leases/{self.name}",
                {"spec": lease["spec"]},
            )

    def _heartbeat(self, epoch: int, stop: threading.Event) -> None:
        last_status = time.monotonic()
        while not stop.wait(LEASE_RENEW_SECONDS) and self.alive(epoch):
            try:
                merge_patch(
                    self.agent.api,
                    f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NAMESPACE}/leases/{self.name}",
                    {"spec": {"renewTime": _micro_now(), "holderIdentity": self.name}},
                )
                if time.monotonic() - last_status >= STATUS_SECONDS:
                    merge_patch(
                        self.agent.api,
                        f"/api/v1/nodes/{self.name}/status",
                        {"status": self._node_status(self._ready_since)},
                    )
                    last_status = time.monotonic()
            except (ApiException, *API_UNREACHABLE) as error:
                log.warning("heartbeat of %s failed: %s", self.name, error)

    # -- pods ----------------------------------------------------------------------------------------------

    def _watch_pods(self, epoch: int, stop: threading.Event) -> None:
        core = self.agent.core
        selector = f"spec.nodeName={self.name}"
        while self.alive(epoch):
            try:
                listing = core.list_pod_for_all_namespaces(field_selector=selector)
                present = set()
                for item in listing.items:
                    pod = self.agent.api.sanitize_for_serialization(item)
                    present.add(pod["metadata"]["uid"])
                    self._sync(pod, epoch)
                for uid in set(self.runners) - present:
                    self._forget(uid)
                stream = watch.Watch().stream(
                    core.list_pod_for_all_namespaces,
                    field_selector=selector,
                    resource_version=listing.metadata.resource_version,
                    timeout_seconds=_WATCH_SECONDS,
                )
                for event in stream:
                    if not self.alive(epoch):
                        return
                    pod = self.agent.api.sanitize_for_serialization(event["object"])
                    if event["type"] == "DELETED":
                        self._forget(pod["metadata"]["uid"])
                    elif event["type"] in ("ADDED", "MODIFIED"):
                        self._sync(pod, epoch)
            except Exception:
                if self.alive(epoch):
                    log.exception("watching the pods of %s", self.name)
                stop.wait(1.0)

    def _sync(self, pod: Manifest, epoch: int) -> None:
        metadata, status = pod["metadata"], pod.get("status") or {}
        deleting = metadata.get("deletionTimestamp") is not None
        grace = metadata.get("deletionGracePeriodSeconds")
        if grace is None:
            grace = pod["spec"].get("terminationGracePeriodSeconds", 30)
        with self._lock:
            if not self.alive(epoch):
                return
            runner = self.runners.get(metadata["uid"])
            if runner is None:
                if status.get("phase") in ("Succeeded", "Failed"):
                    if deleting:  # finished before this agent saw it: only the object is left to remove
                        with contextlib.suppress(ApiException):
                            self.agent.core.delete_namespaced_pod(
                                metadata["name"], metadata["namespace"], grace_period_seconds=0
                            )
                    return
                counts = {s["name"]: s.get("restartCount", 0) for s in status.get("containerStatuses") or []}
                lost = status.get("phase") == "Running"  # it ran before this node's restart
                if lost and pod["spec"].get("restartPolicy", "Always") != "Never":
                    counts = {name: count + 1 for name, count in counts.items()}
                    lost = False
                runner = PodRunner(self.view, pod, epoch, counts, lost=lost)
                self.runners[metadata["uid"]] = runner
                runner.start()
            if deleting:
                runner.request_delete(int(grace))

    def _forget(self, uid: str) -> None:
        """The pod object is gone (finalized by us, or force-deleted): nothing of it may keep running."""
        with self._lock:
            runner = self.runners.pop(uid, None)
        if runner is not None and not runner.done.is_set():
            runner.request_delete(0)

    def find(self, namespace: str, name: str) -> PodRunner | None:
        with self._lock:
            for runner in self.runners.values():
                metadata = runner.pod["metadata"]
                if (metadata["namespace"], metadata["name"]) == (namespace, name):
                    return runner
        return None


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""  # gone meanwhile


def _micro_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + f".{int(time.time() * 1e6) % 1_000_000:06d}Z"


def _sweep_abandoned_roots() -> None:
    """Remove node roots whose agent process died without cleaning up (SIGKILL)."""
    for candidate in Path(tempfile.gettempdir()).glob(f"{_ROOT_PREFIX}*"):
        try:
            os.kill(int((candidate / _OWNER_FILE).read_text()), 0)
        except (FileNotFoundError, ValueError):
            continue
        except ProcessLookupError:
            shutil.rmtree(candidate, ignore_errors=True)


class NodeAgent:
    """N process-backed Nodes: node i is named <prefix>-<i>, has InternalIP 127.0.0.<first_ip + i> (its pods'
    IP too) and lives in <root>/<name>/ (hostPath volumes under host/, pod volumes under pods/, container logs
    under logs/<namespace>_<pod>_<uid>/<container>/<restart>.log)."""

    def __init__(
        self,
        kubeconfig: Path,
        nodes: int = 1,
        *,
        prefix: str = "node",
        root: Path | None = None,
        first_ip: int = 2,
        zones: int = 2,
        labels: dict[str, str] | None = None,
        resources: Resources | None = None,
    ):
        if first_ip < 2 or first_ip + nodes > 255:
            raise ValueError("node IPs are 127.0.0.2 … 127.0.0.254 (127.0.0.1 is the API server's)")
        self.api = config.new_client_from_config(config_file=str(kubeconfig))
        self.core = client.CoreV1Api(self.api)
        server = urllib.parse.urlsplit(
            yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
        )
        self.api_host, self.api_port = server.hostname or "127.0.0.1", server.port or 443
        self.resources = resources or Resources()
        self._owns_root = root is None
        if root is None:
            _sweep_abandoned_roots()
            root = Path(tempfile.mkdtemp(prefix=_ROOT_PREFIX))
            (root / _OWNER_FILE).write_text(str(os.getpid()))
        self.root = root
        self.nodes = [
            Node(
                self,
                name := f"{prefix}-{index}",
                f"127.0.0.{first_ip + index}",
                {
                    "kubernetes.io/hostname": name,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                    "node.kubernetes.io/instance-type": "local-process",
                    "topology.kubernetes.io/region": "local",
                    "topology.kubernetes.io/zone": f"zone-{index % zones}",
                    **(labels or {}),
                },
            )
            for index in range(nodes)
        ]

    def start(self) -> NodeAgent:
        try:
            for node in self.nodes:
                node.start()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self, grace_seconds: float = 5.0, delete_nodes: bool = True) -> None:
        """Stop every node (SIGTERM, then SIGKILL after grace_seconds), delete the Nodes, remove the root."""
        try:
            for node in self.nodes:
                node.stop(grace_seconds, delete_nodes)
        finally:
            if self._owns_root:
                shutil.rmtree(self.root, ignore_errors=True)
            self.api.close()

    def __enter__(self) -> NodeAgent:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- lookups -------------------------------------------------------------------------------------------

    def node(self, name: str) -> Node:
        for node in self.nodes:
            if node.name == name:
                return node
        raise KeyError(f"no node {name} in this agent")

    def runner(self, namespace: str, name: str) -> PodRunner:
        for node in self.nodes:
            found = node.find(namespace, name)
            if found is not None:
                return found
        raise KeyError(f"pod {namespace}/{name} runs on none of this agent's nodes")

    def log(self, namespace: str, name: str, container: str | None = None) -> str:
        """The newest log of a container (any, by default) of a pod that ran here, even if it is deleted."""
        logs = [
            path
            for node in self.nodes
            for path in node.root.glob(f"logs/{namespace}_{name}_*/{container or '*'}/*.log")
        ]
        if not logs:
            raise KeyError(f"no logs of pod {namespace}/{name} on this agent's nodes")
        return max(logs, key=lambda path: path.stat().st_mtime).read_text(errors="replace")

    # -- faults --------------------------------------------------------------------------------------------

    def kill_pod(self, namespace: str, name: str) -> None:
        """SIGKILL every process of a pod (a driver's or an executor's): it ends with exit code 137."""
        self.runner(namespace, name).kill()

    def kill_pods(self, namespace: str, label_selector: str) -> list[str]:
        """kill_pod for every pod matching the selector that runs here, e.g. 'spark-role=executor'."""
        names = [
            p.metadata.name
            for p in self.core.list_namespaced_pod(namespace, label_selector=label_selector).items
        ]
        killed = []
        for name in names:
            with contextlib.suppress(KeyError):
                self.kill_pod(namespace, name)
                killed.append(name)
        return killed

    def kill_node(self, name: str) -> None:
        self.node(name).kill()

    @contextlib.contextmanager
    def jvm_stopped(self, namespace: str, name: str, container: str) -> Iterator[list[int]]:
        """SIGSTOP the JVMs of a pod's container (found among its processes, which all carry its marker) for
        the block: the container still runs as far as Kubernetes can tell, its JVM does nothing. Afterwards
        every process of the container left gets SIGCONT, so nothing stays stopped whatever the block did."""
        prefix = self._container_marker(namespace, name, container)
        jvms = [pid for pid in marked_pids(prefix) if _command(pid) == "java"]
        if not jvms:
            raise KeyError(f"no JVM runs in container {container} of pod {namespace}/{name}")
        try:
            for pid in jvms:
                os.kill(pid, signal.SIGSTOP)
            yield jvms
        finally:
            signal_marked(prefix, signal.SIGCONT)

    def container_pids(self, namespace: str, name: str, container: str) -> list[int]:
        """Every process of a pod's container (they all carry its marker)."""
        return marked_pids(self._container_marker(namespace, name, container))

    def _container_marker(self, namespace: str, name: str, container: str) -> str:
        runner = self.runner(namespace, name)
        return f"{runner.node.marker}{runner.uid}/{container}"

    def restart_node(self, name: str) -> None:
        self.node(name).restart()
