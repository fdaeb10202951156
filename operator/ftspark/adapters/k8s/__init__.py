"""Adapters on the Kubernetes API."""

import json
from collections.abc import Callable, Iterator
from typing import Any

from kubernetes import client, config
from kubernetes.client.rest import ApiException

PAGE = 500  # items per list call: one answer with every item of a big installation would be slow and large


def kube_configuration(kubeconfig: str | None) -> client.Configuration:
    """The client's configuration from a kubeconfig file (outside a cluster: tests, a laptop), else from the
    pod's ServiceAccount."""
    configuration = client.Configuration()
    if kubeconfig:
        config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
    else:
        config.load_incluster_config(client_configuration=configuration)
    return configuration


def pages(
    list_call: Callable[..., Any], token_of: Callable[[Any], str | None], **options: Any
) -> Iterator[Any]:
    """Every page of a list call, PAGE items at a time, following its continue token (token_of: where the
    answer keeps it, a model's or a dict's)."""
    token = None
    while True:
        page = list_call(limit=PAGE, **options, **({"_continue": token} if token else {}))
        yield page
        token = token_of(page)
        if not token:
            return


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


def server_message(error: ApiException) -> str:
    """What the API server said of a refused request (its Status message), else the HTTP reason."""
    try:
        said = json.loads(error.body or "{}").get("message")
    except (ValueError, AttributeError):
        said = None
    return str(said or error.reason)
