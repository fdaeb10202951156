"""What runs only while this replica leads: kopf's watches feeding a work queue, and reconcile workers."""

from __future__ import annotations

import asyncio
import datetime
import logging
import threading
import time
from collections.abc import Callable, Collection, Mapping
from typing import Any

import kopf
from botocore.exceptions import BotoCoreError, ClientError
from kubernetes import client

from ftspark.adapters.k8s import server_message
from ftspark.adapters.k8s.watching import ListWatch
from ftspark.domain.fencing import FencedOutError
from ftspark.domain.ha import JobKey
from ftspark.handlers.watch import build_registry, watch_settings
from ftspark.metrics import HOUSEKEEPING, RECONCILE_SECONDS
from ftspark.ports.cluster import StaleReadError
from ftspark.reconcile.nodes import NODE_LEASE_NAMESPACE, NodeWatch
from ftspark.reconcile.pacing import (
    CHECKPOINT_REFRESHES_PER_SECOND,
    CHECKPOINT_STATUS_DELAY,
    RefreshPacer,
    WaitBackoff,
)
from ftspark.reconcile.queue import WorkQueue
from ftspark.reconcile.reconciler import Reconciler
from ftspark.reconcile.schedules import ScheduleReconciler

log = logging.getLogger(__name__)

_MIN_ERROR_BACKOFF = 0.5
_MAX_ERROR_BACKOFF = 60.0
# A job learns of failing reconciles from the third in a row (about 1.5 s in): one that fails once and then
# goes through says nothing.
_REPORTED_AFTER = 3
_REPORT_CHARS = 600
_SILENCE_CHECK_SECONDS = 1.0  # how late past the silence threshold a job may learn of it


