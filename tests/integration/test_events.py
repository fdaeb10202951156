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


def test_an_event_a_job_repeats_every_pass_is_one_event_counted(
    api_client: client.ApiClient, namespace: str
) -> None:
    """A job whose every pass says the same (a forged record, a stuck pod) leaves one Event, counted, not an
    Event per pass; a window later, a new one."""
    now = [0.0]
    events = KubeEvents(api_client, clock=lambda: now[0])
    job = JobResource(JobKey(namespace=namespace, name="loud"), "uid-1", 1, {}, {})
    for _ in range(50):
        events.emit(job, "Warning", "UntrustedJobGraph", "forged")
    events.emit(job, "Warning", "UntrustedJobGraph", "something else")
    now[0] = KubeEvents.REPEAT_WINDOW
    events.emit(job, "Warning", "UntrustedJobGraph", "forged")

    listed = client.CoreV1Api(api_client).list_namespaced_event(namespace).items
    counted = sorted((e.message, e.count) for e in listed)
    assert counted == [("forged", 1), ("forged", 50), ("something else", 1)]
