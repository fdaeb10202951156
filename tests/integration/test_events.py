"""Events are best effort: one the API server refuses never stops the reconcile that acts on the job."""

from __future__ import annotations

import logging

import pytest
from kubernetes import client

from ftspark.adapters.k8s.cluster import KubeEvents
from ftspark.domain.ha import JobKey
from ftspark.ports.cluster import JobResource


def test_a_refused_event_is_logged_not_raised(
    api_client: client.ApiClient, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    events = KubeEvents(api_client)
    recorded = JobResource(JobKey(namespace=namespace, name="job"), "uid-1", 1, {}, {})
    events.emit(recorded, "Normal", "Submitted", "first attempt")
    listed = client.CoreV1Api(api_client).list_namespaced_event(namespace).items
    assert [(e.reason, e.involved_object.name) for e in listed] == [("Submitted", "job")]

    refused = JobResource(JobKey(namespace="no-such-namespace", name="job"), "uid-2", 1, {}, {})
    with caplog.at_level(logging.WARNING):
        events.emit(refused, "Warning", "Restarting", "attempt 1 failed")
    assert "Event Restarting not recorded (404" in caplog.text
