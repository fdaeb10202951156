"""Watches through kopf: any change to a job or to one of its driver pods wakes that job's reconcile; a
failure, a deletion or a user's edit ahead of bulk work (reconcile.urgency). So does the end of one of its
executors: a restart waits until the earlier attempts' executors have ended or gone. A node that starts to
drain wakes the jobs whose drivers run on it, at once.

Only @kopf.on.event handlers: kopf keeps no progress annotations and adds no finalizers, so a stopped
operator never blocks the deletion of a job, and all state lives where the reconciler reads it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import kopf
from kubernetes import client

from ftspark import API_GROUP, API_VERSION, PLURAL, SCHEDULE_PLURAL
from ftspark.adapters.k8s.cluster import job_resource
from ftspark.adapters.k8s.configmap_stores import STORE_LABEL, WRITER_LABEL
from ftspark.adapters.k8s.schedules import SCHEDULE_LABEL
from ftspark.domain.ha import JobKey
from ftspark.ports.cluster import JobResource
from ftspark.protocol import JOB_LABEL, ROLE_LABEL, SPARK_ROLE_LABEL
from ftspark.reconcile.driver_pods import executor_ended
from ftspark.reconcile.nodes import NodeWatch, is_draining
from ftspark.reconcile.queue import WorkQueue
from ftspark.reconcile.urgency import driver_event_is_urgent, job_event_is_urgent

# What the pod and ConfigMap watches are about. The API server filters by them (a label selector on the
# watch), not kopf after the fact: the job graphs and every other pod and ConfigMap of the namespaces (of the
# cluster, in cluster-wide mode) never reach the operator. The pod watch takes the jobs' pods (drivers,
# standbys, executors: Spark labels those with the job, from the operator's sparkConf); each handler keeps its
# own. Values: a label's value, or kopf.PRESENT (kopf's filter type is not public).
JOB_PODS: Mapping[str, Any] = {JOB_LABEL: kopf.PRESENT}
DRIVER_PODS: Mapping[str, Any] = {ROLE_LABEL: "driver", JOB_LABEL: kopf.PRESENT}
EXECUTOR_PODS: Mapping[str, Any] = {SPARK_ROLE_LABEL: "executor", JOB_LABEL: kopf.PRESENT}
CHECKPOINT_RECORDS: Mapping[str, Any] = {STORE_LABEL: "checkpoints", JOB_LABEL: kopf.PRESENT}


def _label_selector(labels: Mapping[str, Any]) -> str:
    """A kopf label filter as the API server's label selector (kopf.PRESENT: the key exists)."""
    return ",".join(key if value is kopf.PRESENT else f"{key}={value}" for key, value in labels.items())


# The ConfigMap watch's selector: the checkpoint records a driver wrote last. The operator's own writes (a
# fence advance at each launch) report no checkpoint, and this way the API server does not send them. A record
# that starts or stops matching (a driver's report after a fence advance, or the next advance) comes as ADDED
# or DELETED.
CHECKPOINT_REPORTS = f"{_label_selector(CHECKPOINT_RECORDS)},{WRITER_LABEL}!=operator"


class NoDiffBase(kopf.DiffBaseStorage):
    """No diff base: only change handlers (on.create, on.update, ...) read one, and there are none. kopf
    still builds it for every watch event, deep copies of the whole object that were a sixth of the
    operator's CPU in a burst of new jobs."""

    def build(self, *, body: kopf.Body, extra_fields: Iterable[Any] | None = None) -> kopf.BodyEssence:
        return kopf.BodyEssence()

    def fetch(self, *, body: kopf.Body) -> kopf.BodyEssence | None:
        return None

    def store(self, *, body: kopf.Body, patch: kopf.Patch, essence: kopf.BodyEssence) -> None:
        """Nothing to keep (and never called without change handlers)."""


class ExecutorEnds:
    """Which executor pod events wake their job. The next attempt waits until no executor of an earlier one
    runs (it may still write state files): an executor's end (its kubelet's report, else its pod's removal)
    wakes the job once, at once, instead of a poll a while later. Its other changes (scheduled, started, the
    deletion asked for) wake nothing. kopf runs sync handlers on worker threads: set operations are atomic."""

    def __init__(self) -> None:
        self._woken: set[str] = set()  # the uids of ended executors whose end woke their job already

    def wakes(self, event_type: str | None, uid: str, pod: Mapping[str, Any]) -> bool:
        if event_type == "DELETED":
            if uid in self._woken:
                self._woken.discard(uid)
                return False
            return True
        if uid in self._woken or not executor_ended(pod):
            return False
        self._woken.add(uid)
        return True


def watch_settings() -> kopf.OperatorSettings:
    settings = kopf.OperatorSettings()
    settings.persistence.diffbase_storage = NoDiffBase()
    # No cluster-wide scans of CRDs and namespaces: the chart's namespaced mode grants no such rights, and
    # the resources and namespaces to watch are known at start.
    settings.scanning.disabled = True
    settings.watching.label_selectors["", "v1", "pods"] = _label_selector(JOB_PODS)
    settings.watching.label_selectors["", "v1", "configmaps"] = CHECKPOINT_REPORTS
    return settings


