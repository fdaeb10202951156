"""The cluster port (ports.cluster) in memory, for fast unit tests of the reconciler: job resources, driver
pods as the observations a real pod would give, and Events, with what each call did kept for assertions.

A test plays the kubelet and the user: `set_driver` moves a driver pod to a new state, `refuse` makes the
"API server" refuse the next object of a kind. Not thread-safe: one reconcile at a time."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from ftspark.domain.ha import JobKey
from ftspark.domain.lifecycle import DriverObservation, DriverPhase
from ftspark.manifests import AttemptPlan
from ftspark.ports.cluster import (
    DriverLease,
    DriverLogNotKeptError,
    JobResource,
    NamespaceMetadata,
    ObjectRejectedError,
    StaleReadError,
)
from ftspark.protocol import driver_pod_name, job_app_prefix


@dataclass
class MemoryNodes:
    """The nodes being drained, those fallen silent, and how long each job's driver Lease has been seen
    unchanged, as a test sets them."""

    drained: set[str] = field(default_factory=set)
    silenced: set[str] = field(default_factory=set)
    lease_ages: dict[JobKey, float] = field(default_factory=dict)

    def draining(self, node: str) -> bool:
        return node in self.drained

    def silent(self, node: str) -> bool:
        return node in self.silenced

    def late(self, node: str) -> bool:
        return node in self.silenced

    def lease_unchanged_for(self, job: JobKey, version: str, duration: float) -> float:
        return self.lease_ages.get(job, 0.0)


class MemoryJobs:
    def __init__(self) -> None:
        self.resources: dict[JobKey, JobResource] = {}
        self.status_writes = 0
        self._versions = 0
        self.namespaces: dict[str, NamespaceMetadata] = {}
        self.namespace_reads = 0

    def apply(self, key: JobKey, spec: dict[str, Any], *, uid: str = "uid-1") -> JobResource:
        """Create the job, or change its spec (a new generation), as kubectl apply would."""
        current = self.resources.get(key)
        version = self._next_version()
        if current is None or current.uid != uid:
            job = JobResource(key, uid, 1, spec, {}, version)
        else:
            job = replace(current, spec=spec, generation=current.generation + 1, resource_version=version)
        self.resources[key] = job
        return job

    def delete(self, key: JobKey) -> None:
        self.resources.pop(key, None)

    def get(self, key: JobKey) -> JobResource | None:
        return self.resources.get(key)

    def delete_unchanged(self, job: JobResource) -> None:
        current = self.resources.get(job.key)
        if current is not None and (current.uid, current.resource_version) == (job.uid, job.resource_version):
            del self.resources[job.key]

    def namespace_metadata(self, namespace: str) -> NamespaceMetadata:
        self.namespace_reads += 1
        return self.namespaces.get(namespace, NamespaceMetadata())

    def write_status(self, job: JobResource, status: dict[str, Any]) -> str:
        current = self.resources.get(job.key)
        if current is None or current.resource_version != job.resource_version:
            raise StaleReadError(f"{job.key} changed since it was read")
        self.status_writes += 1
        version = self._next_version()
        self.resources[job.key] = replace(current, status=status, resource_version=version)
        return version

    def _next_version(self) -> str:
        self._versions += 1
        return str(self._versions)


@dataclass
class MemoryDrivers:
    pods: dict[JobKey, dict[str, DriverObservation]] = field(default_factory=dict)
    plans: list[AttemptPlan] = field(default_factory=list)  # every attempt created, in order
    deleted: list[tuple[str, bool]] = field(default_factory=list)  # (pod, force)
    controls: list[tuple[str, str]] = field(default_factory=list)  # (pod, "stop" | savepoint id)
    control_terms: list[int] = field(default_factory=list)  # the operator term of each control request
    executors: dict[str, list[str]] = field(default_factory=dict)  # spark app id → nodes
    # Executor pods by Spark application id; a deletion is only asked for (the test says when they are gone).
    executor_pods: dict[str, int] = field(default_factory=dict)
    executor_deletions: list[tuple[str, frozenset[str]]] = field(default_factory=list)  # (uid, besides)
    driver_listings: int = 0  # observe calls
    executor_listings: int = 0  # count_executors calls
    refusals: list[str] = field(default_factory=list)  # kinds to refuse, one each
    lease_holders: dict[JobKey, str] = field(default_factory=dict)  # each job's driver Lease ("": free)
    local_state: dict[str, JobKey] = field(default_factory=dict)  # localRecovery's volumes: job uid → job

    def refuse(self, kind: Literal["Secret", "NetworkPolicy", "Pod"]) -> None:
        self.refusals.append(kind)

    def set_driver(self, key: JobKey, attempt: int, phase: DriverPhase, **fields: Any) -> None:
        name = driver_pod_name(key.name, attempt)
        self.pods.setdefault(key, {})[name] = DriverObservation(attempt, name, phase, **fields)

    def observe(self, key: JobKey) -> list[DriverObservation]:
        self.driver_listings += 1
        return sorted(self.pods.get(key, {}).values(), key=lambda d: d.attempt)

    def create(self, plan: AttemptPlan) -> None:
        if self.refusals:
            kind = self.refusals.pop(0)
            raise ObjectRejectedError(f"the API server refused the driver's {kind}: invalid")
        key = JobKey(namespace=plan.namespace, name=plan.job_name)
        name = driver_pod_name(plan.job_name, plan.attempt)
        self.pods.setdefault(key, {}).setdefault(
            name,
            DriverObservation(
                plan.attempt, name, DriverPhase.PENDING, standby=plan.standby, spec_hash=plan.spec_hash
            ),
        )
        self.plans.append(plan)
        if plan.spec.local_recovery.enabled:
            self.local_state[plan.job_uid] = key

    def local_state_volumes(self) -> list[tuple[JobKey, str]]:
        return [(key, uid) for uid, key in self.local_state.items()]

    def delete_local_state_volume(self, job_uid: str) -> None:
        self.local_state.pop(job_uid, None)

    def delete(self, key: JobKey, pod_name: str, *, force: bool = False) -> None:
        self.deleted.append((pod_name, force))
        self.pods.get(key, {}).pop(pod_name, None)

    def release_lease(self, key: JobKey, job_uid: str, holder: str) -> bool:
        if self.lease_holders.get(key) != holder:
            return False
        self.lease_holders[key] = ""
        return True

    def lease(self, key: JobKey) -> DriverLease | None:
        holder = self.lease_holders.get(key)
        return None if holder is None else DriverLease(holder, "1", 15.0)

    def request_stop(self, key: JobKey, pod_name: str, term: int, savepoint_id: str = "") -> None:
        self.controls.append((pod_name, savepoint_id or "stop"))
        self.control_terms.append(term)

    def request_savepoint(self, key: JobKey, pod_name: str, term: int, savepoint_id: str) -> None:
        self.controls.append((pod_name, savepoint_id))
        self.control_terms.append(term)

    def promote(self, key: JobKey, pod_name: str, term: int, restore_batch_id: int | None) -> None:
        self.controls.append((pod_name, f"promote@{'' if restore_batch_id is None else restore_batch_id}"))
        self.control_terms.append(term)
        pods = self.pods.get(key, {})
        if pod_name in pods:
            pods[pod_name] = replace(pods[pod_name], standby=False)

    def count_executors(self, key: JobKey, uid: str, *, besides: frozenset[str] = frozenset()) -> int:
        self.executor_listings += 1
        prefix = job_app_prefix(uid)
        return sum(
            n for app, n in self.executor_pods.items() if app.startswith(prefix) and app not in besides
        )

    def delete_executors(
        self,
        key: JobKey,
        uid: str,
        *,
        besides: frozenset[str] = frozenset(),
        unheard: Callable[[str], bool] = lambda node: False,
    ) -> None:
        self.executor_deletions.append((uid, besides))

    def executor_nodes(self, key: JobKey, spark_app_id: str) -> list[str]:
        return sorted(set(self.executors.get(spark_app_id, [])))

    def delete_all(self, key: JobKey, uid: str) -> None:
        self.pods.pop(key, None)


@dataclass
class MemoryDriverLogs:
    """Which ended driver pods' logs are kept, by job and attempt (the text is the kubelet's: not here)."""

    kept: dict[JobKey, dict[int, str]] = field(default_factory=dict)  # attempt → pod
    refusal: str = ""  # the next keep fails with this message, as when the ConfigMap is not the job's

    def keep(self, job: JobResource, pod_name: str, attempt: int, kept: int) -> None:
        if self.refusal:
            message, self.refusal = self.refusal, ""
            raise DriverLogNotKeptError(message)
        logs = self.kept.setdefault(job.key, {})
        logs.setdefault(attempt, pod_name)
        for old in sorted(logs)[:-kept]:
            del logs[old]


@dataclass(frozen=True)
class EmittedEvent:
    job: JobKey
    type: Literal["Normal", "Warning"]
    reason: str
    message: str


@dataclass
class MemoryEvents:
    emitted: list[EmittedEvent] = field(default_factory=list)

    def emit(self, job: JobResource, type_: Literal["Normal", "Warning"], reason: str, message: str) -> None:
        self.emitted.append(EmittedEvent(job.key, type_, reason, message))

    def reasons(self) -> list[str]:
        return [event.reason for event in self.emitted]
