"""Every request the operator makes of the API server, counted by verb and resource
(ftspark_api_requests_total): the cost of a job in API calls, which decides how many jobs one API server
carries. kopf's watches are not counted: a few long-lived streams, not calls per job."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from kubernetes import client

from ftspark.metrics import API_REQUESTS

_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch"}


def verb_and_resource(method: str, url: str) -> tuple[str, str]:
    """Kubernetes' own names: GET of a collection is `list`, of one object `get`; `pods/status` for a
    subresource. /api/v1/namespaces/jobs/pods/p/status -> ("patch", "pods/status") for a PATCH."""
    segments = [part for part in urlsplit(url).path.split("/") if part]
    # /api/<version>/... or /apis/<group>/<version>/...
    rest = segments[2:] if segments[:1] == ["api"] else segments[3:] if segments[:1] == ["apis"] else []
    if len(rest) > 2 and rest[0] == "namespaces":
        rest = rest[2:]
    if not rest:
        return method.lower(), "other"
    resource = rest[0] if len(rest) < 3 else f"{rest[0]}/{rest[2]}"
    named = len(rest) > 1
    if method == "GET":
        return ("get" if named else "list"), resource
    if method == "DELETE":
        return ("delete" if named else "deletecollection"), resource
    return _VERBS.get(method, method.lower()), resource


class CountedApiClient(client.ApiClient):  # type: ignore[misc]  # kubernetes has no type hints
    def request(self, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        verb, resource = verb_and_resource(method, url)
        API_REQUESTS.labels(verb=verb, resource=resource).inc()
        return super().request(method, url, *args, **kwargs)
