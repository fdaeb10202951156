"""The verb and resource an API request is counted under (ftspark_api_requests_total)."""

from __future__ import annotations

import pytest

from ftspark.adapters.k8s.counted import verb_and_resource

HOST = "https://127.0.0.1:6443"


@pytest.mark.parametrize(
    ("method", "path", "counted"),
    [
        ("GET", "/api/v1/namespaces/jobs/pods?labelSelector=a%3Db", ("list", "pods")),
        ("GET", "/api/v1/namespaces/jobs/pods/j-1-driver", ("get", "pods")),
        ("PATCH", "/api/v1/namespaces/jobs/pods/j-1-driver/status", ("patch", "pods/status")),
        ("POST", "/api/v1/namespaces/jobs/configmaps", ("create", "configmaps")),
        (
            "PUT",
            "/apis/coordination.k8s.io/v1/namespaces/ftspark-system/leases/ftspark-operator",
            ("update", "leases"),
        ),
        (
            "PATCH",
            "/apis/ftspark.io/v1alpha1/namespaces/jobs/faulttolerantsparkjobs/j/status",
            ("patch", "faulttolerantsparkjobs/status"),
        ),
        ("DELETE", "/api/v1/namespaces/jobs/pods/j-1-exec-1", ("delete", "pods")),
        ("DELETE", "/api/v1/namespaces/jobs/pods", ("deletecollection", "pods")),
        ("GET", "/api/v1/namespaces/jobs", ("get", "namespaces")),
        ("GET", "/api/v1/nodes", ("list", "nodes")),
        (
            "POST",
            "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
            ("create", "selfsubjectaccessreviews"),
        ),
        ("GET", "/version", ("get", "other")),
    ],
)
def test_requests_are_counted_in_kubernetes_terms(method: str, path: str, counted: tuple[str, str]) -> None:
    assert verb_and_resource(method, HOST + path) == counted
