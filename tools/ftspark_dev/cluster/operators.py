"""Real operator processes against a local control plane and S3, and a stand-in kubelet for driver pods
(there is no kubelet in these tests: the test writes the pod status a kubelet would)."""

from __future__ import annotations

import datetime
import http.client
import os
import signal
import sys
import threading
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client
from prometheus_client.parser import text_string_to_metric_families

from ftspark import API_GROUP, API_VERSION, PLURAL
from ftspark.adapters.k8s.record_key import record_seal
from ftspark.adapters.seal import RecordSeal
from ftspark.domain.fencing import Epoch
from ftspark.domain.ha import CheckpointPointer, JobKey
from ftspark.ports.stores import CheckpointStore
from ftspark.protocol import EXECUTOR_CONTAINER, JOB_LABEL, driver_pod_name, record_key_name
from ftspark.reconcile.nodes import NODE_SILENCE_SECONDS
from ftspark.reconcile.pacing import CHECKPOINT_REFRESHES_PER_SECOND
from ftspark_dev.cluster.controlplane import ControlPlane
from ftspark_dev.cluster.processes import REPO_ROOT, ManagedProcess, free_port
from ftspark_dev.cluster.s3server import ACCESS_KEY, REGION, SECRET_KEY, S3Server
from ftspark_dev.cluster.versions import SPARK_IMAGE

OPERATOR_LEASE = "ftspark-operator"  # the operator's default --lease-name


def lease_holder(api: client.ApiClient, namespace: str, lease: str = OPERATOR_LEASE) -> str | None:
    """Who holds the operator Lease, if anyone."""
    try:
        found = client.CoordinationV1Api(api).read_namespaced_lease(lease, namespace)
    except client.ApiException:
        return None
    holder: str | None = found.spec.holder_identity
    return holder or None


def probe(url: str) -> tuple[int, str]:
    """GET of an operator replica's probe endpoint: (status, body); status 0 when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        try:
            return error.code, error.read().decode()
        except (OSError, http.client.HTTPException) as cut:  # killed while sending the body (a sampler
            return 0, str(cut)  # thread that died of it would stop counting leaders for the rest of a tour)
    except urllib.error.URLError as error:  # not listening (yet)
        return 0, str(error.reason)
    except (OSError, http.client.HTTPException) as error:  # killed (or stopped) while answering
        return 0, str(error)


def leading(answer: tuple[int, str]) -> bool:
    """Whether a replica's /healthz answer says it leads (within its renew deadline)."""
    return answer[0] == 200 and answer[1].startswith("leading")


def operator_env() -> dict[str, str]:
    """The environment of an operator replica process: this repository's code, the test S3 server's keys."""
    return {
        **os.environ,
        "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        "AWS_REGION": REGION,
        "PYTHONPATH": os.pathsep.join(str(REPO_ROOT / p) for p in ("operator", "tools")),
    }


