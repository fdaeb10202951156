"""What the reconciler needs from the cluster, apart from the HA stores: the job resources, driver pods,
and Events.

Implementations: adapters.k8s.cluster (tests/integration/test_operator.py runs the operator on it against a
real API server) and the test double ftspark.testing.cluster (tests/unit/test_reconciler.py drives the
Reconciler on it); a new one keeps the promises of the docstrings below (reads never from a cache, creates
idempotent) and passes the suite of the one it stands in for.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol

from ftspark import KIND
from ftspark.domain.ha import JobKey
from ftspark.domain.lifecycle import DriverObservation
from ftspark.manifests import AttemptPlan


@dataclass(frozen=True)
class JobResource:
    """A FaultTolerantSparkJob as read from the API server (never from a cache: stale reads restart jobs)."""

    key: JobKey
    uid: str
    generation: int
    spec: dict[str, Any]
    status: dict[str, Any]
    resource_version: str = ""  # what it was read at: a status write is refused if it changed since
    kind: str = KIND  # or SCHEDULE_KIND: a ScheduledSparkJob, read the same way
    created: datetime | None = None  # its creationTimestamp, where a decision needs it


@dataclass(frozen=True)
class DriverLease:
    """A job's driver Lease as read: its holder (`<pod>@<attempt>`, "" when free), its version (each renewal
    makes a new one) and how long its holder said a renewal holds (leaseDurationSeconds)."""

    holder: str
    version: str
    duration: float


class StaleReadError(Exception):
    """The job changed since it was read: whatever was decided on that read is not written (the next
    reconcile reads it again)."""


@dataclass(frozen=True)
class NamespaceMetadata:
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)


class ObjectRejectedError(Exception):
    """The API server refused an object built from the job's spec (e.g. a podTemplate it finds invalid):
    retrying cannot help, the spec has to change. Nothing of the attempt was created."""


class ObjectDeferredError(Exception):
    """The API server refused an object for now: a ResourceQuota of the namespace has no room for it. The same
    object may pass once room is made; nothing of the attempt was created."""


class Jobs(Protocol):
    def get(self, key: JobKey) -> JobResource | None: ...

    def write_status(self, job: JobResource, status: dict[str, Any]) -> str:
        """Replace the status subresource (the operator is its only writer); StaleReadError if the job
        changed since `job` was read. Returns the resourceVersion the write gave the job."""

    def delete_unchanged(self, job: JobResource) -> None:
        """Delete the job as it was read: nothing happens if it changed since (another resourceVersion, or
        another uid under its name) or is gone already."""

    def namespace_metadata(self, namespace: str) -> NamespaceMetadata:
        """A jobs' namespace's labels and annotations: an admin grants allowances of the job policy there
        (labels) and the storage its jobs may use (domain.policy.STORAGE_PREFIXES_ANNOTATION)."""


class Drivers(Protocol):
    def observe(self, key: JobKey) -> list[DriverObservation]:
        """Every driver pod of the job, read from the API server."""

    def create(self, plan: AttemptPlan) -> None:
        """Create the attempt's objects (ftspark.manifests: its Secret with the RPC and checkpoint keys and
        the executor template, its NetworkPolicy and Pod), and the driver's ServiceAccount and Role if
        missing; with localRecovery first a dry run of an executor pod (the namespace's Pod Security level
        must admit its init step), then the job's local-state volume, its claim and its key Secret if
        missing.

        Objects that already exist are left as they are. ObjectRejectedError if the API server refuses one
        of them; then none of the attempt's was created."""

    def local_state_volumes(self) -> list[tuple[JobKey, str]]:
        """localRecovery's PersistentVolumes (cluster-scoped: the job does not own them), by job and uid."""

    def delete_local_state_volume(self, job_uid: str) -> None:
        """Delete the job's local-state volume; the node directories it names stay, for the sweeper."""

    def delete(self, key: JobKey, pod_name: str, *, force: bool = False) -> None:
        """Delete the attempt's objects. force: remove the pod now (grace 0), for a pod whose node will never
        confirm the deletion."""

    def release_lease(self, key: JobKey, job_uid: str, holder: str) -> bool:
        """Release the job's driver Lease if holder (an ended driver) still holds it, by a compare-and-swap
        on the version read; True if it did. Failing to is never an error: the next attempt then waits the
        Lease out, as it would without this. The Lease keeps naming the job (job_uid) as its owner."""

    def lease(self, key: JobKey) -> DriverLease | None:
        """The job's driver Lease; None when there is none, or it cannot be read now."""

    def request_stop(self, key: JobKey, pod_name: str, term: int, savepoint_id: str = "") -> None:
        """Ask the driver runtime for a stop with a final checkpoint (and a savepoint of it, given an id).
        term: the asking leader's; the driver refuses a request of a term below the operator's term floor."""

    def request_savepoint(self, key: JobKey, pod_name: str, term: int, savepoint_id: str) -> None:
        """Ask the driver runtime for a savepoint; it answers on its pod (DriverObservation.savepoint)."""

    def promote(self, key: JobKey, pod_name: str, term: int, restore_batch_id: int | None) -> None:
        """Make a standby the job's driver and ask it to take over, restoring that batch (None: the latest),
        in one write of its pod: it is never the driver without having been asked, nor asked without being
        the driver."""

    def count_executors(self, key: JobKey, uid: str, *, besides: frozenset[str] = frozenset()) -> int:
        """Executor pods of any attempt of the job with that uid that may still run something: terminating
        ones included, ended ones (their kubelet says nothing of them runs) not, nor those of the Spark
        applications `besides` (a standby's, which it keeps warm)."""

    def delete_executors(
        self,
        key: JobKey,
        uid: str,
        *,
        besides: frozenset[str] = frozenset(),
        unheard: Callable[[str], bool] = lambda node: False,
    ) -> None:
        """Delete them, ended ones too; one that ended, is on a lost node or one `unheard` (a silent node:
        no kubelet there may finish a graceful deletion), or whose graceful deletion is overdue (its node is
        gone) is removed at once."""

    def executor_nodes(self, key: JobKey, spark_app_id: str) -> list[str]:
        """Nodes that run executors of the Spark application (sorted, distinct)."""

    def delete_all(self, key: JobKey, uid: str) -> None:
        """Remove every pod and service of the job with that uid (cleanup after a final result)."""


