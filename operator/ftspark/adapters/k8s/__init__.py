"""Adapters on the Kubernetes API."""

from collections.abc import Callable
from typing import Any

MANAGED = {"app.kubernetes.io/managed-by": "ftspark"}  # the label ftspark's own objects carry


def without_answer(call: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
    """Make a request whose answer is not used, without turning it into models: the client would build a
    V1Pod from every pod created, some milliseconds of CPU each, which at thousands of jobs is most of what
    a submission costs the operator. Errors are raised as ApiException all the same (with the raw body)."""
    response = call(*args, _preload_content=False, **kwargs)
    response.drain_conn()
    response.release_conn()


def request_timeout(seconds: float) -> tuple[float, float]:
    """The form of `_request_timeout` that works for every value: kubernetes-client 34 ignores a bare float
    (only an int or a (connect, read) pair is honoured), which leaves a call through a partition hanging."""
    return (seconds, seconds)
