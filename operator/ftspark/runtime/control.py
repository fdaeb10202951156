"""Control requests from the operator (ftspark.protocol.ControlRequest), read from the driver's own pod
(docs/driver-runtime.md). A new value is a new request (the same value is handled once). The outcome of a
savepoint is written back to the pod as annotation `ftspark.io/savepoint`: JSON {"id", "location",
"batches": {query: batch}} or {"id", "error"}.

Each request carries the term of the operator leader that wrote it; the driver obeys it only if that term is
at least the operator's term floor (read from its ConfigMap when a request comes), so a deposed leader
resumed after a pause cannot stop the driver or make it take a savepoint. A refused request is answered on
the pod as annotation `ftspark.io/control-refused`: JSON {"request", "reason"}.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Literal, assert_never

import urllib3
from kubernetes import client
from kubernetes.client.rest import ApiException
from pyspark import SparkContext

from ftspark.adapters.k8s import request_timeout
from ftspark.protocol import (
    CONTROL_ACTIONS,
    CONTROL_ANNOTATION,
    CONTROL_REFUSED_ANNOTATION,
    ControlRequest,
    parse_term,
)

log = logging.getLogger(__name__)

_TIMEOUT = request_timeout(10.0)
ANNOTATE_BACKOFF = (0.5, 1.0, 2.0, 4.0)  # seconds between tries of one annotation


Verdict = Literal["obey", "refuse", "retry"]


def judge(request: ControlRequest, floor: int | None) -> tuple[Verdict, str]:
    """What the driver does with a request, given the operator's term floor (None: it could not be read):
    obey it, refuse it for good (it is handled: the same value is never looked at again), or look again at
    the next poll. Why, for the log and the pod."""
    if request.term is None:
        return "refuse", "the request carries no operator term (the format before terms)"
    if floor is None:
        return "retry", "the operator's term floor could not be read"
    if request.term < floor:
        return "refuse", f"written by operator term {request.term}, below the term floor {floor}"
    return "obey", f"operator term {request.term}, term floor {floor}"


class ControlWatcher:
    """Polls the pod (a watch would need a reconnect loop for the same effect; one GET a second is cheap)."""

    def __init__(
        self,
        api: client.ApiClient,
        namespace: str,
        pod: str,
        interval: float,
        on_request: Callable[[ControlRequest], bool],
        term_floor: tuple[str, str],
    ) -> None:
        """on_request: carries a request out, True once it is done with (False: look again at the next poll,
        a savepoint before any query started). term_floor: (namespace, name) of the operator's term floor
        ConfigMap."""
        self._core = client.CoreV1Api(api)
        self._term_floor = term_floor
        self._namespace = namespace
        self._pod = pod
        self._interval = interval
        self._on_request = on_request
        self._stop = threading.Event()
        self._poke = threading.Event()  # look now, not at the next interval
        self._thread = threading.Thread(target=self._run, name="control", daemon=True)
        self._handled = self._failure = self._retrying = ""

    def start(self) -> None:
        """The first look on the caller's thread: a request written while the driver started (a stop) is
        carried out before the script starts its queries."""
        self._look()
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._poke.set()

    def poke(self) -> None:
        """Read the pod now (it changed), not at the next interval."""
        self._poke.set()

    def annotate(self, key: str, value: str) -> None:
        """An answer the operator reads from the pod (a savepoint taken, checkpoints rolled back): one failed
        call on a busy API server must not lose it, so a few tries, ANNOTATE_BACKOFF apart."""
        body = {"metadata": {"annotations": {key: value}}}
        for delay in (*ANNOTATE_BACKOFF, None):
            try:
                self._core.patch_namespaced_pod(self._pod, self._namespace, body, _request_timeout=_TIMEOUT)
                return
            except (ApiException, urllib3.exceptions.HTTPError) as error:
                gone = isinstance(error, ApiException) and error.status == 404
                log.warning("cannot annotate pod %s with %s: %s", self._pod, key, error)
                if gone or delay is None:
                    return
                time.sleep(delay)

    def _run(self) -> None:
        while True:
            self._poke.wait(self._interval)
            self._poke.clear()
            if self._stop.is_set():
                return
            self._look()

    def _look(self) -> None:
        try:
            pod = self._core.read_namespaced_pod(self._pod, self._namespace, _request_timeout=_TIMEOUT)
        except (ApiException, urllib3.exceptions.HTTPError) as error:
            if str(error) != self._failure:  # once per kind of failure, not every interval
                self._failure = str(error)
                log.warning("cannot read pod %s for control requests: %s", self._pod, self._failure)
            return
        self._failure = ""
        value = (pod.metadata.annotations or {}).get(CONTROL_ANNOTATION, "")
        if not value or value == self._handled:
            return
        request = ControlRequest.parse(value)
        if request is None:
            self._handled = value
            log.error("ignoring control request %r: not one of %s@...", value, "|".join(CONTROL_ACTIONS))
            return
        verdict, why = judge(request, self._floor() if request.term is not None else None)
        match verdict:
            case "retry":
                self._not_yet(value, why)
            case "refuse":
                self._handled = value
                log.warning("refusing control request %s: %s", value, why)
                self.annotate(CONTROL_REFUSED_ANNOTATION, json.dumps({"request": value, "reason": why}))
            case "obey":
                if self._on_request(request):
                    self._handled = value
                    log.info("control request: %s (%s)", value, why)
                else:
                    self._not_yet(value, "no query has started yet")
            case unknown:
                assert_never(unknown)

    def _not_yet(self, value: str, why: str) -> None:
        if value != self._retrying:  # once per request, not every interval
            self._retrying = value
            log.warning("control request %s not handled yet: %s", value, why)

    def _floor(self) -> int | None:
        """The operator's term floor; None if it cannot be read (or holds no term)."""
        namespace, name = self._term_floor
        try:
            found = self._core.read_namespaced_config_map(name, namespace, _request_timeout=_TIMEOUT)
        except (ApiException, urllib3.exceptions.HTTPError) as error:
            log.warning("cannot read the term floor %s/%s: %s", namespace, name, error)
            return None
        return parse_term((found.data or {}).get("term", ""))


