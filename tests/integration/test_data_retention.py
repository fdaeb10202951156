"""A job deleted while it runs, on the real API server and an S3 server: its checkpoint directory goes once
resultStore.ttlSeconds has passed (taken from the watch's DELETED event), unless checkpoint.retainOnDelete;
and nothing beside it goes."""

from __future__ import annotations

from functools import partial
from typing import Any

from kubernetes import client

from ftspark import API_GROUP, API_VERSION, PLURAL
from ftspark_dev.operators import OperatorFleet, job_manifest, pod_names, set_driver_running
from ftspark_dev.s3server import S3Server
from tests.waiting import eventually

TTL = 3


def _keys(s3: Any, bucket: str, prefix: str) -> list[str]:
    listed = s3.list_objects_v2(Bucket=bucket, Prefix=prefix)
    return sorted(item["Key"] for item in listed.get("Contents", []))


def _running_job(api: client.ApiClient, namespace: str, bucket: str, name: str, **checkpoint: Any) -> str:
    """A running job whose driver committed a batch; its checkpoint directory's key prefix."""
    objects = client.CustomObjectsApi(api)
    spec = {
        "checkpoint": {"storage": f"s3://{bucket}/jobs/{name}", **checkpoint},
        "resultStore": {"ttlSeconds": TTL},
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
    retained = _running_job(api_client, ns, bucket, "kept", retainOnDelete=True)
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
