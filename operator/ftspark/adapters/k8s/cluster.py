"""Jobs, driver pods and Events through the Kubernetes API (sync client; the reconciler runs in threads)."""

from __future__ import annotations

import datetime
import json
import logging
import re
import secrets
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from kubernetes import client
from kubernetes.client.rest import ApiException

from ftspark import API_GROUP, API_VERSION, PLURAL
from ftspark.adapters.k8s import server_message, without_answer
from ftspark.adapters.k8s.lease_lock import KubernetesLeaseLock
from ftspark.adapters.seal import RecordSeal
from ftspark.domain.ha import JobKey
from ftspark.domain.lifecycle import DriverObservation
from ftspark.leader.elector import release_for_ended_holder
from ftspark.manifests import (
    LOCAL_RECOVERY_KEY_BYTES,
    LOCAL_STATE_OPENER,
    LOCAL_STATE_VOLUME_PREFIX,
    LOCAL_STATE_VOLUME_SELECTOR,
    AttemptKeys,
    AttemptPlan,
    Manifest,
    attempt_objects,
    local_state_volume_name,
)
from ftspark.ports.cluster import (
    DriverLease,
    JobResource,
    NamespaceMetadata,
    ObjectDeferredError,
    ObjectRejectedError,
    StaleReadError,
)
from ftspark.ports.leadership import LockUnavailableError
from ftspark.protocol import (
    CONTROL_ANNOTATION,
    JOB_LABEL,
    JOB_NAMESPACE_LABEL,
    ROLE_LABEL,
    SERVING_LABEL,
    SPARK_APP_SELECTOR_LABEL,
    SPARK_ROLE_LABEL,
    STANDBY_LABEL,
    ControlRequest,
    attempt_secret_name,
    driver_lease_name,
    executor_selector,
    job_app_prefix,
    job_owner_reference,
)
from ftspark.reconcile.driver_pods import executor_ended, observe_driver, on_lost_node

log = logging.getLogger(__name__)

LEASE_REQUEST_SECONDS = 10.0  # a driver Lease release is only a shortcut: a slow one is given up


def _ignore(status: int, call: Any, *args: Any, **kwargs: Any) -> None:
    try:
        without_answer(call, *args, **kwargs)
    except ApiException as error:
        if error.status != status:
            raise


# What a refusal of a pod with localRecovery's init step says besides the server's words.
LOCAL_STATE_NEEDS_BASELINE = (
    f"; localRecovery's init container {LOCAL_STATE_OPENER} runs as root to open the job's node directory "
    "to the executor's user, which the Pod Security level restricted refuses: label the namespace "
    "pod-security.kubernetes.io/enforce=baseline or turn spec.localRecovery off"
)


class MissingRightsError(Exception):
    """The operator's RBAC lacks what a job asks for: its reconciles fail (tried again with a growing delay)
    and, after a few, its status says this, until an admin grants the right."""


LOCAL_STATE_VOLUMES_NOT_GRANTED = (
    "the operator may not create PersistentVolumes, which localRecovery needs (the job's node directory, "
    "mounted by its executors through a claim): install the chart with localRecovery.enabled=true, or turn "
    "spec.localRecovery off"
)


# A ResourceQuota's refusals: no room, or its usage not counted yet (a new quota) — both pass later.
_QUOTA = re.compile(r"exceeded quota|status unknown for quota")
_RBAC_REFUSAL = re.compile(r'is forbidden: User ".*" cannot ')


