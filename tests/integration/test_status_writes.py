"""The operator's status writes carry the resourceVersion it read: one decided on an older read (a deposed
leader resumed after a pause, a reconcile racing a user's edit) is refused by the API server, not applied."""

from __future__ import annotations

import pytest
from kubernetes import client

from ftspark import API_GROUP, API_VERSION, PLURAL
from ftspark.adapters.k8s.cluster import KubeJobs
from ftspark.domain.ha import JobKey
from ftspark.ports.cluster import StaleReadError
from ftspark_dev.cluster.operators import job_manifest


def test_a_status_decided_on_an_older_read_is_refused(
    crd: None, api_client: client.ApiClient, namespace: str
) -> None:
    objects = client.CustomObjectsApi(api_client)
    objects.create_namespaced_custom_object(
        API_GROUP, API_VERSION, namespace, PLURAL, job_manifest("guarded", "bucket")
    )
    jobs, key = KubeJobs(api_client), JobKey(namespace=namespace, name="guarded")
    stale = jobs.get(key)
    assert stale is not None and stale.resource_version
    fresh = jobs.get(key)
    assert fresh is not None
    jobs.write_status(fresh, {"phase": "Running", "attempt": 1})
    with pytest.raises(StaleReadError):
        jobs.write_status(stale, {"phase": "Succeeded", "attempt": 1})
    now = jobs.get(key)
    assert now is not None and now.status["phase"] == "Running"


def test_a_key_the_new_status_leaves_out_is_gone_at_every_depth(
    crd: None, api_client: client.ApiClient, namespace: str
) -> None:
    """A merge patch merges objects: a new lastFailure written over the one before must not keep what only
    the old one had (its recovery), else the next recovery is never timed (its failure looks recovered)."""
    objects = client.CustomObjectsApi(api_client)
    objects.create_namespaced_custom_object(
        API_GROUP, API_VERSION, namespace, PLURAL, job_manifest("merged", "bucket")
    )
    jobs, key = KubeJobs(api_client), JobKey(namespace=namespace, name="merged")
    first = {"attempt": 1, "reason": "DriverKilled", "time": "2026-11-29T10:00:00Z", "exitCode": 137}
    recovered = {**first, "recoverySeconds": 8.5, "recoveryPhases": {"seen": 0.3, "committed": 8.5}}
    job = jobs.get(key)
    assert job is not None
    jobs.write_status(job, {"phase": "Running", "attempt": 2, "lastFailure": recovered})
    second = {"attempt": 2, "reason": "NodeLost", "time": "2026-11-29T10:05:00Z"}
    job = jobs.get(key)
    assert job is not None and job.status["lastFailure"]["recoveryPhases"]["seen"] == 0.3
    jobs.write_status(job, {"phase": "Restarting", "attempt": 2, "lastFailure": second})
    job = jobs.get(key)
    assert job is not None
    failure = job.status["lastFailure"]
    assert failure["reason"] == "NodeLost" and not {"recoverySeconds", "recoveryPhases", "exitCode"} & set(
        failure
    )
