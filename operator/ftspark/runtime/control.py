"""Control requests from the operator (ftspark.protocol.ControlRequest), read from the driver's own pod
(docs/driver-runtime.md). A new value is a new request (the same value is handled once). The outcome of a
savepoint is written back to the pod as annotation `ftspark.io/savepoint`: JSON {"id", "location",
"batches": {query: batch}} or {"id", "error"}.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import urllib3
from kubernetes import client
from kubernetes.client.rest import ApiException
from pyspark import SparkContext

from ftspark.adapters.k8s import request_timeout
from ftspark.protocol import CONTROL_ANNOTATION, ControlRequest

log = logging.getLogger(__name__)

_TIMEOUT = request_timeout(10.0)


class ControlWatcher:
    """Polls the pod (a watch would need a reconnect loop for the same effect; one GET a second is cheap)."""

    def __init__(
        self,
        api: client.ApiClient,
        namespace: str,
        pod: str,
        interval: float,
        on_request: Callable[[ControlRequest], None],
    ) -> None:
        self._core = client.CoreV1Api(api)
        self._namespace = namespace
        self._pod = pod
        self._interval = interval
        self._on_request = on_request
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="control", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def annotate(self, key: str, value: str) -> None:
        body = {"metadata": {"annotations": {key: value}}}
        try:
            self._core.patch_namespaced_pod(self._pod, self._namespace, body, _request_timeout=_TIMEOUT)
        except (ApiException, urllib3.exceptions.HTTPError) as error:
            log.warning("cannot annotate pod %s: %s", self._pod, error)

    def _run(self) -> None:
        handled = failure = ""
        while not self._stop.wait(self._interval):
            try:
                pod = self._core.read_namespaced_pod(self._pod, self._namespace, _request_timeout=_TIMEOUT)
            except (ApiException, urllib3.exceptions.HTTPError) as error:
                if str(error) != failure:  # once per kind of failure, not every interval
                    failure = str(error)
                    log.warning("cannot read pod %s for control requests: %s", self._pod, failure)
                continue
            failure = ""
            value = (pod.metadata.annotations or {}).get(CONTROL_ANNOTATION, "")
            if not value or value == handled:
                continue
            handled = value
            request = ControlRequest.parse(value)
            if request is None:
                log.error(
                    "ignoring control request %r: not one of %s@...", value, "stop|savepoint|stop-savepoint"
                )
                continue
            log.info("control request: %s", value)
            self._on_request(request)


def stop_at_boundary(queries: Sequence[Any], timeout: float) -> bool:
    """Stop each query (pyspark StreamingQuery) between two micro-batches; True if every one stopped so.

    Spark has no graceful stop: stop() interrupts a running batch, which then runs again after a restart.
    But the query thread checks its state before each trigger and leaves its loop on TERMINATED, so setting
    that state first (StreamExecution.state: internal to Spark, public in its bytecode) lets the running
    batch commit and starts no other; the thread then ends by itself, and stop() only cleans up. Waiting for
    the thread to end (not for "no trigger active", which a thread that checked its state just before the
    set has not reported yet) makes this hold under any load. Past the timeout the stop escalates to a
    cancel (the running batch is interrupted)."""
    jvm = SparkContext._jvm
    assert jvm is not None, "queries run, so the JVM is up"
    terminated = getattr(getattr(jvm.org.apache.spark.sql.execution.streaming, "TERMINATED$"), "MODULE$")
    threads = [query._jsq.streamingQuery().queryExecutionThread() for query in queries]
    for query in queries:
        query._jsq.streamingQuery().state().set(terminated)
    deadline = time.monotonic() + timeout
    graceful = True
    for query, thread in zip(queries, threads, strict=True):
        thread.join(max(1, int((deadline - time.monotonic()) * 1000)))
        graceful = graceful and not thread.isAlive()
        query.stop()
    return graceful