class Controller:
    def __init__(
        self,
        reconciler: Reconciler,
        *,
        api_configuration: client.Configuration,
        workers: int,
        namespaces: Collection[str],
        on_fatal: Callable[[], None],
        result_sweep_seconds: float = 300.0,
        checkpoint_versions: Callable[[], Mapping[JobKey, str]] | None = None,
        checkpoint_refreshes_per_second: float = CHECKPOINT_REFRESHES_PER_SECOND,
        nodes: NodeWatch | None = None,
        watch_drains: bool = False,
        schedules: ScheduleReconciler | None = None,
    ) -> None:
        """checkpoint_versions: where checkpoint records cannot be watched (S3), their versions by job,
        polled instead; None: they are ConfigMaps, watched.
        checkpoint_refreshes_per_second: the status refreshes checkpoint reports cause, all jobs together
        (reconcile.pacing).
        nodes: what the watches of nodes feed (the reconciler's Nodes port); None: nodes are not watched.
        watch_drains: the nodes themselves are watched (drains); their Leases are when nodes.silence_seconds.
        schedules: the ScheduledSparkJobs' reconciler, with a queue and a worker of its own (None: not
        watched)."""
        self._nodes, self._watch_drains = nodes, watch_drains
        self._schedules = schedules
        self._schedule_queue: WorkQueue[JobKey] = WorkQueue(tenant_of=lambda key: key.namespace)
        self._reconciler = reconciler
        self._api_configuration = api_configuration
        self._queue: WorkQueue[JobKey] = WorkQueue(tenant_of=lambda key: key.namespace)
        self._workers = workers
        self._namespaces = list(namespaces)
        self._on_fatal = on_fatal
        self._result_sweep_seconds = result_sweep_seconds
        self._checkpoint_versions = checkpoint_versions
        self._refreshes: RefreshPacer[JobKey] = RefreshPacer(
            floor=CHECKPOINT_STATUS_DELAY, per_second=checkpoint_refreshes_per_second
        )
        self._waits: WaitBackoff[JobKey] = WaitBackoff()
        self._kopf_stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._failures: dict[JobKey, int] = {}
        self._failures_lock = threading.Lock()

    def start(self) -> None:
        """Returns at once: it runs in the elector's callback, and nothing unbounded may delay renewing."""
        for index in range(self._workers):
            thread = threading.Thread(target=self._work, name=f"reconcile-{index}", daemon=True)
            thread.start()
            self._threads.append(thread)
        loops = [(self._watch, "kopf"), (self._sweep_results, "result-sweeper")]
        if self._schedules is not None:
            loops.append((self._work_schedules, "schedules"))
        if self._checkpoint_versions is not None:
            loops.append((self._poll_checkpoints, "checkpoint-poller"))
        if self._nodes is not None and self._nodes.silence_seconds:
            loops.append((self._watch_node_leases, "node-leases"))
        for target, name in loops:
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self, timeout: float = 5.0) -> bool:
        """Stop watching and reconciling; True once every thread that writes has ended, False after timeout
        (a reconcile still running: the Lease must then not be handed over early)."""
        self._kopf_stop.set()
        self._queue.shut_down()
        self._schedule_queue.shut_down()
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        # kopf's thread and the poller only fill the queue; reconcile workers and the result sweeper write.
        readers = ("kopf", "checkpoint-poller", "node-leases")
        return not any(thread.is_alive() for thread in self._threads if thread.name not in readers)

    def _watch(self) -> None:
        try:
            asyncio.run(
                kopf.operator(
                    settings=watch_settings(),
                    registry=build_registry(
                        self._queue,
                        self._api_configuration,
                        watch_checkpoints=self._checkpoint_versions is None,
                        on_deleted=self._reconciler.note_deleted,
                        is_own_write=self._reconciler.is_own_write,
                        on_checkpoint=self._checkpoint_reported,
                        nodes=self._nodes,
                        watch_drains=self._watch_drains,
                        on_schedule=self._schedule_queue.add if self._schedules is not None else None,
                    ),
                    standalone=True,  # leadership is ours (Lease), not kopf's peering
                    clusterwide=not self._namespaces,
                    namespaces=self._namespaces,
                    stop_flag=self._kopf_stop,
                )
            )
        except Exception:
            log.exception("kopf stopped unexpectedly")
        if not self._kopf_stop.is_set():
            self._on_fatal()  # without watches we would act on nothing: better restart as a follower

    def _watch_node_leases(self) -> None:
        """Feed the node Leases to the node watch, and wake each job whose driver's node fell silent (no
        event says so: silence is the lack of them) or speaks again."""
        nodes = self._nodes
        assert nodes is not None
        api = client.ApiClient(self._api_configuration)

        def seen(lease: Mapping[str, Any]) -> None:
            renewed = str((lease.get("spec") or {}).get("renewTime") or "")
            for key in nodes.lease_seen(lease["metadata"]["name"], renewed, _age(renewed)):
                log.info("%s: its driver's node %s renews its Lease again", key, lease["metadata"]["name"])
                self._queue.add(key, urgent=True)

        leases = ListWatch(
            api,
            f"the node Leases ({NODE_LEASE_NAMESPACE})",
            client.CoordinationV1Api(api).list_namespaced_lease,
            NODE_LEASE_NAMESPACE,
            on_seen=seen,
            on_gone=lambda lease: nodes.lease_gone(lease["metadata"]["name"]),
        )
        leases.start()
        try:
            while not self._kopf_stop.wait(_SILENCE_CHECK_SECONDS):
                for key in nodes.newly_silent():
                    log.warning(
                        "%s: its driver's node has not renewed its Lease for %.0f s",
                        key,
                        nodes.silence_seconds,
                    )
                    self._queue.add(key, urgent=True)
                for key in nodes.newly_late():  # its driver's Lease is looked at from this pass on
                    self._queue.add(key, urgent=True)
                for key in nodes.lapses_due():  # its driver is given up on at this pass
                    log.warning("%s: its driver's Lease is not renewed either", key)
                    self._queue.add(key, urgent=True)
        finally:
            leases.stop()

    def _sweep_results(self) -> None:
        # Cleanups a previous leader left half done first (FLIP-194), here rather than at the start of
        # leadership: however many results there are, the Lease is renewed meanwhile. The rest not at once:
        # a new leader's first seconds belong to reconciling every job (one read per job graph here would
        # compete with them), and orphaned HA data is only garbage, never in the way.
        while True:
            # Again at every sweep: a cleanup that failed (the API server refused a delete) is not given up.
            _sweep(self._reconciler.sweeper.finish_dirty_results, "finished %d cleanup(s) left dirty")
            if self._kopf_stop.wait(self._result_sweep_seconds):
                return
            _sweep(
                self._reconciler.sweeper.forget_orphans,
                "deleted the HA data of %d job(s) deleted while no leader watched",
            )
            _sweep(
                self._reconciler.sweeper.delete_orphan_volumes,
                "deleted the local-state volumes of %d deleted job(s)",
            )
            _sweep(self._reconciler.sweeper.expire_results, "expired %d job result(s) past their retention")

    def _work_schedules(self) -> None:
        """One worker: a schedule's pass is a few requests, and schedules are few beside jobs."""
        assert self._schedules is not None
        failures: dict[JobKey, int] = {}
        while (key := self._schedule_queue.get()) is not None:
            requeue: float | None = None
            try:
                requeue = self._schedules.reconcile(key)
                failures.pop(key, None)
            except StaleReadError:
                requeue = 0.0  # changed while decided on: decided again on a fresh read
            except Exception:
                count = failures[key] = failures.get(key, 0) + 1
                requeue = _error_backoff(count)
                log.exception("%s: schedule pass failed (%d in a row); again in %.1f s", key, count, requeue)
            finally:
                self._schedule_queue.done(key, again_after=requeue)

    def _checkpoint_reported(self, job: JobKey) -> None:
        if (delay := self._refreshes.delay(job)) is not None:
            self._queue.add_after(job, delay)

    def _poll_checkpoints(self) -> None:
        """What the ConfigMap watch does for records on S3: a job whose checkpoint record changed gets its
        status (latest checkpoint) refreshed. A listing per poll, no reads."""
        assert self._checkpoint_versions is not None
        # None until the first poll: a new leader reconciles every job anyway, so that one wakes nothing.
        seen: Mapping[JobKey, str] | None = None
        while not self._kopf_stop.wait(CHECKPOINT_STATUS_DELAY):
            try:
                versions = self._checkpoint_versions()
            except Exception:
                log.exception("polling the checkpoint records failed; trying again")
                continue
            for job, version in versions.items():
                if seen is not None and seen.get(job) != version:
                    self._checkpoint_reported(job)
            seen = versions

    def _report(self, key: JobKey, error: Exception) -> None:
        try:
            self._reconciler.report_failure(key, failure_in_words(error))
        except Exception as unreported:  # the cause is often the same (the API server down): logged above
            log.warning("%s: the failure could not be reported on the job: %s", key, unreported)

    def _work(self) -> None:
        while (key := self._queue.get()) is not None:
            started = time.monotonic()
            requeue: float | None = None
            try:
                requeue = self._waits.after(key, self._reconciler.reconcile(key))
                RECONCILE_SECONDS.labels(outcome="ok").observe(time.monotonic() - started)
                with self._failures_lock:
                    self._failures.pop(key, None)
            except StaleReadError as stale:
                # Not a failure: the job changed while it was being decided on (a user's edit). Its watch
                # event queues it again, read afresh.
                RECONCILE_SECONDS.labels(outcome="stale").observe(time.monotonic() - started)
                log.info("%s; deciding again on a fresh read", stale)
                requeue = 0.0
            except Exception as error:
                RECONCILE_SECONDS.labels(outcome="error").observe(time.monotonic() - started)
                with self._failures_lock:
                    count = self._failures[key] = self._failures.get(key, 0) + 1
                requeue = _error_backoff(count)
                log.exception("%s: reconcile failed (%d in a row); again in %.1f s", key, count, requeue)
                if count >= _REPORTED_AFTER and not isinstance(error, FencedOutError):
                    self._report(key, error)
            finally:
                self._queue.done(key, again_after=requeue)