@dataclass
class OperatorFleet:
    """Operator replicas of one installation (one Lease), each a real `python -m ftspark.app.main` process."""

    control_plane: ControlPlane
    s3: S3Server
    namespace: str
    watch_namespace: str
    log_dir: Path
    lease_duration: int = 4
    renew_deadline: float = 3.0
    retry_period: float = 0.5
    result_sweep_seconds: float = 1.0
    kubeconfig: Path | None = None  # default: the control plane's admin
    ha_s3_root: str = ""  # s3://bucket/prefix: the HA records on S3 there; empty: on ConfigMaps
    s3_endpoint: str = ""  # the replicas' S3 endpoint; empty: the test S3 server's
    checkpoint_refreshes_per_second: float = CHECKPOINT_REFRESHES_PER_SECOND
    node_silence_seconds: float = NODE_SILENCE_SECONDS
    replicas: dict[str, ManagedProcess] = field(default_factory=dict)
    probe_ports: dict[str, int] = field(default_factory=dict)

    def start(self, identity: str | None = None, kubeconfig: Path | None = None) -> str:
        """Start a replica; kubeconfig overrides the fleet's (e.g. one through an ApiProxy)."""
        identity = identity or f"operator-{uuid.uuid4().hex[:6]}"
        self.probe_ports[identity] = free_port()
        env = operator_env()
        process = ManagedProcess(
            identity,
            [
                sys.executable,
                "-m",
                "ftspark.app.main",
                f"--identity={identity}",
                f"--namespace={self.namespace}",
                f"--watch-namespaces={self.watch_namespace}",
                f"--kubeconfig={kubeconfig or self.kubeconfig or self.control_plane.kubeconfig}",
                f"--s3-endpoint={self.s3_endpoint or self.s3.endpoint}",
                f"--lease-duration={self.lease_duration}",
                f"--renew-deadline={self.renew_deadline}",
                f"--retry-period={self.retry_period}",
                f"--result-sweep-seconds={self.result_sweep_seconds}",
                f"--checkpoint-refreshes-per-second={self.checkpoint_refreshes_per_second}",
                f"--node-silence-seconds={self.node_silence_seconds}",
                f"--probe-port={self.probe_ports[identity]}",
                *(["--ha-store=s3", f"--ha-s3-root={self.ha_s3_root}"] if self.ha_s3_root else []),
            ],
            self.log_dir,
            env=env,
        )
        process.start()
        self.replicas[identity] = process
        return identity

    def seal(self, api: client.ApiClient) -> RecordSeal:
        """The installation's record seal, to read the job graphs and results its replicas write."""
        return record_seal(api, self.namespace, record_key_name(OPERATOR_LEASE))

    def leader(self, api: client.ApiClient) -> str | None:
        return lease_holder(api, self.namespace)

    def probe(self, identity: str, path: str) -> tuple[int, str]:
        """GET /metrics, /healthz or /readyz of one replica: (status, body)."""
        return probe(f"http://127.0.0.1:{self.probe_ports[identity]}{path}")

    def counters(self, identity: str, family: str) -> list[tuple[dict[str, str], int]]:
        """The samples of one replica's metric family that count (a counter's _total, a histogram's
        _count), with their labels."""
        status, body = self.probe(identity, "/metrics")
        if status != 200:
            raise RuntimeError(f"/metrics of {identity}: HTTP {status}")
        return [
            (sample.labels, int(sample.value))
            for found in text_string_to_metric_families(body)
            if found.name == family
            for sample in found.samples
            if sample.name.endswith(("_total", "_count"))
        ]

    def pause(self, identity: str, seconds: float) -> threading.Timer:
        """SIGSTOP of a replica, as a long GC pause or a frozen VM would; SIGCONT after seconds (returned
        timer: join it to wait for the resume)."""
        replica = self.replicas[identity]
        replica.signal(signal.SIGSTOP)
        resume = threading.Timer(seconds, replica.signal, args=(signal.SIGCONT,))
        resume.daemon = True
        resume.start()
        return resume

    def stop_all(self) -> None:
        for process in self.replicas.values():
            process.signal(signal.SIGCONT)  # a paused one stops at once, not after the grace period
            process.stop()

    def logs(self) -> str:
        return "\n".join(f"--- {name}\n{p.log_tail(40)}" for name, p in self.replicas.items())


def job_manifest(name: str, bucket: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{API_GROUP}/{API_VERSION}",
        "kind": "FaultTolerantSparkJob",
        "metadata": {"name": name},
        "spec": {
            "image": SPARK_IMAGE,
            "mainApplicationFile": "local:///opt/app/job.py",
            "checkpoint": {"storage": f"s3://{bucket}/jobs/{name}"},
            "restartStrategy": {"type": "fixed-delay", "fixedDelay": {"attempts": 3, "delaySeconds": 1}},
            **spec,
        },
    }