def connection_info(configuration: client.Configuration) -> kopf.ConnectionInfo:
    """kopf watches with exactly the credentials our kubernetes client uses (kubeconfig or in-cluster)."""
    header = configuration.get_api_key_with_prefix("BearerToken") or configuration.get_api_key_with_prefix(
        "authorization"
    )
    scheme, _, token = (header or "").rpartition(" ")
    return kopf.ConnectionInfo(
        server=configuration.host,
        ca_path=configuration.ssl_ca_cert,
        insecure=not configuration.verify_ssl,
        scheme=scheme or None,
        token=token or None,
        certificate_path=configuration.cert_file,
        private_key_path=configuration.key_file,
    )


def build_registry(
    queue: WorkQueue[JobKey],
    configuration: client.Configuration,
    *,
    watch_checkpoints: bool,
    on_deleted: Callable[[JobResource], None],
    is_own_write: Callable[[JobKey, str], bool],
    on_checkpoint: Callable[[JobKey], None],
    nodes: NodeWatch | None = None,
    watch_drains: bool = False,
    on_schedule: Callable[[JobKey], None] | None = None,
) -> kopf.OperatorRegistry:
    """watch_checkpoints: the checkpoint records are ConfigMaps (on S3 the controller polls them instead).
    on_checkpoint: a job's driver reported a checkpoint (its status is refreshed in a while, not per batch).
    on_deleted: a job deleted, in its last state, before its key is queued.
    is_own_write: whether a job at that resourceVersion is what the operator's own status write made of it.
    nodes: fed with the driver pods' nodes (None: nodes are not followed at all).
    watch_drains: nodes are also fed by a node watch; a node that starts to drain wakes the jobs whose drivers
    run on it.
    on_schedule: a ScheduledSparkJob, or one of its runs, changed (None: schedules are not watched).

    The echoes of the operator's own writes wake nothing: its status writes, the driver pods it creates and
    the checkpoint records it writes (fence advances, not even sent: CHECKPOINT_REPORTS). The reconcile that
    wrote them decided with them in mind; woken again it would read and decide the same, at five requests a
    pass, which a burst of new jobs would pay two or three times each."""
    registry = kopf.OperatorRegistry()

    @kopf.on.login(registry=registry)
    def login(**_: Any) -> kopf.ConnectionInfo:
        # Called again when a token expires: in-cluster tokens are re-read through the client's refresh hook.
        if configuration.refresh_api_key_hook is not None:
            configuration.refresh_api_key_hook(configuration)
        return connection_info(configuration)

    @kopf.on.event(group=API_GROUP, version=API_VERSION, plural=PLURAL, registry=registry)
    def job_changed(*, type: str | None, body: kopf.Body, namespace: str | None, name: str, **_: Any) -> None:
        key = JobKey(namespace=namespace or "", name=name)
        if on_schedule is not None and (schedule := body.metadata.labels.get(SCHEDULE_LABEL)):
            on_schedule(JobKey(namespace=namespace or "", name=schedule))  # a run started, ended or went
        if type == "DELETED":
            on_deleted(job_resource(key, body))
        elif type == "MODIFIED" and is_own_write(key, body.metadata.get("resourceVersion", "")):
            return
        queue.add(key, urgent=job_event_is_urgent(type, body))

    @kopf.on.event("", "v1", "pods", labels=DRIVER_PODS, registry=registry)
    def driver_changed(
        *, type: str | None, body: kopf.Body, namespace: str | None, labels: Mapping[str, str], **_: Any
    ) -> None:
        key = JobKey(namespace=namespace or "", name=labels[JOB_LABEL])
        if nodes is not None:
            node = str((body.get("spec") or {}).get("nodeName") or "")
            nodes.driver_seen(key, body.metadata.name or "", node, gone=type == "DELETED")
        if type == "ADDED":
            # Only the operator creates driver pods. One made by someone else waits for the job's next look:
            # it can make the operator delete it, never run it.
            return
        queue.add(key, urgent=driver_event_is_urgent(type, body))

    executor_ends = ExecutorEnds()

    @kopf.on.event("", "v1", "pods", labels=EXECUTOR_PODS, registry=registry)
    def executor_changed(
        *,
        type: str | None,
        body: kopf.Body,
        namespace: str | None,
        labels: Mapping[str, str],
        uid: str,
        **_: Any,
    ) -> None:
        if executor_ends.wakes(type, uid, dict(body)):
            queue.add(JobKey(namespace=namespace or "", name=labels[JOB_LABEL]), urgent=True)

    if on_schedule is not None:

        @kopf.on.event(group=API_GROUP, version=API_VERSION, plural=SCHEDULE_PLURAL, registry=registry)
        def schedule_changed(*, namespace: str | None, name: str, **_: Any) -> None:
            on_schedule(JobKey(namespace=namespace or "", name=name))

    if nodes is not None and watch_drains:
        node_watch = nodes

        @kopf.on.event("", "v1", "nodes", registry=registry)
        def node_changed(*, type: str | None, name: str, spec: Mapping[str, Any], **_: Any) -> None:
            draining = type != "DELETED" and is_draining(spec)
            for key in node_watch.node_seen(name, draining):
                queue.add(key, urgent=True)

    def checkpoint_reported(
        *, type: str | None, namespace: str | None, labels: Mapping[str, str], **_: Any
    ) -> None:
        if type == "DELETED":
            # Deleted, or out of CHECKPOINT_REPORTS: a fence advance (a forged writer label delays a refresh).
            return
        on_checkpoint(JobKey(namespace=namespace or "", name=labels[JOB_LABEL]))

    if watch_checkpoints:
        kopf.on.event(
            "",
            "v1",
            "configmaps",
            labels=CHECKPOINT_RECORDS,
            registry=registry,
        )(checkpoint_reported)
    return registry
