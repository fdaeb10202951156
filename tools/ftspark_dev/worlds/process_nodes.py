"""A whole ftspark installation on this machine, for the end-to-end suite and `make demo`: the real control
plane (with the ServiceAccount admission plugin, so pods get their tokens), three process-backed nodes, S3,
the CRD, and two operator replicas.

Real Spark runs on it: the operator creates the driver pod, our runtime in it runs spark-submit in client
mode, Spark's Kubernetes backend creates executor pods, the real scheduler places them and the node agent runs
them as JVMs.

A new fault is a step of ftspark_dev.scenarios.tour, and what it needs of this installation a method of
World (one of its TourWorld methods, in worlds.real_nodes.RealWorld too, if real nodes can suffer it); a new
node kind gets a world of its own like this one.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client, config

from ftspark import API_GROUP, API_VERSION, PLURAL
from ftspark.protocol import (
    DRIVER_CONTAINER,
    DRIVER_SERVICE_ACCOUNT,
    JOB_LABEL,
    ROLE_LABEL,
    SPARK_APP_SELECTOR_LABEL,
    STANDBY_LABEL,
    RuntimeEnv,
    spark_app_id,
    term_floor_name,
)
from ftspark_dev.cluster.controlplane import ControlPlane
from ftspark_dev.cluster.netproxy import ApiProxy
from ftspark_dev.cluster.operators import OPERATOR_LEASE, OperatorFleet, event_reasons, job_manifest, leading
from ftspark_dev.cluster.processes import REPO_ROOT
from ftspark_dev.cluster.s3server import ACCESS_KEY, SECRET_KEY, S3Server
from ftspark_dev.generate.bundle import driver_policy
from ftspark_dev.nodes import NodeAgent
from ftspark_dev.subjects.windowed_counts import EXAMPLE

OPERATOR_NAMESPACE, JOBS_NAMESPACE = "ftspark-system", "jobs"
# Jobs get their S3 credentials from a Secret, as the examples do: a job may not carry them in plain text.
S3_SECRET = "s3"
S3_CREDENTIALS = {"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY}
S3_CREDENTIALS_ENV: list[dict[str, Any]] = [
    {"name": key, "secretKeyRef": {"name": S3_SECRET, "key": key}} for key in S3_CREDENTIALS
]


def s3_credentials_secret() -> client.V1Secret:
    return client.V1Secret(metadata=client.V1ObjectMeta(name=S3_SECRET), string_data=S3_CREDENTIALS)


DRIVER_USER = f"system:serviceaccount:{JOBS_NAMESPACE}:{DRIVER_SERVICE_ACCOUNT}"
# The API server's audit log records what drivers (Spark's Kubernetes client and our runtime) ask of it: the
# measure of their Role (docs/architecture.md, "The driver's rights"); and every other write but the noisy
# ones (Lease renewals, pod status, Events): who wrote what, when (the soak's check that one writer acts).
# The operator's election is no acting either: its Lease, and the term floor beside it, which a contender
# raises the moment it re-creates a deleted Lease (while the old holder may act until its next renew: the
# raised floor is what fences that holder out; the contender itself holds off a lease duration).
AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [
        {"level": "Metadata", "users": [DRIVER_USER]},
        {
            "level": "None",
            "resources": [
                {"group": "", "resources": ["pods/status", "nodes", "nodes/status", "events"]},
                {"group": "coordination.k8s.io", "resources": ["leases"]},
                {
                    "group": "",
                    "resources": ["configmaps"],
                    "resourceNames": [term_floor_name(OPERATOR_LEASE)],
                },
            ],
        },
        {"level": "Metadata", "verbs": ["create", "update", "patch", "delete", "deletecollection"]},
        {"level": "None"},
    ],
}


# Driver-Lease timings for the faults whose next attempt waits the Lease out (a lost node, a frozen JVM):
# 3 s / 2 s / 0.5 s instead of the defaults (15 s / 10 s / 2 s).
SHORT_LEASE = {
    RuntimeEnv.LEASE_DURATION: "3",
    RuntimeEnv.LEASE_RENEW_DEADLINE: "2",
    RuntimeEnv.LEASE_RETRY_PERIOD: "0.5",
}


class JobsClient:
    """The jobs of an installation, in its jobs namespace, through the API server: shared by the
    process-backed World and the real-node RealWorld."""

    api: client.ApiClient

    def create(self, body: dict[str, Any]) -> None:
        client.CustomObjectsApi(self.api).create_namespaced_custom_object(
            API_GROUP, API_VERSION, JOBS_NAMESPACE, PLURAL, body
        )

    def patch(self, name: str, spec: dict[str, Any]) -> None:
        client.CustomObjectsApi(self.api).patch_namespaced_custom_object(
            API_GROUP, API_VERSION, JOBS_NAMESPACE, PLURAL, name, {"spec": spec}
        )

    def delete(self, name: str) -> None:
        """Deletes the job and waits until its driver and executor pods are gone (ownerReferences: the
        garbage collector deletes the drivers, and Spark's executors with their driver)."""
        uid = self.uid(name)
        client.CustomObjectsApi(self.api).delete_namespaced_custom_object(
            API_GROUP, API_VERSION, JOBS_NAMESPACE, PLURAL, name
        )
        app = spark_app_id(uid, 0).rsplit("-", 1)[0] + "-"  # every attempt's executors

        def remaining() -> list[str]:
            pods = client.CoreV1Api(self.api).list_namespaced_pod(JOBS_NAMESPACE).items
            return [
                p.metadata.name
                for p in pods
                if (p.metadata.labels or {}).get(JOB_LABEL) == name
                or (p.metadata.labels or {}).get(SPARK_APP_SELECTOR_LABEL, "").startswith(app)
            ]

        deadline = time.monotonic() + 120
        while left := remaining():
            assert time.monotonic() < deadline, f"pods of {name} outlived it by 120 s: {left}"
            time.sleep(0.5)

    def job_names(self) -> list[str]:
        listed = client.CustomObjectsApi(self.api).list_namespaced_custom_object(
            API_GROUP, API_VERSION, JOBS_NAMESPACE, PLURAL
        )
        return [item["metadata"]["name"] for item in listed["items"]]

    def resource(self, name: str) -> dict[str, Any]:
        body: dict[str, Any] = client.CustomObjectsApi(self.api).get_namespaced_custom_object(
            API_GROUP, API_VERSION, JOBS_NAMESPACE, PLURAL, name
        )
        return body

    def uid(self, name: str) -> str:
        return str(self.resource(name)["metadata"]["uid"])

    def status(self, name: str) -> dict[str, Any]:
        status: dict[str, Any] = self.resource(name).get("status") or {}
        return status

    def drivers(self, name: str) -> list[client.V1Pod]:
        """The job's driver pods, not its standby (which is no driver until promoted)."""
        selector = f"{JOB_LABEL}={name},{ROLE_LABEL}=driver,!{STANDBY_LABEL}"
        pods = client.CoreV1Api(self.api).list_namespaced_pod(JOBS_NAMESPACE, label_selector=selector)
        return sorted(pods.items, key=lambda p: p.metadata.name)

    def standbys(self, name: str) -> list[client.V1Pod]:
        selector = f"{JOB_LABEL}={name},{STANDBY_LABEL}"
        return list(
            client.CoreV1Api(self.api).list_namespaced_pod(JOBS_NAMESPACE, label_selector=selector).items
        )

    def events(self, name: str, uid: str | None = None) -> list[str]:
        """The reasons of the Events about the object of that name, oldest first; given its uid, only those of
        this object (Events outlive it: an earlier test's job of the same name left its own)."""
        return event_reasons(self.api, JOBS_NAMESPACE, name, uid)


@dataclass
class World(JobsClient):
    plane: ControlPlane
    nodes: NodeAgent
    s3: S3Server
    api: client.ApiClient
    fleet: OperatorFleet
    bucket: str
    jars: Path
    work: Path
    proxies: dict[str, ApiProxy] = field(default_factory=dict)
    _starting: threading.Lock = field(default_factory=threading.Lock)

    def start_operator(self, identity: str) -> None:
        """A replica whose API traffic goes through its own ApiProxy (so a test can partition it); a restarted
        identity keeps its proxy, healed. Nothing if that identity runs (never two processes of one)."""
        with self._starting:
            running = self.fleet.replicas.get(identity)
            if running is not None and running.running():
                return
            proxy = self.proxies.get(identity)
            if proxy is None:
                proxy = self.proxies[identity] = ApiProxy(self.plane.apiserver_port)
            proxy.heal()
            kubeconfig = proxy.kubeconfig(self.plane.kubeconfig, self.work / f"{identity}.kubeconfig")
            self.fleet.start(identity, kubeconfig=kubeconfig)

    def supervise(self, stop: threading.Event, interval: float = 1.0) -> None:
        """What the operator's Deployment does: a replica that exited (as one does when it loses the Lease)
        starts again under its identity, its network healed, until stop."""
        while not stop.wait(interval):
            for identity, replica in list(self.fleet.replicas.items()):
                if not replica.running():
                    self.start_operator(identity)

    def job(
        self,
        name: str,
        input_dir: Path,
        output_dir: Path,
        example: Path = EXAMPLE,
        *,
        short_lease: bool = True,
        **spec: Any,
    ) -> dict[str, Any]:
        """short_lease: SHORT_LEASE's driver-Lease timings instead of the defaults (15 s / 10 s / 2 s),
        for the faults whose next attempt waits the Lease out: a lost node, a frozen JVM."""
        lease = SHORT_LEASE if short_lease else {}
        env = lease | {
            RuntimeEnv.SPARK_JARS_DIR: str(self.jars),
            RuntimeEnv.RESULTS_NAMESPACE: OPERATOR_NAMESPACE,
        }
        defaults: dict[str, Any] = {
            "mainApplicationFile": f"local://{example}",
            "arguments": [str(input_dir), str(output_dir)],
            "driver": {"memory": "768m"},
            "executor": {"instances": 1, "memory": "768m"},
            "restartStrategy": {"type": "fixed-delay", "fixedDelay": {"attempts": 10, "delaySeconds": 1}},
            "stopTimeoutSeconds": 120,
            "env": [{"name": k, "value": v} for k, v in env.items()] + S3_CREDENTIALS_ENV,
            "sparkConf": {
                "spark.sql.shuffle.partitions": "2",
                **self.s3.spark_conf(credentials=False),
            },
        }
        defaults["driver"] |= spec.pop("driver", {})  # e.g. standby: the memory above is kept
        defaults["executor"] |= spec.pop("executor", {})  # e.g. a pod template: the same
        defaults["sparkConf"] |= spec.pop("sparkConf", {})  # the S3 settings above are kept
        return job_manifest(name, self.bucket, **(defaults | spec))

    def driver_jvm_stopped(self, pod: str) -> contextlib.AbstractContextManager[list[int]]:
        """The JVM of a driver pod stopped (SIGSTOP) for a block, its Python runtime not: a hung driver that
        Kubernetes still sees Running. SIGCONT after the block, whatever happened in it."""
        return self.nodes.jvm_stopped(JOBS_NAMESPACE, pod, DRIVER_CONTAINER)

    def damage_latest_offsets(self, location: str) -> str:
        """Tears the offset log entry of the newest committed batch of the query checkpoint at location (an
        s3:// URI), as a crash in the middle of writing it would; returns the damaged key."""
        bucket, _, prefix = location.removeprefix("s3://").removeprefix("s3a://").partition("/")
        s3 = self.s3.client()
        listed = s3.list_objects_v2(Bucket=bucket, Prefix=f"{prefix}/commits/").get("Contents", [])
        committed = [int(name) for o in listed if (name := o["Key"].rsplit("/", 1)[-1]).isdigit()]
        assert committed, f"no committed batch under {location}"
        key = f"{prefix}/offsets/{max(committed)}"
        s3.head_object(Bucket=bucket, Key=key)  # it exists
        s3.put_object(Bucket=bucket, Key=key, Body=b"\x00torn offset log entry\xff")
        return key

    # -- what the fault tour needs (ftspark_dev.scenarios.tour.TourWorld) -------------------------------

    def log(self, pod: str) -> str:
        try:
            return self.nodes.log(JOBS_NAMESPACE, pod)
        except KeyError as missing:  # the pod never started
            return str(missing)

    def explain(self, name: str, log_tail: int = 4000) -> str:
        """For a failed wait: the job's status, its Events, and the end of its newest driver's log."""
        drivers = self.drivers(name)
        newest = max(drivers, key=lambda p: p.metadata.creation_timestamp).metadata.name if drivers else None
        log = self.log(newest)[-log_tail:] if newest else "(no driver pod)"
        return f"{name}: status {self.status(name)}\nevents {self.events(name)}\n{newest} log:\n{log}"

    def kill_pod(self, pod: str) -> None:
        self.nodes.kill_pod(JOBS_NAMESPACE, pod)

    def container_pids(self, pod: str, container: str) -> list[int]:
        return self.nodes.container_pids(JOBS_NAMESPACE, pod, container)

    def kill_pods(self, label_selector: str) -> list[str]:
        return self.nodes.kill_pods(JOBS_NAMESPACE, label_selector)

    def kill_node(self, node: str) -> None:
        self.nodes.kill_node(node)

    def restart_node(self, node: str) -> None:
        self.nodes.restart_node(node)

    def operator_leader(self) -> str | None:
        return self.fleet.leader(self.api)

    def acting_leaders(self) -> list[str]:
        """Replicas whose liveness probe says they lead (within their renew deadline)."""
        return [
            identity
            for identity in list(self.fleet.replicas)
            if leading(self.fleet.probe(identity, "/healthz"))
        ]

    def kill_operator(self, identity: str) -> None:
        """SIGKILL of a replica's pod: the Deployment replaces it with a new one (a new identity)."""
        self.fleet.replicas.pop(identity).kill()
        self.start_operator(f"{identity}-restarted")


@contextlib.contextmanager
def running_world() -> Iterator[World]:
    fetched = subprocess.run(
        [str(REPO_ROOT / "tools" / "spark_jars.sh")], check=True, capture_output=True, text=True, timeout=900
    )
    jars = Path(fetched.stdout.strip())
    work = Path(tempfile.mkdtemp(prefix="ftspark-world-"))
    with ControlPlane(service_account_admission=True, audit_policy=AUDIT_POLICY) as plane, S3Server() as s3:
        plane.start_controllers()
        plane.kubectl("apply", "--server-side", "-f", str(REPO_ROOT / "crds"))
        plane.kubectl("wait", "--for=condition=Established", f"crd/{PLURAL}.{API_GROUP}")
        # The chart's policy on the drivers' requests: every job here proves that Spark's executors pass it.
        plane.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(driver_policy()))
        api = config.new_client_from_config(config_file=str(plane.kubeconfig))
        for name in (OPERATOR_NAMESPACE, JOBS_NAMESPACE):
            client.CoreV1Api(api).create_namespace(
                client.V1Namespace(metadata=client.V1ObjectMeta(name=name))
            )
        client.CoreV1Api(api).create_namespaced_secret(JOBS_NAMESPACE, s3_credentials_secret())
        bucket = f"ftspark-{uuid.uuid4().hex[:8]}"
        s3.client().create_bucket(Bucket=bucket)
        nodes = NodeAgent(plane.kubeconfig, nodes=3, prefix="node").start()
        fleet = OperatorFleet(plane, s3, OPERATOR_NAMESPACE, JOBS_NAMESPACE, work / "operators")
        world = World(plane, nodes, s3, api, fleet, bucket, jars, work)
        stop_supervising = threading.Event()
        supervisor = threading.Thread(target=world.supervise, args=(stop_supervising,), daemon=True)
        try:
            world.start_operator("operator-a")
            world.start_operator("operator-b")
            supervisor.start()
            yield world
        finally:
            stop_supervising.set()
            if supervisor.is_alive():
                supervisor.join()
            fleet.stop_all()
            for proxy in world.proxies.values():
                proxy.close()
            nodes.stop()
            shutil.rmtree(work, ignore_errors=True)
