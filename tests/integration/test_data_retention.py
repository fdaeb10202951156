"""What ftspark created on S3 for a job goes by policy, on the real API server and an S3 server (the test
plays the kubelet), and nothing beside it goes: a deleted job's checkpoint directory once
resultStore.ttlSeconds has passed (taken from the watch's DELETED event), unless checkpoint.retainOnDelete;
the earlier run's directory after a stateless upgrade, once the new run is Running."""

from __future__ import annotations

from functools import partial
from typing import Any

from kubernetes import client

from ftspark import API_GROUP, API_VERSION, PLURAL
from ftspark_dev.cluster.operators import (
    OperatorFleet,
    event_reasons,
    job_manifest,
    job_status,
    pod_names,
    set_driver_running,
)
from ftspark_dev.cluster.s3server import S3Server
from tests.waiting import eventually

TTL = 3


def _keys(s3: Any, bucket: str, prefix: str) -> list[str]:
    listed = s3.list_objects_v2(Bucket=bucket, Prefix=prefix)
    return sorted(item["Key"] for item in listed.get("Contents", []))


def _running_job(
    api: client.ApiClient,
    namespace: str,
    bucket: str,
    name: str,
    checkpoint: dict[str, Any] | None = None,
    **fields: Any,
) -> str:
    """A running job whose driver committed a batch; its checkpoint directory's key prefix."""
    objects = client.CustomObjectsApi(api)
    spec = {
        "checkpoint": {"storage": f"s3://{bucket}/jobs/{name}", **(checkpoint or {})},
        "resultStore": {"ttlSeconds": TTL},
        **fields,
    }
    created = objects.create_namespaced_custom_object(
        API_GROUP, API_VERSION, namespace, PLURAL, job_manifest(name, bucket, **spec)
    )
    driver = f"{name}-1-driver"
    eventually(lambda: pod_names(api, namespace, name) == [driver], timeout=30, what=f"{name}'s driver")
    set_driver_running(client.CoreV1Api(api), namespace, driver)
    return f"jobs/{name}/checkpoints/{created['metadata']['uid'][:8]}-run-1/"


def test_a_deleted_jobs_checkpoints_go_after_the_retention_unless_retained(
    fleet: OperatorFleet, api_client: client.ApiClient, s3_server: S3Server, bucket: str
) -> None:
    ns, s3 = fleet.watch_namespace, s3_server.client()
    fleet.start()
    deleted = _running_job(api_client, ns, bucket, "gone")
    retained = _running_job(api_client, ns, bucket, "kept", {"retainOnDelete": True})
    beside = "jobs/gone/savepoints/sp-1-a1/_manifest.json"  # savepoints outlive the job
    for key in (
        f"{deleted}query-0/commits/0",
        f"{deleted}query-0/state/0/0/1.delta",
        f"{retained}q/commits/0",
        beside,
    ):
        s3.put_object(Bucket=bucket, Key=key, Body=b"x" * 1000)
    objects = client.CustomObjectsApi(api_client)
    for name in ("gone", "kept"):
        objects.delete_namespaced_custom_object(API_GROUP, API_VERSION, ns, PLURAL, name)
    eventually(
        lambda: _keys(s3, bucket, deleted) == [],
        timeout=TTL + 30,
        what=lambda: f"the deleted job's checkpoints gone: {_keys(s3, bucket, deleted)}",
    )
    assert _keys(s3, bucket, retained) == [f"{retained}q/commits/0"], "retainOnDelete keeps them"
    assert _keys(s3, bucket, beside) == [beside]
    left = partial(_keys, s3, bucket, "jobs/gone/")
    print(f"\nafter the retention of a deleted job: {len(left())} object(s) left under it (its savepoint)")


def test_a_stateless_upgrade_deletes_the_earlier_runs_directory_once_the_new_run_is_running(
    fleet: OperatorFleet, api_client: client.ApiClient, s3_server: S3Server, bucket: str
) -> None:
    ns, s3, core = fleet.watch_namespace, s3_server.client(), client.CoreV1Api(api_client)
    fleet.start()
    earlier = _running_job(api_client, ns, bucket, "fresh", upgradeMode="stateless")
    beside = [
        "jobs/fresh/savepoints/sp-1-a1/_manifest.json",  # savepoints outlive a run
        "jobs/fresh/checkpoints/ffffffff-run-1/q/commits/0",  # another job's (same name, another uid)
    ]
    for key in (f"{earlier}query-0/commits/0", f"{earlier}query-0/offsets/0", *beside):
        s3.put_object(Bucket=bucket, Key=key, Body=b"x" * 1000)
    client.CustomObjectsApi(api_client).patch_namespaced_custom_object(
        API_GROUP, API_VERSION, ns, PLURAL, "fresh", {"spec": {"arguments": ["--version", "2"]}}
    )
    eventually(
        lambda: pod_names(api_client, ns, "fresh") == ["fresh-2-driver"], timeout=30, what="the upgrade"
    )
    retired = job_status(api_client, ns, "fresh").get("retiredCheckpointDirectories", [])
    paths = [directory.split("://", 1)[1] for directory in retired]
    status = job_status(api_client, ns, "fresh")
    assert paths == [f"{bucket}/{earlier.rstrip('/')}"], f"recorded before the new run starts: {status}"
    assert _keys(s3, bucket, earlier), "kept until the new run is Running"
    set_driver_running(core, ns, "fresh-2-driver")
    eventually(
        lambda: _keys(s3, bucket, earlier) == []
        and not job_status(api_client, ns, "fresh").get("retiredCheckpointDirectories"),
        timeout=30,
        what=lambda: f"the earlier run's directory gone: {_keys(s3, bucket, earlier)}",
    )
    assert [key for key in beside if _keys(s3, bucket, key)] == beside, "nothing beside it goes"
    assert "CheckpointDirectoryDeleted" in event_reasons(api_client, ns, "fresh")
