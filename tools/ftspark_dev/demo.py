"""`make demo`: bring up what ftspark runs on and walk through it, printing what happened.

Today: a real control plane (etcd, kube-apiserver, kube-scheduler, kube-controller-manager built from source),
an S3-protocol server, the CRD, two operator replicas electing a leader through a Lease, and the example job
driven through submit → running → driver failure → restart → leader failover. There is no kubelet yet, so the
demo plays kubelet for the driver pod (writes the status a kubelet would); process-backed nodes running real
Spark join with the end-to-end issue.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import yaml
from kubernetes import client, config

from ftspark import API_GROUP, API_VERSION, PLURAL
from ftspark_dev.controlplane import REPO_ROOT, ControlPlane
from ftspark_dev.operators import OperatorFleet, set_driver_exited, set_driver_running
from ftspark_dev.s3server import S3Server

EXAMPLE = REPO_ROOT / "examples" / "windowed-counts.yaml"
JOB = "windowed-counts"


def _step(title: str) -> None:
    print(f"\n== {title}", flush=True)


def _show(plane: ControlPlane, *args: str) -> None:
    print("$ kubectl " + " ".join(args))
    print(plane.kubectl(*args).stdout.rstrip(), flush=True)


def _until(probe: Callable[[], object], timeout: float = 60) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if probe():
            return time.monotonic() - started
        time.sleep(0.1)
    raise TimeoutError(f"not within {timeout} s")


def main() -> None:
    started = time.monotonic()
    _step("starting the local control plane (etcd, kube-apiserver, scheduler, controller-manager) and S3")
    with ControlPlane(service_account_admission=True) as plane, S3Server() as s3:
        plane.start_controllers()
        print(f"API server {plane.server} and S3 {s3.endpoint} ready in {time.monotonic() - started:.1f} s")
        api = config.new_client_from_config(config_file=str(plane.kubeconfig))
        _show(plane, "version")

        _step("installing the FaultTolerantSparkJob CRD")
        _show(plane, "apply", "--server-side", "-f", str(REPO_ROOT / "crds"))
        _show(plane, "wait", "--for=condition=Established", f"crd/{PLURAL}.{API_GROUP}")

        _walk_through(plane, s3, api)
        _step(f"done in {time.monotonic() - started:.1f} s; stopping everything")


def _walk_through(plane: ControlPlane, s3: S3Server, api: client.ApiClient) -> None:
    core, objects = client.CoreV1Api(api), client.CustomObjectsApi(api)
    _step("starting two operator replicas; one wins the Lease")
    _show(plane, "create", "namespace", "ftspark-system")
    manifest = yaml.safe_load(EXAMPLE.read_text())
    bucket = manifest["spec"]["checkpoint"]["storage"].removeprefix("s3://").split("/")[0]
    s3.client().create_bucket(Bucket=bucket)
    fleet = OperatorFleet(
        plane,
        s3,
        "ftspark-system",
        "default",
        Path(tempfile.mkdtemp(prefix="ftspark-demo-")),
        lease_duration=15,
        renew_deadline=10.0,
        retry_period=2.0,
    )
    try:
        replicas = [fleet.start("ftspark-operator-a"), fleet.start("ftspark-operator-b")]
        _until(lambda: fleet.leader(api) in replicas)
        leader = fleet.leader(api)
        print(f"leader: {leader}")

        _step(f"applying {EXAMPLE.relative_to(REPO_ROOT)}")
        _show(plane, "apply", "-f", str(EXAMPLE))
        _until(lambda: _pod_exists(core, f"{JOB}-1-driver"))
        _show(plane, "get", "ftsj,pods,svc,configmaps", "-l", f"ftspark.io/job={JOB}")

        _step("the driver runs (the demo writes the status a kubelet would)")
        set_driver_running(core, "default", f"{JOB}-1-driver")
        _until(lambda: _phase(objects) == "Running")
        _show(plane, "get", "ftsj")

        _step("the driver fails: the restart strategy starts attempt 2")
        failed = time.monotonic()
        set_driver_exited(core, "default", f"{JOB}-1-driver", 1, "Traceback: RuntimeError: injected failure")
        _until(lambda: _pod_exists(core, f"{JOB}-2-driver"))
        print(f"attempt 2's driver pod after {time.monotonic() - failed:.1f} s (restart delay 1 s)")
        _show(plane, "get", "ftsj")

        _step(f"killing the leader ({leader}) with SIGKILL: the standby takes over")
        assert leader is not None
        killed = time.monotonic()
        fleet.replicas[leader].kill()
        set_driver_running(core, "default", f"{JOB}-2-driver")
        _until(lambda: fleet.leader(api) not in {None, leader}, timeout=60)
        _until(lambda: _phase(objects) == "Running")
        took = time.monotonic() - killed
        print(f"{fleet.leader(api)} leads and reconciled the job {took:.1f} s after the kill")

        _step("what a user sees")
        _show(plane, "get", "ftsj", "-o", "wide")
        _show(
            plane,
            "get",
            "events",
            "--field-selector",
            f"involvedObject.name={JOB}",
            "--sort-by=.metadata.creationTimestamp",
        )

        _step("a malformed job is refused with the field named")
        bad = plane.kubectl(
            "create",
            "-f",
            "-",
            check=False,
            stdin='{"apiVersion":"ftspark.io/v1alpha1","kind":"FaultTolerantSparkJob","metadata":{"name":"bad"},'
            '"spec":{"image":"x","mainApplicationFile":"local:///x.py","checkpoint":{"storage":"/tmp/not-s3"}}}',
        )
        print(bad.stderr.strip())
    finally:
        fleet.stop_all()


def _pod_exists(core: client.CoreV1Api, name: str) -> bool:
    return any(pod.metadata.name == name for pod in core.list_namespaced_pod("default").items)


def _phase(objects: client.CustomObjectsApi) -> str | None:
    body = objects.get_namespaced_custom_object(API_GROUP, API_VERSION, "default", PLURAL, JOB)
    phase: str | None = (body.get("status") or {}).get("phase")
    return phase


if __name__ == "__main__":
    main()
