"""The driver's liveness: a progress watchdog (domain/liveness.py says what counts as stuck) and the
endpoint of the kubelet's liveness probe.

Spark's listener thread records each query's signs of life; a thread of this Python process checks them
every second. It runs in Python, not in the JVM, so it keeps running when the JVM hangs (stopped, deadlocked,
in an endless GC); a stuck query makes it call on_stuck once.

Nothing inside the process can notice that the whole process is frozen (the container's cgroup frozen, every
process stopped, a paused VM): the kubelet does. The probe asks HealthEndpoint, which answers from its own
thread; a frozen process answers nothing, the probe times out and the kubelet kills the container. An HTTP
probe rather than an exec one: the kubelet discards an exec that errors (runc refuses to exec into a frozen
container) instead of counting it as a failure, while an unanswered GET is one.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from kubernetes import client
from kubernetes.client.rest import ApiException
from urllib3.exceptions import HTTPError

from ftspark.domain.liveness import NO_DATA_INTERVAL_KEY, Stuck, shortest_timeout, stuck
from ftspark.protocol import HEALTH_PATH, READY_PATH, executor_selector
from ftspark.reconcile.driver_pods import waiting_cause

log = logging.getLogger(__name__)

CHECK_SECONDS = 1.0


class SignsOfLife:
    """The monotonic time each running query (by name) was last heard from."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._seen: dict[str, float] = {}
        self._names: dict[str, str] = {}  # query id -> name, from its start

    def started(self, query_id: str, name: str | None) -> None:
        with self._lock:
            self._names[query_id] = name or query_id
            self._seen[query_id] = self._clock()

    def heard(self, query_id: str) -> None:
        with self._lock:
            if query_id in self._seen:  # not after its end: a late event must not bring it back
                self._seen[query_id] = self._clock()

    def ended(self, query_id: str) -> None:
        with self._lock:
            self._seen.pop(query_id, None)

    def stuck(self, timeout: float) -> Stuck | None:
        with self._lock:
            found = stuck(self._seen, self._clock(), timeout)
            return None if found is None else Stuck(self._names[found.query], found.silent_seconds)


class Watchdog:
    def __init__(self, signs: SignsOfLife, timeout: float, on_stuck: Callable[[Stuck], None]) -> None:
        self._signs, self._timeout, self._on_stuck = signs, timeout, on_stuck
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="progress-watchdog", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _watch(self) -> None:
        while not self._stop.wait(CHECK_SECONDS):
            found = self._signs.stuck(self._timeout)
            if found is not None:
                log.error("query %s: no sign of life for %.0f s", found.query, found.silent_seconds)
                self._on_stuck(found)
                return


def start_watchdog(
    signs: SignsOfLife,
    configured: float,
    idle_interval: str | None,
    on_stuck: Callable[[Stuck, float], None],
) -> Watchdog | None:
    """The progress watchdog of a job's settings (None: off, a timeout of 0). Its timeout is never below
    what an idle query trips (idle_interval: the session's NO_DATA_INTERVAL_KEY; the operator refuses such
    a spec, but the application's own settings may raise the interval); on_stuck gets the timeout used."""
    if configured <= 0:
        log.info("progress watchdog off")
        return None
    try:
        shortest = shortest_timeout({NO_DATA_INTERVAL_KEY: idle_interval} if idle_interval else {})
    except ValueError as error:
        log.warning("%s: %s", NO_DATA_INTERVAL_KEY, error)
        shortest = 0.0
    timeout = max(configured, shortest)
    if timeout > configured:
        log.warning(
            "progress timeout %g s raised to %g s: %s is %s",
            configured,
            timeout,
            NO_DATA_INTERVAL_KEY,
            idle_interval,
        )
    watchdog = Watchdog(signs, timeout, lambda found: on_stuck(found, timeout))
    watchdog.start()
    return watchdog


EXECUTORS_READ_SECONDS = 5.0  # the watchdog's one look at the executor pods, before the JVM is killed


def executors_waiting(api: client.ApiClient, namespace: str, app_id: str) -> str | None:
    """What the application's executors wait for, in one line, when none of them runs: a query with no
    executor shows no sign of life either, but its driver is not hung. None when one runs, or when the pods
    cannot be read (the driver is then reported hung, as before)."""
    try:
        response = client.CoreV1Api(api).list_namespaced_pod(
            namespace,
            label_selector=executor_selector(app_id),
            _preload_content=False,
            _request_timeout=(EXECUTORS_READ_SECONDS, EXECUTORS_READ_SECONDS),
        )
        pods = json.loads(response.data)["items"]
    except (ApiException, HTTPError, ValueError, KeyError) as error:
        log.warning("the executor pods could not be read: %s", error)
        return None
    if any((pod.get("status") or {}).get("phase") == "Running" for pod in pods):
        return None
    if not pods:
        return "Spark created no executor pod (the driver's log says why)"
    cause = next((found for pod in pods if (found := waiting_cause(pod, "executor"))), None)
    said = f": {cause.reason}: {cause.message}" if cause is not None else ""
    return f"{len(pods)} executor pod(s), none running{said}"


class _HealthServer(ThreadingHTTPServer):
    ready: threading.Event


class _Health(BaseHTTPRequestHandler):
    server: _HealthServer

    def do_GET(self) -> None:
        if self.path == HEALTH_PATH:
            code, body = 200, b"ok\n"
        elif self.path == READY_PATH:
            ready = self.server.ready.is_set()
            code, body = (200, b"ready\n") if ready else (503, b"the spark session is not up yet\n")
        else:
            code, body = 404, b"not found\n"
        self.send_response(code)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass  # a probe every few seconds would fill the driver's log


class HealthEndpoint:
    """GET /healthz -> 200 from a daemon thread: this process is not frozen (see the module's doc). GET
    /readyz -> 200 once `ready` is set (the SparkSession is up), else 503: a standby's readiness probe, so
    that the operator promotes only a standby that saves the session's start."""

    def __init__(self, host: str, port: int, ready: threading.Event | None = None) -> None:
        self._server = _HealthServer((host, port), _Health)
        self._server.ready = ready if ready is not None else threading.Event()
        self._server.daemon_threads = True

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def start(self) -> None:
        threading.Thread(target=self._server.serve_forever, name="health", daemon=True).start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
