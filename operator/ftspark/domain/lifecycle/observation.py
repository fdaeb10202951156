"""What a decision is taken from: the job's driver pods, its submitted graph, its stores' records, as read."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from ftspark.domain.ha import CheckpointPointer, JobResultEntry
from ftspark.domain.recovery import RestorePoint
from ftspark.domain.savepoints import SavepointData


class DriverPhase(StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    TERMINATING = "Terminating"


@dataclass(frozen=True)
class SavepointReport:
    """The driver runtime's answer to a savepoint request (annotation ftspark.io/savepoint on its pod)."""

    id: str
    location: str = ""
    batch_id: int = 0
    error: str = ""


@dataclass(frozen=True)
class RefusedPromotion:
    restore_batch_id: int | None  # the batch the promotion named, None for the latest


@dataclass(frozen=True)
class DriverObservation:
    attempt: int
    pod_name: str
    phase: DriverPhase
    exit_code: int | None = None
    reason: str = ""
    message: str = ""
    started_at: datetime | None = None
    ended_at: datetime | None = None  # its container ended, on its kubelet's word
    savepoint: SavepointReport | None = None
    rollbacks: tuple[str, ...] = ()  # the driver gave up committed batches of a damaged checkpoint
    # Its node stopped reporting: no kubelet will finish a graceful deletion, so the pod is deleted by force.
    node_lost: bool = False
    node: str = ""  # where it was scheduled ("" before that)
    # Its node is cordoned or marked for removal (a drain's first step): the pod will be evicted.
    node_draining: bool = False
    # Its node stopped renewing its Lease (kube-node-lease): perhaps dead; the node controller has not said.
    node_silent: bool = False
    # It refused the control request on its pod: written with a term below the operator's term floor (by a
    # leader deposed since). The current leader asks again, with its own term.
    request_refused: bool = False
    # Nothing of the driver runs any more, on its kubelet's word (ftspark.reconcile.driver_pods says when that
    # word is enough): its driver Lease can be released for it, and the next attempt need not wait it out.
    ended: bool = False
    # A hot standby for the next attempt (docs/hot-standby.md), not the job's driver until it is promoted;
    # made for the spec of this hash, Ready once its SparkSession is up.
    standby: bool = False
    spec_hash: str = ""
    ready: bool = False
    # It refused its promotion (written by a leader deposed since): it stands by until asked again, with this
    # leader's term.
    refused_promotion: RefusedPromotion | None = None


@dataclass(frozen=True)
class SubmittedGraph:
    """The job graph persisted before the latest attempt's pod: what was launched, and where its state is."""

    uid: str  # of the job that submitted it: another uid is a deleted job's of the same name
    spec_hash: str
    checkpoint_location: str


@dataclass(frozen=True, kw_only=True)
class Observation:
    job_uid: str
    generation: int
    spec_hash: str
    graph: SubmittedGraph | None = None
    drivers: tuple[DriverObservation, ...] = ()
    result: JobResultEntry | None = None
    executor_nodes: tuple[str, ...] = ()  # nodes running the current attempt's executors
    latest_checkpoint: CheckpointPointer | None = None  # the newest pointer in the checkpoint store
    # The oldest pointer kept of the newest one's attempt: its first batch, unless pointers were dropped since
    # (the operator looks once a pointer is written, so later batches' are seldom more than one or two).
    first_of_attempt: CheckpointPointer | None = None
    # Read only when no driver pod exists, the only time an attempt can be submitted (it inspects S3).
    # None: not read.
    restore_point: RestorePoint | None = None
    # Executor pods of the job's earlier attempts still there (they go with their driver pod, but only when
    # the garbage collector gets to them). Read with restore_point: when an attempt can be submitted.
    leftover_executors: int = 0
    # What storage holds of each savepoint in status.savepointsDisposing whose folder is the job's; an id left
    # out was not read (storage unreachable).
    disposing: Mapping[str, SavepointData] = field(default_factory=dict)
    # Whether storage still holds anything in each of status.retiredCheckpointDirectories that is the job's;
    # one left out was not read.
    retired_present: Mapping[str, bool] = field(default_factory=dict)
    ui_url: str | None = None  # where spec.ui's UI is served (status.uiUrl)

    @property
    def own_graph(self) -> SubmittedGraph | None:
        return self.graph if self.graph is not None and self.graph.uid == self.job_uid else None
