"""Adapters on the Kubernetes API."""


def request_timeout(seconds: float) -> tuple[float, float]:
    """The form of `_request_timeout` that works for every value: kubernetes-client 34 ignores a bare float
    (only an int or a (connect, read) pair is honoured), which leaves a call through a partition hanging."""
    return (seconds, seconds)
