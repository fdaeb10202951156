"""What a decision does: actions carried out in order by the reconciler's actuator, each with its final
parameters, and the Decision that holds them with the status to record."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from ftspark.domain.lifecycle.delays import WAIT
from ftspark.domain.models import JobStatus
from ftspark.protocol import RestoreFrom


@dataclass(frozen=True)
class DiscardPreviousJob:
    """Delete the HA records a deleted job of the same name left behind (deleted while no leader watched)."""


@dataclass(frozen=True)
class SubmitAttempt:
    """Write the job graph, fence older drivers out, then create the attempt's objects and driver pod."""

    attempt: int
    restore_from: RestoreFrom
    checkpoint_location: str
    restore_batch_id: int | None = None  # the newest verified checkpoint; later batches are rolled back
    local_state_nodes: tuple[str, ...] = ()  # localRecovery: where the previous executors kept state
    new_records: bool = False  # no HA record of the job was found (a new job): created without a read first


@dataclass(frozen=True)
class CreateStandby:
    """Create the next attempt's driver pod and objects as a hot standby (docs/hot-standby.md): no job graph
    and no fence, as it writes nothing until it is promoted. It restores the latest checkpoint then."""

    attempt: int
    checkpoint_location: str
    warm_executors: int  # executors it keeps up and warmed while it waits
    local_state_nodes: tuple[str, ...] = ()  # the running attempt's placement, known when it was made


@dataclass(frozen=True)
class PromoteStandby:
    """Like SubmitAttempt, write the job graph and fence older drivers out; then, in one patch, make the
    standby the job's driver and ask it to take over, restoring restore_batch_id (None: the latest)."""

    pod_name: str
    attempt: int
    checkpoint_location: str
    restore_batch_id: int | None = None


@dataclass(frozen=True)
class DeleteDriver:
    pod_name: str
    attempt: int
    reason: str
    # Remove the object at once. The pod's node is lost: no kubelet will ever finish a graceful deletion (the
    # old driver, if it still runs behind a partition, cannot renew its Lease and is fenced out). Or the
    # driver ended: nothing of it is left to stop, and a graceful deletion only waits for its kubelet's word.
    force: bool = False


@dataclass(frozen=True)
class KeepDriverLog:
    """Keep the end of an ended driver's log where `ftspark logs` reads it once the pod is gone, with those of
    the newest `kept` attempts (spec.failureHistory). Harmless when stale: an ended pod's log no longer
    changes."""

    pod_name: str
    attempt: int
    kept: int


@dataclass(frozen=True)
class ReleaseDriverLease:
    """Release the job's driver Lease if this ended driver still holds it (fence and go): the next attempt
    takes it at once instead of waiting out its 15 s. Harmless when stale: it changes nothing once another
    attempt holds the Lease."""

    pod_name: str
    attempt: int


@dataclass(frozen=True)
class DeleteLeftoverExecutors:
    """Delete the executor pods of the job's earlier attempts: the next attempt waits until none is left,
    so no executor of attempt N still writes state files into the checkpoint directory N+1 reuses. Those of
    the standbys' attempts stay: a standby keeps them warm for its promotion (Observation.leftover_executors
    does not count them)."""

    standby_attempts: tuple[int, ...] = ()


@dataclass(frozen=True)
class RequestStop:
    """Ask the driver runtime to stop at the next batch boundary, with a final checkpoint (and, with a
    savepoint_id, a savepoint of that batch: a savepoint-mode upgrade)."""

    pod_name: str
    attempt: int
    savepoint_id: str = ""


@dataclass(frozen=True)
class RequestSavepoint:
    """Ask the running driver for a savepoint at the next batch boundary; the queries keep running."""

    pod_name: str
    attempt: int
    savepoint_id: str


@dataclass(frozen=True)
class DeleteCheckpointDirectory:
    """Delete every object under prefix, a checkpoint directory of an earlier run of the job."""

    prefix: str


@dataclass(frozen=True)
class DisposeSavepoint:
    """Delete every object under prefix (<storage>/savepoints/<id>/), the manifest last: until the folder is
    empty, it still says whose savepoint it is."""

    savepoint_id: str
    prefix: str


@dataclass(frozen=True)
class RecordResult:
    """FLIP-194: a dirty result first, then clean up the job's resources, then mark the result clean."""

    state: Literal["Succeeded", "Failed"]
    message: str
    finished_at: datetime
    retain_seconds: int  # resultStore.ttlSeconds
    data: tuple[str, ...]  # deleted with the result (job_data)


@dataclass(frozen=True)
class DeleteFinishedJob:
    """Delete the job resource (spec.ttlSecondsAfterFinished passed), as read: not if it changed since, so a
    stale decision (an edited spec, another uid of the name) deletes nothing. Its status is not written."""


@dataclass(frozen=True)
class EmitEvent:
    type: Literal["Normal", "Warning"]
    reason: str
    message: str


Action = (
    DiscardPreviousJob
    | SubmitAttempt
    | CreateStandby
    | PromoteStandby
    | ReleaseDriverLease
    | KeepDriverLog
    | DeleteDriver
    | DeleteLeftoverExecutors
    | RequestStop
    | RequestSavepoint
    | DisposeSavepoint
    | DeleteCheckpointDirectory
    | RecordResult
    | DeleteFinishedJob
    | EmitEvent
)


@dataclass(frozen=True)
class Decision:
    status: JobStatus
    actions: tuple[Action, ...] = ()
    requeue_after: float | None = None

    @property
    def deletes_the_job(self) -> bool:
        return any(isinstance(action, DeleteFinishedJob) for action in self.actions)

    @property
    def waiting(self) -> bool:
        """Only waiting (a pod to go, a stop to end): looking again sooner than the watches tell would do."""
        return self.requeue_after == WAIT