class Nodes(Protocol):
    def draining(self, node: str) -> bool:
        """Whether the node is cordoned or marked for removal (a drain's first step: its pods are to be
        evicted), as the installation's node watch last saw it; False for a node it does not know."""

    def silent(self, node: str) -> bool:
        """Whether the node's kubelet stopped renewing its Lease in kube-node-lease a while ago (the node may
        be dead; the node controller has not said so yet), as the node-Lease watch last saw it; False for a
        node it does not know."""

    def late(self, node: str) -> bool:
        """Whether the node's Lease is a renewal overdue (silent ones included): the Leases of the drivers
        there are looked at from then on."""

    def lease_unchanged_for(self, job: JobKey, version: str, duration: float) -> float:
        """Seconds this process has seen the job's driver Lease at this version, by its own clock from its
        first sight of it (0 then: the Lease's own times are another host's clock). The job is woken once
        that reaches duration, while its driver's node stays late."""


class DriverLogNotKeptError(Exception):
    """The job's log ConfigMap could not be written (another object of its name, a quota, a refusal): the
    driver's log is not kept, the deletion goes on."""


class DriverLogs(Protocol):
    def keep(self, job: JobResource, pod_name: str, attempt: int, kept: int) -> None:
        """Keep the end of the ended driver pod's log (bounded) in the job's ConfigMap
        (protocol.driver_logs_name), with those of the newest `kept` attempts only; an attempt kept already
        is left as it is. A log the kubelet cannot give is kept as a line that says why.
        DriverLogNotKeptError if the ConfigMap is not the job's or the API server refuses the write."""


class Events(Protocol):
    def emit(
        self, job: JobResource, type_: Literal["Normal", "Warning"], reason: str, message: str
    ) -> None: ...
