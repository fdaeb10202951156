"""The uids of the FaultTolerantSparkJobs that exist: what the local-state sweeper must not touch."""

from __future__ import annotations

from typing import Any

from kubernetes import client

from ftspark import API_GROUP, API_VERSION, PLURAL

_PAGE = 500


def live_job_uids(
    api: client.ApiClient, namespaces: tuple[str, ...] = (), *, timeout: float = 10.0
) -> frozenset[str]:
    """Every job's uid in the namespaces (empty: all of them), page by page. Raises if any page cannot be
    read: a partial listing would pass for jobs that are gone."""
    objects = client.CustomObjectsApi(api)
    uids: set[str] = set()
    for namespace in namespaces or (None,):
        token = None
        while True:
            options: dict[str, Any] = {"limit": _PAGE, "_request_timeout": timeout}
            if token:
                options["_continue"] = token
            page = (
                objects.list_cluster_custom_object(API_GROUP, API_VERSION, PLURAL, **options)
                if namespace is None
                else objects.list_namespaced_custom_object(
                    API_GROUP, API_VERSION, namespace, PLURAL, **options
                )
            )
            uids.update(item["metadata"]["uid"] for item in page["items"])
            token = page["metadata"].get("continue")
            if not token:
                break
    return frozenset(uids)