def report_checkpoint(
    checkpoints: CheckpointStore, job: JobKey, location: str, batch: int, *, attempt: int = 1
) -> None:
    """What the attempt's driver reports once the batch's commit is in storage: a pointer whose id is the
    job's counter + 1 (not the batch id), written under the attempt's fence."""
    pointer = CheckpointPointer(
        checkpoint_id=checkpoints.counter(job) + 1,
        batch_id=batch,
        location=location,
        completed_at=datetime.datetime.now(datetime.UTC),
        attempt=attempt,
    )
    epoch = Epoch("driver", attempt, driver_pod_name(job.name, attempt))
    checkpoints.add(job, pointer, epoch, retained=3)


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def set_driver_running(
    core: client.CoreV1Api, namespace: str, pod: str, *, ready: bool = True, node_lost: bool = False
) -> None:
    """As a kubelet reports a running driver; ready: its readiness (a standby's session is up). node_lost: as
    the node controller leaves it when its node stops reporting (Ready=False, containers still ready)."""
    started = _now()
    pod_ready = "True" if ready and not node_lost else "False"
    core.patch_namespaced_pod_status(
        pod,
        namespace,
        {
            "status": {
                "phase": "Running",
                "startTime": started,
                "conditions": [{"type": "Ready", "status": pod_ready, "lastTransitionTime": started}],
                "containerStatuses": [
                    {
                        "name": "driver",
                        "image": SPARK_IMAGE,
                        "imageID": "",
                        "ready": ready,
                        "restartCount": 0,
                        "state": {"running": {"startedAt": started}},
                    }
                ],
            }
        },
    )


def set_driver_exited(core: client.CoreV1Api, namespace: str, pod: str, exit_code: int, message: str) -> None:
    _set_exited(core, namespace, pod, "driver", exit_code, message)


def set_executor_exited(core: client.CoreV1Api, namespace: str, pod: str) -> None:
    """As an executor's kubelet reports it when its driver went: its container ended, exit code 1."""
    _set_exited(core, namespace, pod, EXECUTOR_CONTAINER, 1, "Driver disconnected")


def _set_exited(
    core: client.CoreV1Api, namespace: str, pod: str, container: str, exit_code: int, message: str
) -> None:
    now = _now()
    core.patch_namespaced_pod_status(
        pod,
        namespace,
        {
            "status": {
                "phase": "Succeeded" if exit_code == 0 else "Failed",
                "containerStatuses": [
                    {
                        "name": container,
                        "image": SPARK_IMAGE,
                        "imageID": "",
                        "ready": False,
                        "restartCount": 0,
                        "state": {
                            "terminated": {
                                "exitCode": exit_code,
                                "reason": "Completed" if exit_code == 0 else "Error",
                                "message": message,
                                "startedAt": now,
                                "finishedAt": now,
                            }
                        },
                    }
                ],
            }
        },
    )


def job_status(api: client.ApiClient, namespace: str, name: str) -> dict[str, Any]:
    body = client.CustomObjectsApi(api).get_namespaced_custom_object(
        API_GROUP, API_VERSION, namespace, PLURAL, name
    )
    status: dict[str, Any] = body.get("status") or {}
    return status


def condition(status: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in status.get("conditions", []) if c["type"] == kind), {})


def invalid_spec(api: client.ApiClient, namespace: str, name: str) -> dict[str, Any] | None:
    """The job's Ready condition once it says InvalidSpec (the operator refused to act on the spec)."""
    ready = condition(job_status(api, namespace, name), "Ready")
    return ready if ready.get("reason") == "InvalidSpec" else None


def event_reasons(api: client.ApiClient, namespace: str, name: str, uid: str | None = None) -> list[str]:
    """The reasons of the Events about the object of that name, oldest first, a repeated one as often as it
    was counted; given its uid, only those of this object (Events outlive it)."""
    selector = f"involvedObject.name={name}" + (f",involvedObject.uid={uid}" if uid else "")
    events = client.CoreV1Api(api).list_namespaced_event(namespace, field_selector=selector)
    ordered = sorted(events.items, key=lambda e: e.metadata.creation_timestamp)
    return [e.reason for e in ordered for _ in range(e.count or 1)]


def pod_names(api: client.ApiClient, namespace: str, job: str) -> list[str]:
    pods = client.CoreV1Api(api).list_namespaced_pod(namespace, label_selector=f"{JOB_LABEL}={job}")
    return sorted(p.metadata.name for p in pods.items)