def _terminated(execution: Any) -> Any:
    """Spark's TERMINATED state object, found next to the query's current state: Spark 4.1 moved the
    streaming execution classes from org.apache.spark.sql.execution.streaming to its .runtime package."""
    state_class = execution.state().get().getClass()
    package = state_class.getPackage().getName()
    jvm = SparkContext._jvm
    assert jvm is not None, "queries run, so the JVM is up"
    terminated = jvm.java.lang.Class.forName(f"{package}.TERMINATED$", True, state_class.getClassLoader())
    return terminated.getField("MODULE$").get(None)


def stop_at_boundary(queries: Sequence[Any], timeout: float) -> bool:
    """Stop each query (pyspark StreamingQuery) between two micro-batches; True if every one stopped so.

    Spark has no graceful stop: stop() interrupts a running batch, which then runs again after a restart.
    But the query thread checks its state before each trigger and leaves its loop on TERMINATED, so setting
    that state first (StreamExecution.state: internal to Spark, public in its bytecode) lets the running
    batch commit and starts no other; the thread then ends by itself, and stop() only cleans up. Waiting for
    the thread to end (not for "no trigger active", which a thread that checked its state just before the
    set has not reported yet) makes this hold under any load. Past the timeout the stop escalates to a
    cancel (the running batch is interrupted)."""
    executions = [query._jsq.streamingQuery() for query in queries]
    threads = [execution.queryExecutionThread() for execution in executions]
    for execution in executions:
        execution.state().set(_terminated(execution))
    deadline = time.monotonic() + timeout
    graceful = True
    for query, thread in zip(queries, threads, strict=True):
        thread.join(max(1, int((deadline - time.monotonic()) * 1000)))
        graceful = graceful and not thread.isAlive()
        query.stop()
    return graceful
