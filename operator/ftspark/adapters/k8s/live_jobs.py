"""The uids of the FaultTolerantSparkJobs that exist: what the local-state sweeper must not touch."""

from __future__ import annotations

import functools

from kubernetes import client

from ftspark import API_GROUP, API_VERSION, PLURAL
from ftspark.adapters.k8s import pages, request_timeout


def live_job_uids(
    api: client.ApiClient, namespaces: tuple[str, ...] = (), *, timeout: float = 10.0
) -> frozenset[str]:
    """Every job's uid in the namespaces (empty: all of them), page by page. Raises if any page cannot be
    read: a partial listing would pass for jobs that are gone."""
    objects = client.CustomObjectsApi(api)
    calls = (
        [
            functools.partial(objects.list_namespaced_custom_object, API_GROUP, API_VERSION, n, PLURAL)
            for n in namespaces
        ]
        if namespaces
        else [functools.partial(objects.list_cluster_custom_object, API_GROUP, API_VERSION, PLURAL)]
    )
    return frozenset(
        item["metadata"]["uid"]
        for call in calls
        for page in pages(
            call, lambda page: page["metadata"].get("continue"), _request_timeout=request_timeout(timeout)
        )
        for item in page["items"]
    )
