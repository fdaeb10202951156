"""ftspark as a user installs it, on real nodes: the control plane, real kubelets running the project's
images (`make images`), an S3 server the pods reach, and the operator installed the documented way (`helm
install` of the chart, or `kubectl apply` of deploy/ftspark-operator.yaml): the real-node tier, `make demo`.

Faults are real too: a container is SIGKILLed through its node's containerd (exit 137, as an OOM kill or a
crash), a node loses its kubelet, containerd, shims and containers at once. A new one is a TourWorld method
here and in worlds.process_nodes.World, driven by a step of ftspark_dev.scenarios.tour.FaultTour.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client, config

from ftspark.manifests import merge_template
from ftspark.runtime.config import IMAGE_JARS_DIR
from ftspark_dev.cluster.controlplane import ControlPlane
from ftspark_dev.cluster.operators import leading, lease_holder, probe
from ftspark_dev.cluster.processes import REPO_ROOT
from ftspark_dev.cluster.s3server import ACCESS_KEY, REGION, SECRET_KEY, S3Server
from ftspark_dev.cluster.versions import SPARK_IMAGE
from ftspark_dev.generate.bundle import CHART
from ftspark_dev.realnodes import RealNodes, network
from ftspark_dev.realnodes.images import built_images
from ftspark_dev.subjects.windowed_counts import EXAMPLE
from ftspark_dev.worlds.process_nodes import (
    JOBS_NAMESPACE,
    OPERATOR_NAMESPACE,
    SHORT_LEASE,
    JobsClient,
)  # the jobs' at Pod Security "restricted"

EXAMPLES = REPO_ROOT / "examples"
STORAGE_CLASS = "local-folders"  # the default class: FolderProvisioner's
PROVISIONER = "ftspark.dev/local-folders"
DEMO_BUCKET = "ftspark-demo"  # the bucket the examples name


def helm_binary() -> Path:
    built = subprocess.run(
        [str(REPO_ROOT / "tools" / "helm" / "build.sh")], check=True, stdout=subprocess.PIPE, text=True
    )
    return Path(built.stdout.strip().splitlines()[-1])


@dataclass
class RealWorld(JobsClient):
    plane: ControlPlane
    nodes: RealNodes
    s3: S3Server
    api: client.ApiClient
    work: Path

    @property
    def core(self) -> client.CoreV1Api:
        return client.CoreV1Api(self.api)

    # -- the documented install ----------------------------------------------------------------------------

    def s3_secret(self, namespace: str) -> None:
        """`kubectl create secret generic s3 --from-literal=AWS_ACCESS_KEY_ID=… …`, as the quickstart says."""
        self.plane.kubectl(
            "-n",
            namespace,
            "create",
            "secret",
            "generic",
            "s3",
            f"--from-literal=AWS_ACCESS_KEY_ID={ACCESS_KEY}",
            f"--from-literal=AWS_SECRET_ACCESS_KEY={SECRET_KEY}",
        )

    def helm_install(self, *values: str, pod_security: str | None = None) -> subprocess.CompletedProcess[str]:
        """`helm install` as the quickstart has it, plus `--set` values, after its namespaces: the jobs' at
        Pod Security `restricted`, the release's at pod_security, labelled first (the sweeper's hostPath
        needs `privileged`); each with the Secret `s3`."""
        self.plane.kubectl("create", "namespace", JOBS_NAMESPACE)
        self.plane.kubectl(
            "label", "namespace", JOBS_NAMESPACE, "pod-security.kubernetes.io/enforce=restricted"
        )
        self.s3_secret(JOBS_NAMESPACE)
        self.plane.kubectl("create", "namespace", OPERATOR_NAMESPACE)
        if pod_security:
            self.plane.kubectl(
                "label", "namespace", OPERATOR_NAMESPACE, f"pod-security.kubernetes.io/enforce={pod_security}"
            )
        self.s3_secret(OPERATOR_NAMESPACE)
        return subprocess.run(
            [
                str(helm_binary()),
                "install",
                "ftspark-operator",
                str(CHART),
                f"--kubeconfig={self.plane.kubeconfig}",
                f"--namespace={OPERATOR_NAMESPACE}",
                f"--set=s3.endpoint={self.s3.endpoint}",
                "--set=s3.credentialsSecret=s3",
                f"--set=watchNamespaces={{{JOBS_NAMESPACE}}}",
                *(f"--set={value}" for value in values),
                "--wait",
                "--timeout=5m",
            ],
            capture_output=True,
            text=True,
            check=False,
            timeout=400,
        )

    def helm_uninstall(self) -> None:
        subprocess.run(
            [
                str(helm_binary()),
                "uninstall",
                "ftspark-operator",
                f"--kubeconfig={self.plane.kubeconfig}",
                f"--namespace={OPERATOR_NAMESPACE}",
                "--wait",
            ],
            capture_output=True,
            check=True,
            timeout=300,
        )

    def example(self, file: str, **edits: Any) -> dict[str, Any]:
        """An example manifest with the edits the quickstart names: the S3 endpoint (and its region) for this
        installation, plus spec fields in edits."""
        body: dict[str, Any] = yaml.safe_load((EXAMPLES / file).read_text())
        conf = body["spec"].setdefault("sparkConf", {})
        conf["spark.hadoop.fs.s3a.endpoint"] = self.s3.endpoint
        conf["spark.hadoop.fs.s3a.endpoint.region"] = REGION
        body["spec"] |= edits
        return body

    def volume(self, claim: str, folder: Path) -> None:
        """A claim in the jobs namespace bound to a folder of this machine (so every node sees the same files,
        and so does the test), root's and 0755 as a provisioner makes one. The drivers' and executors'
        fsGroup (the operator's default) makes it writable by the Spark image's user."""
        folder.mkdir(parents=True, exist_ok=True)
        folder.chmod(0o755)
        namespace = JOBS_NAMESPACE
        claim_ref = {"namespace": namespace, "name": claim}
        claim_body = {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": claim, "namespace": namespace},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}},
                "storageClassName": "",  # this volume, not one from the default class
            },
        }
        for manifest in (
            local_volume(self.api, f"{namespace}-{claim}", folder, claim_ref, "1Gi"),
            claim_body,
        ):
            self.plane.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(manifest))

    def claimed_folder(self, claim: str, namespace: str = JOBS_NAMESPACE) -> Path:
        """The folder of this machine behind a bound claim (the default class's, or volume()'s)."""
        bound = self.core.read_namespaced_persistent_volume_claim(claim, namespace)
        return Path(self.core.read_persistent_volume(bound.spec.volume_name).spec.local.path)

    # -- jobs (ftspark_dev.scenarios.tour.TourWorld) --------------------------------------------------

    def job(
        self,
        name: str,
        input_dir: Path,
        output_dir: Path,
        example: Path = EXAMPLE,
        *,
        short_lease: bool = False,
        **spec: Any,
    ) -> dict[str, Any]:
        """An example streaming job (windowed counts unless told) reading input_dir and writing output_dir,
        folders of this machine that reach the pods as PersistentVolumes; S3 credentials from the Secret, as
        the examples take them. short_lease: SHORT_LEASE's driver-Lease timings instead of the defaults users
        get: with a 2 s renew deadline a driver on these busy nodes (2 cores for the control plane, three
        kubelets and every JVM) can lose its Lease to a slow answer, a failure no fault caused."""
        self.volume(f"{name}-in", input_dir)
        self.volume(f"{name}-out", output_dir)
        mounts = [{"name": "in", "mountPath": "/data/in", "readOnly": True}]
        volumes = [{"name": "in", "persistentVolumeClaim": {"claimName": f"{name}-in", "readOnly": True}}]
        out_volume = {"name": "out", "persistentVolumeClaim": {"claimName": f"{name}-out"}}
        body = self.example("windowed-counts.yaml")
        body["metadata"] = {"name": name, "namespace": JOBS_NAMESPACE}
        body["spec"] |= {
            "image": SPARK_IMAGE,
            "mainApplicationFile": f"local:///opt/ftspark/examples/{example.name}",
            "arguments": ["/data/in", "/data/out"],
            "checkpoint": {"storage": f"s3://{DEMO_BUCKET}/jobs/{name}", "retained": 3},
            "driver": {
                "memory": "768m",
                "podTemplate": {
                    "spec": {
                        "containers": [
                            {
                                "name": "driver",
                                "volumeMounts": [*mounts, {"name": "out", "mountPath": "/data/out"}],
                            }
                        ],
                        "volumes": [*volumes, out_volume],
                    }
                },
            },
            # The file source's executors read the input files too.
            "executor": {
                "instances": 1,
                "memory": "768m",
                "podTemplate": {
                    "spec": {"containers": [{"name": "executor", "volumeMounts": mounts}], "volumes": volumes}
                },
            },
            "restartStrategy": {"type": "fixed-delay", "fixedDelay": {"attempts": 10, "delaySeconds": 1}},
            "stopTimeoutSeconds": 120,
            "env": [
                *body["spec"]["env"],
                *({"name": k, "value": v} for k, v in (SHORT_LEASE if short_lease else {}).items()),
            ],
        }
        # The UI is off unless the job's spec.ui turns it on (the operator's default).
        body["spec"]["sparkConf"] |= {"spark.sql.shuffle.partitions": "2"}
        body["spec"]["sparkConf"] |= spec.pop("sparkConf", {})  # the example's S3 settings are kept
        # e.g. a standby, a probe in the driver's pod template: merged as the operator merges templates.
        body["spec"]["driver"] = merge_template(body["spec"]["driver"], spec.pop("driver", {}))
        body["spec"] |= spec
        return body

    def log(self, pod: str, namespace: str = JOBS_NAMESPACE) -> str:
        return self.plane.kubectl("-n", namespace, "logs", pod, "--tail=300", check=False).stdout

    @property
    def bucket(self) -> str:
        return DEMO_BUCKET

    @property
    def jars(self) -> Path:
        """The S3A jars, where a pod of the Spark image has them."""
        return IMAGE_JARS_DIR

    def container_pids(self, pod: str, container: str) -> list[int]:
        """Every process of a pod's container, as its node's containerd lists them (this machine's PIDs)."""
        found = self.core.read_namespaced_pod(pod, JOBS_NAMESPACE)
        status = next(s for s in found.status.container_statuses if s.name == container)
        listed = self.nodes.node(found.spec.node_name).ctr(
            "tasks", "ps", status.container_id.removeprefix("containerd://")
        )
        return [int(line.split()[0]) for line in listed.stdout.splitlines()[1:] if line.strip()]

    # -- faults --------------------------------------------------------------------------------------------

    def kill_pod(self, pod: str, namespace: str = JOBS_NAMESPACE) -> None:
        """SIGKILL of the pod's (first) container, through the containerd of the node it runs on."""
        self._task(pod, namespace, "kill", "--signal", "SIGKILL")

    def freeze_pod(self, pod: str) -> None:
        """The pod's (first) container frozen as a whole (its freezer cgroup), as a paused VM or a node stuck
        in I/O would leave it: every process of it stops at once, none can notice."""
        self._task(pod, JOBS_NAMESPACE, "pause")

    def thaw_pod(self, pod: str) -> None:
        """The frozen container resumed, as a paused VM is: signals sent meanwhile land at once."""
        self._task(pod, JOBS_NAMESPACE, "resume")

    def _task(self, pod: str, namespace: str, *command: str) -> None:
        found = self.core.read_namespaced_pod(pod, namespace)
        container_id = found.status.container_statuses[0].container_id.removeprefix("containerd://")
        self.nodes.node(found.spec.node_name).ctr("tasks", *command, container_id)

    def kill_pods(self, label_selector: str) -> list[str]:
        pods = self.core.list_namespaced_pod(JOBS_NAMESPACE, label_selector=label_selector).items
        running = [p.metadata.name for p in pods if p.status.phase == "Running"]
        for pod in running:
            self.kill_pod(pod)
        return running

    def kill_node(self, node: str) -> None:
        self.nodes.kill_node(node)

    def restart_node(self, node: str) -> None:
        self.nodes.restart_node(node)

    def operator_pods(self) -> list[client.V1Pod]:
        pods = self.core.list_namespaced_pod(
            OPERATOR_NAMESPACE, label_selector="app.kubernetes.io/name=ftspark-operator"
        ).items
        return [p for p in pods if p.metadata.deletion_timestamp is None]

    def operator_leader(self) -> str | None:
        return lease_holder(self.api, OPERATOR_NAMESPACE)

    def probe(self, pod: client.V1Pod, path: str) -> tuple[int, str]:
        """An operator replica's /healthz, /readyz or /metrics, from the host (it routes to every pod)."""
        return probe(f"http://{pod.status.pod_ip}:8080{path}")

    def acting_leaders(self) -> list[str]:
        return [
            pod.metadata.name
            for pod in self.operator_pods()
            if pod.status.pod_ip and leading(self.probe(pod, "/healthz"))
        ]

    def kill_operator(self, identity: str) -> None:
        """The kubelet restarts the container (the pod's restartPolicy), under the same identity."""
        self.kill_pod(identity, OPERATOR_NAMESPACE)


def local_volume(
    api: client.ApiClient,
    name: str,
    folder: Path,
    claim_ref: dict[str, str],
    capacity: str,
    storage_class: str = "",
) -> dict[str, Any]:
    """A `local` PersistentVolume of a folder of this machine, mountable on every node (they all are this
    machine), pre-bound to one claim."""
    nodes = [node.metadata.name for node in client.CoreV1Api(api).list_node().items]
    anywhere = {"key": "kubernetes.io/hostname", "operator": "In", "values": nodes}
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        # Who deletes it once released: the PV controller leaves a provisioner's volumes to it.
        "metadata": {
            "name": name,
            "annotations": {"pv.kubernetes.io/provisioned-by": PROVISIONER} if storage_class else {},
        },
        "spec": {
            "capacity": {"storage": capacity},
            "accessModes": ["ReadWriteOnce"],
            "local": {"path": str(folder)},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [anywhere]}]}},
            "claimRef": claim_ref,
            "storageClassName": storage_class,
            "persistentVolumeReclaimPolicy": "Delete" if storage_class else "Retain",
        },
    }