def _refused_as_rejected(kind: str, body: Manifest, call: Any, *args: Any, **kwargs: Any) -> bool:
    """An object the API server calls invalid (400, 422) or that an admission refuses (403: the namespace's
    Pod Security level, e.g. localRecovery's init step under "restricted"; a LimitRange; a policy) becomes
    ObjectRejectedError with the server's own words (and what to do about localRecovery); one a ResourceQuota
    has no room for, ObjectDeferredError; 409 (already exists) is fine, other errors (RBAC, outages) are
    raised as they are. True if it was created, False if it existed."""
    try:
        without_answer(call, *args, **kwargs)
    except ApiException as error:
        if error.status == 409:
            return False
        message = server_message(error)
        refused = f"the API server refused the driver's {kind} {body['metadata']['name']}"
        if error.status == 403 and _QUOTA.search(message):
            raise ObjectDeferredError(f"{refused} for now: {message}") from error
        # Beside RBAC (the operator's own rights: its log and its admin), a 403 is an admission's verdict on
        # what the spec made: Pod Security, a LimitRange, the cluster's own policies.
        admission = error.status == 403 and not _RBAC_REFUSAL.search(message)
        if error.status in {400, 422} or admission:
            opener = f'container "{LOCAL_STATE_OPENER}"'
            hint = (
                LOCAL_STATE_NEEDS_BASELINE if "violates PodSecurity" in message and opener in message else ""
            )
            raise ObjectRejectedError(f"{refused}: {message}{hint}") from error
        raise
    return True


def _owned_by(item: Any, uid: str) -> bool:
    return any(owner.uid == uid for owner in item.metadata.owner_references or ())


def job_resource(key: JobKey, body: Mapping[str, Any]) -> JobResource:
    """A FaultTolerantSparkJob as the API server sent it (a read, or a watch event)."""
    metadata = body["metadata"]
    return JobResource(
        key,
        metadata["uid"],
        metadata.get("generation", 1),
        dict(body.get("spec") or {}),
        dict(body.get("status") or {}),
        metadata.get("resourceVersion", ""),
    )


def read_custom_object(objects: client.CustomObjectsApi, plural: str, key: JobKey) -> dict[str, Any] | None:
    """One of ftspark's custom objects, as the API server has it now (None: there is none)."""
    try:
        body: dict[str, Any] = objects.get_namespaced_custom_object(
            API_GROUP, API_VERSION, key.namespace, plural, key.name
        )
    except ApiException as error:
        if error.status == 404:
            return None
        raise
    return body


class KubeJobs:
    def __init__(self, api: client.ApiClient) -> None:
        self._objects = client.CustomObjectsApi(api)
        self._core = client.CoreV1Api(api)

    def get(self, key: JobKey) -> JobResource | None:
        body = read_custom_object(self._objects, PLURAL, key)
        return None if body is None else job_resource(key, body)

    def delete_unchanged(self, job: JobResource) -> None:
        # Preconditions: the API server deletes only the object the decision was made on (409 otherwise).
        preconditions = client.V1Preconditions(uid=job.uid, resource_version=job.resource_version)
        try:
            self._objects.delete_namespaced_custom_object(
                API_GROUP,
                API_VERSION,
                job.key.namespace,
                PLURAL,
                job.key.name,
                body=client.V1DeleteOptions(preconditions=preconditions),
            )
        except ApiException as error:
            if error.status not in {404, 409}:  # gone, or changed: its watch event wakes the job again
                raise

    def namespace_metadata(self, namespace: str) -> NamespaceMetadata:
        metadata = self._core.read_namespace(namespace).metadata
        return NamespaceMetadata(metadata.labels or {}, metadata.annotations or {})

    def write_status(self, job: JobResource, status: dict[str, Any]) -> str:
        return write_status(self._objects, PLURAL, job, status)