def _age(timestamp: str) -> float:
    """Seconds since an RFC 3339 time of the API (0 for none)."""
    try:
        then = datetime.datetime.fromisoformat(timestamp)
    except ValueError:
        return 0.0
    return (datetime.datetime.now(datetime.UTC) - then).total_seconds()


def _error_backoff(failures_in_a_row: int) -> float:
    return float(min(_MIN_ERROR_BACKOFF * 2.0 ** (failures_in_a_row - 1), _MAX_ERROR_BACKOFF))


def failure_in_words(error: Exception) -> str:
    """A failed reconcile's cause in one bounded line for the job's user (the operator's log has the rest)."""
    if isinstance(error, client.ApiException):
        said = f"the API server answered {error.status}: {server_message(error)}"
    elif isinstance(error, BotoCoreError | ClientError):
        said = f"the operator's S3 (its endpoint and credentials, not the job's) failed: {error}"
    else:
        first = next((line for line in str(error).splitlines() if line.strip()), "")
        said = f"{type(error).__name__}: {first}" if first else type(error).__name__
    said = said if len(said) <= _REPORT_CHARS else f"{said[: _REPORT_CHARS - 1]}…"
    return f"{said} (tried again with a growing delay)"


def _sweep(step: Callable[[], int], done: str) -> None:
    """One housekeeping step; a failure is logged and the next sweep tries again."""
    try:
        count = step()
    except Exception:
        HOUSEKEEPING.labels(step=step.__name__, outcome="error").inc()
        log.exception("%s failed; trying again later", step.__name__)
    else:
        HOUSEKEEPING.labels(step=step.__name__, outcome="ok").inc()
        if count:
            log.info(done, count)
