"""The savepoint history on the real API server and an S3 server: the test plays the driver (it answers the
operator's savepoint requests on the pod and writes the savepoint's objects, manifest last, as the runtime
does). Beyond history.maxCount the oldest savepoint's objects are deleted from S3 and then its reference;
a folder whose manifest names another job is left alone, and so is the newest savepoint."""

from __future__ import annotations

import json
from functools import partial
from typing import Any

from kubernetes import client

from ftspark import API_GROUP, API_VERSION, PLURAL
from ftspark.domain.savepoints import job_savepoint_id
from ftspark.protocol import CONTROL_ANNOTATION, SAVEPOINT_ANNOTATION, SAVEPOINT_MANIFEST
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

JOB = "hist"
DRIVER = f"{JOB}-1-driver"


def _ids(api: client.ApiClient, namespace: str) -> list[str]:
    return [ref["id"] for ref in job_status(api, namespace, JOB).get("savepoints", [])]


def _keys(s3: Any, bucket: str, prefix: str) -> list[str]:
    listed = s3.list_objects_v2(Bucket=bucket, Prefix=prefix)
    return sorted(item["Key"] for item in listed.get("Contents", []))


def _take(api: client.ApiClient, s3: Any, bucket: str, namespace: str, nonce: int, owner_uid: str) -> str:
    """Trigger savepoint `nonce`, wait for the request on the driver pod, write its objects (manifest last)
    and answer. The savepoint's folder."""
    core = client.CoreV1Api(api)
    client.CustomObjectsApi(api).patch_namespaced_custom_object(
        API_GROUP, API_VERSION, namespace, PLURAL, JOB, {"spec": {"savepointTriggerNonce": nonce}}
    )
    savepoint_id = _id(nonce, _uid(api, namespace))

    def asked() -> bool:
        annotations = core.read_namespaced_pod(DRIVER, namespace).metadata.annotations or {}
        return bool(annotations.get(CONTROL_ANNOTATION, "").startswith(f"savepoint@{savepoint_id};"))

    eventually(asked, timeout=30, what=f"the driver asked for {savepoint_id}")
    folder = f"jobs/{JOB}/savepoints/{savepoint_id}/"
    for name in ("counts/offsets/7", "counts/commits/7", "counts/state/0/0/8.delta"):
        s3.put_object(Bucket=bucket, Key=folder + name, Body=b"x" * 100)
    owner = {"job": f"{namespace}/{JOB}", "jobUid": owner_uid}
    manifest = json.dumps({"id": savepoint_id, **owner, "queries": {}}).encode()
    s3.put_object(Bucket=bucket, Key=folder + SAVEPOINT_MANIFEST, Body=manifest)
    location = f"s3://{bucket}/{folder}"
    answer = json.dumps({"id": savepoint_id, "location": location, "batches": {"counts": 7}})
    answered = {"metadata": {"annotations": {SAVEPOINT_ANNOTATION: answer}}}
    core.patch_namespaced_pod(DRIVER, namespace, answered)
    eventually(lambda: savepoint_id in _ids(api, namespace), timeout=30, what=f"{savepoint_id} in the status")
    return folder


def test_the_oldest_savepoint_beyond_the_history_is_deleted_from_s3_then_from_the_status(
    fleet: OperatorFleet, api_client: client.ApiClient, s3_server: S3Server, bucket: str
) -> None:
    ns, s3 = fleet.watch_namespace, s3_server.client()
    fleet.start()
    history = {"history": {"maxCount": 2, "maxAgeSeconds": 0}}
    client.CustomObjectsApi(api_client).create_namespaced_custom_object(
        API_GROUP, API_VERSION, ns, PLURAL, job_manifest(JOB, bucket, savepoints=history)
    )
    eventually(lambda: pod_names(api_client, ns, JOB) == [DRIVER], timeout=30, what="the driver")
    set_driver_running(client.CoreV1Api(api_client), ns, DRIVER)
    take, uid = partial(_take, api_client, s3, bucket, ns), _uid(api_client, ns)
    first = take(1, uid)
    foreign = take(2, "ffffffff-an-earlier-job-of-this-name")  # its manifest is not this job's: never deleted
    assert _ids(api_client, ns) == [_id(1, uid), _id(2, uid)]
    assert len(_keys(s3, bucket, first)) == 4, "within the history, nothing is deleted"

    take(3, uid)  # sp-1, then (after the next) sp-2, are beyond maxCount 2
    take(4, uid)

    eventually(
        lambda: _ids(api_client, ns) == [_id(3, uid), _id(4, uid)],
        timeout=30,
        what=lambda: f"the history holds sp-3, sp-4; it holds {_ids(api_client, ns)}",
    )
    assert _keys(s3, bucket, first) == [], "the oldest savepoint's objects are gone from S3"
    assert len(_keys(s3, bucket, foreign)) == 4, "a folder without this job's manifest is left alone"
    assert len(_keys(s3, bucket, f"jobs/{JOB}/savepoints/{_id(4, uid)}/")) == 4, "the newest is kept"
    status = job_status(api_client, ns, JOB)
    assert not status.get("savepointsDisposing"), status
    reasons = event_reasons(api_client, ns, JOB)
    assert {"SavepointDisposing", "SavepointDisposed", "SavepointNotDisposed"} <= set(reasons), reasons


def _uid(api: client.ApiClient, namespace: str) -> str:
    objects = client.CustomObjectsApi(api)
    job = objects.get_namespaced_custom_object(API_GROUP, API_VERSION, namespace, PLURAL, JOB)
    return str(job["metadata"]["uid"])


def _id(nonce: int, uid: str) -> str:
    """The id of the savepoint a nonce asks attempt 1 for."""
    return job_savepoint_id(str(nonce), uid, 1)