class FolderProvisioner:
    """The cluster's default StorageClass, provisioned as local-path does on a cluster of one's own (kind's
    default): binding waits for the first pod that mounts the claim, then the claim gets a new folder of
    this machine, root's and 0755, as a `local` PersistentVolume; a released volume goes with its folder.
    What a user's dynamic provisioner does, so that the quickstart's claims are written as on theirs
    (root-owned, made writable by the pods' fsGroup). Waiting for the first consumer matters beyond
    realism: with `Immediate` binding the scheduler may park a pod that came before its claim's volume as
    unschedulable until its 5 min flush (a CI run's quickstart timed out so, evidently not requeued when the
    volume came), where with the first
    consumer it waits for the binding itself, polling each second."""

    def __init__(self, kubeconfig: Path, root: Path) -> None:
        self._api = config.new_client_from_config(config_file=str(kubeconfig))
        self._root = root
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="folder-provisioner", daemon=True)
        self.errors: list[str] = []

    def __enter__(self) -> FolderProvisioner:
        storage = client.StorageV1Api(self._api)
        storage.create_storage_class(
            {
                "metadata": {
                    "name": STORAGE_CLASS,
                    "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
                },
                "provisioner": PROVISIONER,
                "reclaimPolicy": "Delete",
                "volumeBindingMode": "WaitForFirstConsumer",
            }
        )
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            try:
                self._provision()
                self._reclaim()
            except Exception as error:  # kept for the world's teardown to report
                self.errors.append(repr(error))

    def _provision(self) -> None:
        core = client.CoreV1Api(self._api)
        for claim in core.list_persistent_volume_claim_for_all_namespaces().items:
            wanted = (claim.metadata.annotations or {}).get("volume.kubernetes.io/storage-provisioner")
            if claim.status.phase != "Pending" or wanted != PROVISIONER or claim.metadata.deletion_timestamp:
                continue
            name = f"pvc-{claim.metadata.uid}"
            folder = self._root / name
            folder.mkdir(mode=0o755, parents=True, exist_ok=True)
            claim_ref = {
                "namespace": claim.metadata.namespace,
                "name": claim.metadata.name,
                "uid": claim.metadata.uid,
            }
            capacity = claim.spec.resources.requests["storage"]
            volume = local_volume(self._api, name, folder, claim_ref, capacity, STORAGE_CLASS)
            with contextlib.suppress(client.ApiException):  # made on an earlier pass: 409
                core.create_persistent_volume(volume)

    def _reclaim(self) -> None:
        core = client.CoreV1Api(self._api)
        for volume in core.list_persistent_volume().items:
            if volume.spec.storage_class_name == STORAGE_CLASS and volume.status.phase == "Released":
                core.delete_persistent_volume(volume.metadata.name)
                shutil.rmtree(volume.spec.local.path, ignore_errors=True)


