"""`make demo`: bring up what ftspark runs on and walk through it, printing what happened.

Today: a real control plane (etcd, kube-apiserver, kube-scheduler, kube-controller-manager built from source),
an S3-protocol server, the FaultTolerantSparkJob CRD and an example job accepted by the API server.
The operator, the driver runtime and process-backed nodes join as their issues land.
"""

from __future__ import annotations

import time
from pathlib import Path

from ftspark_dev.controlplane import REPO_ROOT, ControlPlane
from ftspark_dev.s3server import S3Server


def _step(title: str) -> float:
    print(f"\n== {title}", flush=True)
    return time.monotonic()


def _show(plane: ControlPlane, *args: str) -> None:
    result = plane.kubectl(*args)
    print("$ kubectl " + " ".join(args))
    print(result.stdout.rstrip(), flush=True)


def main() -> None:
    started = _step("starting the local control plane (etcd, kube-apiserver, scheduler, controller-manager)")
    with ControlPlane(service_account_admission=True) as plane, S3Server() as s3:
        plane.start_controllers()
        print(f"API server {plane.server} ready in {time.monotonic() - started:.1f} s; S3 at {s3.endpoint}")
        _show(plane, "version")

        _step("installing the FaultTolerantSparkJob CRD")
        _show(plane, "apply", "--server-side", "-f", str(REPO_ROOT / "crds"))
        _show(plane, "wait", "--for=condition=Established", "crd/faulttolerantsparkjobs.ftspark.io")
        _show(plane, "get", "crd")

        _step("applying examples/ (the API server validates and defaults them)")
        for manifest in sorted(Path(REPO_ROOT / "examples").glob("*.yaml")):
            _show(plane, "apply", "-f", str(manifest))
        _show(plane, "get", "ftsj")
        _show(plane, "explain", "ftsj.spec.upgradeMode")

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
        _step(f"done in {time.monotonic() - started:.1f} s; stopping everything")


if __name__ == "__main__":
    main()