def merge_patch(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON merge patch (RFC 7386) that makes old into new. A merge patch merges objects into objects at
    every depth, so a key new leaves out is nulled at every depth: a new status.lastFailure must not keep the
    recoveryPhases of the failure before it. Lists are replaced whole."""
    patch: dict[str, Any] = {key: None for key in old if key not in new}
    for key, value in new.items():
        before = old.get(key)
        if isinstance(value, Mapping) and isinstance(before, Mapping):
            patch[key] = merge_patch(before, value)
        else:
            patch[key] = value
    return patch


def write_status(
    objects: client.CustomObjectsApi, plural: str, resource: JobResource, status: dict[str, Any]
) -> str:
    """Replace the status subresource of one of ftspark's objects; the resourceVersion it makes."""
    # A merge patch of the status subresource, with the resourceVersion it was read at: a writer who decided
    # on an older read (a deposed leader resumed after a pause) gets 409 Conflict instead of overwriting a
    # newer status.
    body = {
        "metadata": {"resourceVersion": resource.resource_version},
        "status": merge_patch(resource.status, status),
    }
    try:
        written = objects.patch_namespaced_custom_object_status(
            API_GROUP, API_VERSION, resource.key.namespace, plural, resource.key.name, body
        )
    except ApiException as error:
        if error.status == 409:
            raise StaleReadError(
                f"{resource.key} changed since it was read at {resource.resource_version}"
            ) from None
        raise
    version: str = written["metadata"]["resourceVersion"]
    return version


class KubeDrivers:
    def __init__(self, api: client.ApiClient, seal: RecordSeal) -> None:
        """seal: the installation's, from which each job's checkpoint key, which its drivers get, derives."""
        self._api = api
        self._seal = seal
        self._core = client.CoreV1Api(api)
        self._rbac = client.RbacAuthorizationV1Api(api)
        self._networking = client.NetworkingV1Api(api)
        self._policy = client.PolicyV1Api(api)
        # Namespaces where the drivers' identity, and their disruption budget, were made or found.
        self._identities_ensured: set[str] = set()
        self._budgets_ensured: set[str] = set()
        core, rbac, networking = self._core, self._rbac, self._networking
        # What an attempt writes, by kind: how to create one, and how to undo it.
        self._writers: dict[str, tuple[Callable[..., Any], Callable[..., Any]]] = {
            "ServiceAccount": (
                core.create_namespaced_service_account,
                core.delete_namespaced_service_account,
            ),
            "Role": (rbac.create_namespaced_role, rbac.delete_namespaced_role),
            "RoleBinding": (rbac.create_namespaced_role_binding, rbac.delete_namespaced_role_binding),
            "Secret": (core.create_namespaced_secret, core.delete_namespaced_secret),
            "PersistentVolumeClaim": (
                core.create_namespaced_persistent_volume_claim,
                core.delete_namespaced_persistent_volume_claim,
            ),
            "NetworkPolicy": (
                networking.create_namespaced_network_policy,
                networking.delete_namespaced_network_policy,
            ),
            "PodDisruptionBudget": (
                self._policy.create_namespaced_pod_disruption_budget,
                self._policy.delete_namespaced_pod_disruption_budget,
            ),
            "Service": (core.create_namespaced_service, core.delete_namespaced_service),
            "Ingress": (networking.create_namespaced_ingress, networking.delete_namespaced_ingress),
            "Pod": (core.create_namespaced_pod, core.delete_namespaced_pod),
        }

    def observe(self, key: JobKey) -> list[DriverObservation]:
        # Raw JSON, as observe_driver reads it: no V1Pod models to build, which adds up at thousands of jobs.
        response = self._core.list_namespaced_pod(
            key.namespace, label_selector=self._selector(key), _preload_content=False
        )
        drivers = (observe_driver(pod) for pod in json.loads(response.data)["items"])
        return sorted((d for d in drivers if d is not None), key=lambda d: d.attempt)

    def create(self, plan: AttemptPlan) -> None:
        key = JobKey(namespace=plan.namespace, name=plan.job_name)
        keys = AttemptKeys(
            rpc=secrets.token_bytes(32),  # Spark's default secret length: 256 bits
            checkpoint=self._seal.job_key(str(key)),
            local_recovery=secrets.token_bytes(LOCAL_RECOVERY_KEY_BYTES),
        )
        objects = attempt_objects(plan, keys)
        self._ensure_once(self._identities_ensured, plan.namespace, objects.identity)
        if objects.drivers_budget is not None:
            self._ensure_once(self._budgets_ensured, plan.namespace, (objects.drivers_budget,))
        if objects.admission_probe is not None:
            probe = objects.admission_probe
            create = self._create(probe)
            _refused_as_rejected("executor Pod", probe, create, plan.namespace, probe, dry_run="All")
        if objects.local_state_volume is not None:
            self._ensure_local_state_volume(objects.local_state_volume)
        for body in objects.job_objects:
            # An existing one is not read (the operator needs no right to read Secrets): names have the uid.
            _ignore(409, self._create(body), plan.namespace, body)
        created: list[Manifest] = []
        try:
            for body in objects.attempt:
                _refused_as_rejected(body["kind"], body, self._create(body), plan.namespace, body)
                created.append(body)
        except (ObjectRejectedError, ObjectDeferredError):
            for body in reversed(created):
                _ignore(404, self._delete(body), body["metadata"]["name"], plan.namespace)
            raise

    def _ensure_once(self, ensured: set[str], namespace: str, bodies: Sequence[Manifest]) -> None:
        """Create what serves every job of a namespace, once per operator process; an existing one is kept
        (one deleted by hand is made again after the operator's restart)."""
        if namespace in ensured:
            return
        for body in bodies:
            _ignore(409, self._create(body), body["metadata"]["namespace"], body)
        ensured.add(namespace)

    def _ensure_local_state_volume(self, volume: Manifest) -> None:
        """Create the job's local-state volume if missing. One whose claim was deleted while the job lives
        (by hand: it goes with the job) is Released and binds no claim again until the old claim's uid is
        taken off its claimRef: then it binds the claim this attempt makes anew."""
        name = volume["metadata"]["name"]
        try:
            # One the API server calls invalid or an admission refuses is the spec's (InvalidSpec).
            create = self._core.create_persistent_volume
            if _refused_as_rejected("PersistentVolume", volume, create, volume):
                return  # new: nothing to free
        except ApiException as error:
            if error.status == 403:  # RBAC's: an admission's refusal came out as ObjectRejectedError
                raise MissingRightsError(LOCAL_STATE_VOLUMES_NOT_GRANTED) from error
            raise
        existing = self._core.read_persistent_volume(name)
        if existing.status is not None and existing.status.phase == "Released":
            log.info("local-state volume %s was released by a deleted claim; freeing it for the next", name)
            unbound = {"spec": {"claimRef": {"uid": None, "resourceVersion": None}}}
            without_answer(self._core.patch_persistent_volume, name, unbound)

    def local_state_volumes(self) -> list[tuple[JobKey, str]]:
        listed = self._core.list_persistent_volume(label_selector=LOCAL_STATE_VOLUME_SELECTOR).items
        volumes = []
        for volume in listed:
            labels = volume.metadata.labels or {}
            uid = volume.metadata.name.removeprefix(LOCAL_STATE_VOLUME_PREFIX)
            volumes.append((JobKey(namespace=labels[JOB_NAMESPACE_LABEL], name=labels[JOB_LABEL]), uid))
        return volumes

    def delete_local_state_volume(self, job_uid: str) -> None:
        _ignore(404, self._core.delete_persistent_volume, local_state_volume_name(job_uid))

    def _create(self, body: Manifest) -> Callable[..., Any]:
        return self._writers[body["kind"]][0]

    def _delete(self, body: Manifest) -> Callable[..., Any]:
        return self._writers[body["kind"]][1]

    def delete(self, key: JobKey, pod_name: str, *, force: bool = False) -> None:
        grace = 0 if force else None
        _ignore(404, self._core.delete_namespaced_pod, pod_name, key.namespace, grace_period_seconds=grace)
        _ignore(404, self._core.delete_namespaced_secret, attempt_secret_name(pod_name), key.namespace)
        _ignore(404, self._networking.delete_namespaced_network_policy, pod_name, key.namespace)

    def release_lease(self, key: JobKey, job_uid: str, holder: str) -> bool:
        lock = self._lease_lock(key, holder, job_owner_reference(key.name, job_uid))
        try:
            return release_for_ended_holder(lock, holder, datetime.datetime.now(datetime.UTC))
        except LockUnavailableError as error:
            log.warning(
                "%s: driver lease of %s not released (the next attempt waits it out): %s", key, holder, error
            )
            return False

    def lease(self, key: JobKey) -> DriverLease | None:
        try:
            found = self._lease_lock(key, "").get()
        except LockUnavailableError as error:
            log.warning("%s: driver lease not read: %s", key, error)
            return None
        if found is None:
            return None
        record, version = found
        return DriverLease(record.holder_identity, version, float(record.lease_duration_seconds))

    def _lease_lock(
        self, key: JobKey, identity: str, owner: Mapping[str, str] | None = None
    ) -> KubernetesLeaseLock:
        return KubernetesLeaseLock(
            self._api,
            namespace=key.namespace,
            name=driver_lease_name(key.name),
            identity=identity,
            request_timeout=LEASE_REQUEST_SECONDS,
            owner=owner,
        )

    def request_stop(self, key: JobKey, pod_name: str, term: int, savepoint_id: str = "") -> None:
        request = (
            ControlRequest("stop-savepoint", savepoint_id, term)
            if savepoint_id
            else ControlRequest("stop", datetime.datetime.now(datetime.UTC).isoformat(), term)
        )
        self._control(key, pod_name, request)

    def request_savepoint(self, key: JobKey, pod_name: str, term: int, savepoint_id: str) -> None:
        self._control(key, pod_name, ControlRequest("savepoint", savepoint_id, term))

    def promote(self, key: JobKey, pod_name: str, term: int, restore_batch_id: int | None) -> None:
        batch = "" if restore_batch_id is None else str(restore_batch_id)
        # null removes the label (a merge patch); the spec-hash label stays, for whoever reads the pod; the
        # serving label sends the UI Service to it.
        request = ControlRequest("promote", batch, term)
        self._control(key, pod_name, request, labels={STANDBY_LABEL: None, SERVING_LABEL: "true"})

    def _control(
        self,
        key: JobKey,
        pod_name: str,
        request: ControlRequest,
        labels: Mapping[str, str | None] | None = None,
    ) -> None:
        metadata: dict[str, Any] = {"annotations": {CONTROL_ANNOTATION: str(request)}}
        if labels:
            metadata["labels"] = dict(labels)
        _ignore(404, self._core.patch_namespaced_pod, pod_name, key.namespace, {"metadata": metadata})

    def count_executors(self, key: JobKey, uid: str, *, besides: frozenset[str] = frozenset()) -> int:
        return sum(not executor_ended(pod) for pod in self._executors(key, uid, besides))

    def delete_executors(
        self,
        key: JobKey,
        uid: str,
        *,
        besides: frozenset[str] = frozenset(),
        unheard: Callable[[str], bool] = lambda node: False,
    ) -> None:
        now = datetime.datetime.now(datetime.UTC)
        for pod in self._executors(key, uid, besides):
            # No kubelet will finish a graceful deletion on a lost node, nor on a silent one while it stays
            # so: the object is removed at once, as a lost node's driver pod is (its driver, fenced out, gives
            # it no work). deletionTimestamp is when a graceful deletion should have ended: past it, nobody is
            # finishing it either. An ended executor has nothing left to stop.
            deadline = pod["metadata"].get("deletionTimestamp")
            overdue = deadline is not None and datetime.datetime.fromisoformat(deadline) < now
            silent = unheard(str((pod.get("spec") or {}).get("nodeName") or ""))
            grace = 0 if overdue or silent or on_lost_node(pod) or executor_ended(pod) else None
            _ignore(
                404,
                self._core.delete_namespaced_pod,
                pod["metadata"]["name"],
                key.namespace,
                grace_period_seconds=grace,
            )

    def _executors(self, key: JobKey, uid: str, besides: frozenset[str]) -> list[dict[str, Any]]:
        """The job's executor pods as the API server serves them (raw JSON, as driver_pods reads a pod)."""
        selector = f"{JOB_LABEL}={key.name},{SPARK_ROLE_LABEL}=executor"
        response = self._core.list_namespaced_pod(
            key.namespace, label_selector=selector, _preload_content=False
        )
        pods: list[dict[str, Any]] = json.loads(response.data)["items"]
        prefix = job_app_prefix(uid)  # a job of the same name before it (another uid) is none of its concern
        apps = ((p, p["metadata"].get("labels", {}).get(SPARK_APP_SELECTOR_LABEL, "")) for p in pods)
        return [p for p, app in apps if app.startswith(prefix) and app not in besides]

    def executor_nodes(self, key: JobKey, spark_app_id: str) -> list[str]:
        selector = executor_selector(spark_app_id)
        pods = self._core.list_namespaced_pod(key.namespace, label_selector=selector).items
        return sorted({pod.spec.node_name for pod in pods if pod.spec.node_name})

    def delete_all(self, key: JobKey, uid: str) -> None:
        selector = f"{JOB_LABEL}={key.name}"
        # Only objects owned by this job (uid): a re-created job of the same name keeps its own. Executors
        # are owned by their driver pod and go with it.
        for pod in self._core.list_namespaced_pod(key.namespace, label_selector=selector).items:
            if _owned_by(pod, uid):
                _ignore(404, self._core.delete_namespaced_pod, pod.metadata.name, key.namespace)

    @staticmethod
    def _selector(key: JobKey) -> str:
        return f"{JOB_LABEL}={key.name},{ROLE_LABEL}=driver"


@dataclass
class _Recorded:
    name: str  # the Event's
    first: float  # when it was created (clock seconds)
    count: int


class KubeEvents:
    """core/v1 Events about a job, as `kubectl describe ftsj` shows them.

    Like client-go's EventCorrelator: an Event that repeats (same job, type, reason and message) within
    REPEAT_WINDOW seconds is one Event whose count and lastTimestamp grow, so a job whose every pass says the
    same leaves one object, not one per pass (`kubectl describe` shows "x<count> over <time>")."""

    REPEAT_WINDOW = 600.0
    REMEMBERED = 4096  # repeating Events tracked; the oldest is forgotten first

    def __init__(
        self,
        api: client.ApiClient,
        component: str = "ftspark-operator",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._core = client.CoreV1Api(api)
        self._component = component
        self._clock = clock
        self._recorded: OrderedDict[tuple[str, str, str, str], _Recorded] = OrderedDict()
        self._lock = threading.Lock()

    def emit(self, job: JobResource, type_: Literal["Normal", "Warning"], reason: str, message: str) -> None:
        message = message[:1024]
        fingerprint, now = (job.uid, type_, reason, message), self._clock()
        with self._lock:
            seen = self._recorded.get(fingerprint)
            if seen is not None and now - seen.first < self.REPEAT_WINDOW:
                seen.count += 1
                count, name = seen.count, seen.name
            else:
                name = f"{job.key.name}.{uuid.uuid4().hex[:16]}"
                self._recorded[fingerprint] = _Recorded(name, now, 1)
                self._recorded.move_to_end(fingerprint)
                while len(self._recorded) > self.REMEMBERED:
                    self._recorded.popitem(last=False)
                count = 0
        try:
            if count:
                patch = {"count": count, "lastTimestamp": datetime.datetime.now(datetime.UTC).isoformat()}
                without_answer(self._core.patch_namespaced_event, name, job.key.namespace, patch)
            else:
                self._create(job, name, type_, reason, message)
        except ApiException as error:
            # Best effort: an Event the API server refuses (a quota, a namespace being deleted) must not stop
            # the reconcile that acts on the job; the status says the same.
            log.warning("%s: Event %s not recorded (%s %s)", job.key, reason, error.status, error.reason)

    def _create(
        self, job: JobResource, name: str, type_: Literal["Normal", "Warning"], reason: str, message: str
    ) -> None:
        now = datetime.datetime.now(datetime.UTC)
        event = client.CoreV1Event(
            metadata=client.V1ObjectMeta(name=name, namespace=job.key.namespace),
            involved_object=client.V1ObjectReference(
                api_version=f"{API_GROUP}/{API_VERSION}",
                kind=job.kind,
                name=job.key.name,
                namespace=job.key.namespace,
                uid=job.uid,
            ),
            type=type_,
            reason=reason,
            message=message,
            first_timestamp=now,
            last_timestamp=now,
            count=1,
            source=client.V1EventSource(component=self._component),
            reporting_component=self._component,
        )
        without_answer(self._core.create_namespaced_event, job.key.namespace, event)