@contextlib.contextmanager
def running_real_world(
    nodes: int = 3, image_names: tuple[str, ...] = (), node_grace_seconds: int = 20
) -> Iterator[RealWorld]:
    """image_names: tools/images/build.sh's names of what the nodes get (default: an installation's);
    node_grace_seconds: the node controller's --node-monitor-grace-period."""
    images = built_images(*image_names)
    real = RealNodes(nodes=nodes, images=images, prefix="node").open()
    work = Path(tempfile.mkdtemp(prefix="ftspark-realworld-"))
    work.chmod(0o755)
    try:
        with (
            ControlPlane(
                address=network.HOST_ADDRESS,
                service_cidr=network.SERVICE_CIDR,
                service_account_admission=True,
                node_grace_seconds=node_grace_seconds,
            ) as plane,
            S3Server(host=network.HOST_ADDRESS) as s3,
        ):
            plane.start_controllers()
            started = time.monotonic()
            real.start(plane)
            print(f"{nodes} real nodes Ready in {time.monotonic() - started:.1f} s (images imported)")
            s3.client().create_bucket(Bucket=DEMO_BUCKET)
            api = config.new_client_from_config(config_file=str(plane.kubeconfig))
            with FolderProvisioner(plane.kubeconfig, work / "volumes") as provisioner:
                yield RealWorld(plane, real, s3, api, work)
            assert not provisioner.errors, f"the folder provisioner failed: {provisioner.errors}"
    finally:
        real.stop()
        shutil.rmtree(work, ignore_errors=True)
