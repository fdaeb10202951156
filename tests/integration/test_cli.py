"""The ftspark CLI changes only spec.desiredState, spec.savepoints.onStop and spec.savepointTriggerNonce, and
shows the status."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from kubernetes import client

from ftspark import API_GROUP, API_VERSION, PLURAL
from ftspark.cli import bump_savepoint_nonce, main
from ftspark_dev.cluster.controlplane import ControlPlane
from ftspark_dev.cluster.operators import job_manifest


def test_cli_steers_the_gitops_way(
    crd: None,
    control_plane: ControlPlane,
    api_client: client.ApiClient,
    namespace: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    objects = client.CustomObjectsApi(api_client)
    objects.create_namespaced_custom_object(
        API_GROUP, API_VERSION, namespace, PLURAL, job_manifest("cli", "bucket")
    )
    objects.patch_namespaced_custom_object_status(
        API_GROUP,
        API_VERSION,
        namespace,
        PLURAL,
        "cli",
        {
            "status": {
                "phase": "Running",
                "attempt": 2,
                "lastFailure": {
                    "attempt": 1,
                    "reason": "OOMKilled",
                    "time": "2026-01-01T00:00:00Z",
                    "recoveryPhases": {"seen": 0.5, "submitted": 1.6, "committed": 14.7},
                },
                "failures": [
                    {
                        "attempt": 1,
                        "reason": "OOMKilled",
                        "exitCode": 137,
                        "time": "2026-01-01T00:00:00Z",
                        "recoverySeconds": 14.2,
                    }
                ],
                "latestCheckpoint": {
                    "id": 7,
                    "batchId": 5,
                    "time": "2026-01-01T00:00:00Z",
                    "location": "s3://b/c",
                },
            }
        },
    )
    base = ["--kubeconfig", str(control_plane.kubeconfig), "-n", namespace]
    before = objects.get_namespaced_custom_object(API_GROUP, API_VERSION, namespace, PLURAL, "cli")

    assert main([*base, "status", "cli"]) == 0
    shown = capsys.readouterr().out
    assert "phase:          Running" in shown
    assert "checkpoint:     id 7, Spark batch 5 at 2026-01-01T00:00:00Z (s3://b/c)" in shown
    assert (
        "failed:         attempt 1 (2026-01-01T00:00:00Z, exit 137, the next batch 14.2 s later) OOMKilled"
        in shown
    )
    assert (
        "last recovery:  recovered in 14.7 s by a new driver (seen 0.5, submitted 1.1, committed 13.1 s)"
        in shown
    )

    assert main([*base, "stop", "cli"]) == 0
    assert main([*base, "savepoint", "cli"]) == 0
    assert main([*base, "savepoint", "cli"]) == 0
    after = objects.get_namespaced_custom_object(API_GROUP, API_VERSION, namespace, PLURAL, "cli")
    assert after["spec"]["desiredState"] == "stopped"
    assert after["spec"]["savepointTriggerNonce"] == 2
    changed = {k for k in after["spec"] if after["spec"][k] != before["spec"].get(k)}
    assert changed == {"desiredState", "savepointTriggerNonce"}, "nothing else in the spec moves"

    assert main([*base, "resume", "cli"]) == 0
    assert (
        objects.get_namespaced_custom_object(API_GROUP, API_VERSION, namespace, PLURAL, "cli")["spec"][
            "desiredState"
        ]
        == "running"
    )
    for verb, state in (("cancel", "cancelled"), ("suspend", "suspended")):
        assert main([*base, verb, "cli"]) == 0
        job = objects.get_namespaced_custom_object(API_GROUP, API_VERSION, namespace, PLURAL, "cli")
        assert job["spec"]["desiredState"] == state

    # Stop with savepoint: the flag sets savepoints.onStop and leaves the rest of savepoints as it was.
    history = {"spec": {"savepoints": {"history": {"maxCount": 3}}}}
    objects.patch_namespaced_custom_object(API_GROUP, API_VERSION, namespace, PLURAL, "cli", history)
    assert main([*base, "stop", "--savepoint", "cli"]) == 0
    assert "savepoints.onStop: true" in capsys.readouterr().out
    job = objects.get_namespaced_custom_object(API_GROUP, API_VERSION, namespace, PLURAL, "cli")
    assert job["spec"]["desiredState"] == "stopped"
    assert job["spec"]["savepoints"]["onStop"] is True
    assert job["spec"]["savepoints"]["history"]["maxCount"] == 3
    assert main([*base, "suspend", "--no-savepoint", "cli"]) == 0
    job = objects.get_namespaced_custom_object(API_GROUP, API_VERSION, namespace, PLURAL, "cli")
    assert (job["spec"]["desiredState"], job["spec"]["savepoints"]["onStop"]) == ("suspended", False)
    with pytest.raises(SystemExit):
        main([*base, "cancel", "--savepoint", "cli"])  # a cancel takes no checkpoint, so no savepoint

    # A savepoint request based on a stale read is retried, not lost (resourceVersion guards the bump).
    stale = objects.get_namespaced_custom_object(API_GROUP, API_VERSION, namespace, PLURAL, "cli")
    assert main([*base, "savepoint", "cli"]) == 0
    assert bump_savepoint_nonce(objects, namespace, "cli", stale) == 4


def test_cli_refusals_are_one_line_naming_the_fix(
    crd: None, control_plane: ControlPlane, namespace: str, capsys: pytest.CaptureFixture[str]
) -> None:
    admin = ["--kubeconfig", str(control_plane.kubeconfig), "-n", namespace]
    assert main([*admin, "status", "nowhere"]) == 1
    assert capsys.readouterr().err == (
        f"ftspark: no FaultTolerantSparkJob nowhere in namespace {namespace} (another one: -n NAMESPACE)\n"
    )
    stranger = ["--kubeconfig", str(control_plane.kubeconfig_for("mallory")), "-n", namespace]
    assert main([*stranger, "stop", "nowhere"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(
        'ftspark: forbidden: faulttolerantsparkjobs.ftspark.io "nowhere" is forbidden: User "mallory"'
    )
    assert err.count("\n") == 1, "one line, no traceback"


def test_describe_shows_the_status_the_jobs_own_events_and_what_to_do(
    crd: None,
    control_plane: ControlPlane,
    api_client: client.ApiClient,
    namespace: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    objects = client.CustomObjectsApi(api_client)
    job = objects.create_namespaced_custom_object(
        API_GROUP, API_VERSION, namespace, PLURAL, job_manifest("waits", "bucket")
    )
    waiting = "no node can run the driver pod: 0/3 nodes are available: 3 Insufficient cpu"
    degraded = {
        "type": "Degraded",
        "status": "True",
        "reason": "DriverUnschedulable",
        "message": waiting,
        "lastTransitionTime": "2026-01-01T11:59:00Z",
    }
    status = {"status": {"phase": "Submitting", "attempt": 1, "conditions": [degraded]}}
    objects.patch_namespaced_custom_object_status(API_GROUP, API_VERSION, namespace, PLURAL, "waits", status)
    core = client.CoreV1Api(api_client)
    for name, uid, reason in (
        ("waits.1", job["metadata"]["uid"], "DriverUnschedulable"),
        ("old.1", "gone", "Old"),
    ):
        core.create_namespaced_event(
            namespace,
            client.CoreV1Event(
                metadata=client.V1ObjectMeta(name=name),
                involved_object=client.V1ObjectReference(
                    api_version=f"{API_GROUP}/{API_VERSION}",
                    kind="FaultTolerantSparkJob",
                    namespace=namespace,
                    name="waits",
                    uid=uid,
                ),
                reason=reason,
                message=waiting,
                type="Warning",
                count=3,
                last_timestamp=datetime(2026, 1, 1, 12, 0, tzinfo=UTC),
            ),
        )
    assert main(["--kubeconfig", str(control_plane.kubeconfig), "-n", namespace, "describe", "waits"]) == 0
    shown = capsys.readouterr().out.splitlines()
    assert shown[shown.index("events (newest last):") + 1 :] == [
        f"  2026-01-01 12:00:00 Warning DriverUnschedulable: {waiting} (x3)"
    ], "the job's own Events, not an earlier job's of the same name"
    assert any(
        line.startswith("what to do:     DriverUnschedulable: lower spec.driver.cores") for line in shown
    )
