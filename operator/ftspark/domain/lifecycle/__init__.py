"""The job lifecycle: one pure function decides, from what was observed, what to do next.

observe → decide → act → record: the reconciler gathers an Observation (everything a decision needs, read
first), `decide` returns a Decision (actions to carry out, in order, each with its final parameters, and the
status to record), and the reconciler only carries it out. Actions are idempotent, so a crash between acting
and recording is repaired by the next reconcile. The decisions taken after acting are `rejected` (the API
server refused an object built from the spec), `deferred` (it refused one for now: a quota) and
`reconcile_failed` (the operator keeps failing to act: the job says so, `reconciled` takes it back).

The package: `observation` (what a decision is taken from), `actions` (what it does, and the Decision),
`delays` (when it looks again, named), `draft` (the decision being made), `rules` (`decide`: the router by
desired state and phase), `submission` (an attempt's start, and every decision's end), and a module per
concern over the draft: `standby`, `savepointing`, `upgrade_rollback`, `retention`, `stopping`, `attempts`.

State diagram (phase → phase, on what):

    Pending ──submit──▶ Submitting ──driver running──▶ Running ──driver exit 0──▶ Succeeded
                            ▲   │                        │  ▲
                            │   └──driver failed/lost────┤  └──(upgrade: Upgrading ──▶ Submitting)
                            │                            ▼
                            └──delay elapsed── Restarting ──strategy exhausted──▶ Failed
    Running ──desiredState=stopped/suspended──▶ Stopping ──final checkpoint, exit 0──▶ Stopped / Suspended
    Running ──desiredState=cancelled──▶ Cancelling ──driver gone──▶ Cancelled
    Stopped / Suspended / Cancelled ──desiredState=running──▶ Submitting (resume from the latest checkpoint)
    Running ──driver's node cordoned──▶ Relocating ──final checkpoint, driver gone──▶ Submitting (the
        standby promoted, or a pod on another node; no failure counted)
"""

from ftspark.domain.lifecycle.actions import (
    Action,
    CreateStandby,
    Decision,
    DeleteCheckpointDirectory,
    DeleteDriver,
    DeleteFinishedJob,
    DeleteLeftoverExecutors,
    DiscardPreviousJob,
    DisposeSavepoint,
    EmitEvent,
    KeepDriverLog,
    PromoteStandby,
    RecordResult,
    ReleaseDriverLease,
    RequestSavepoint,
    RequestStop,
    SubmitAttempt,
)
from ftspark.domain.lifecycle.attempts import job_data
from ftspark.domain.lifecycle.delays import QUOTA_RETRY
from ftspark.domain.lifecycle.observation import (
    DriverObservation,
    DriverPhase,
    Observation,
    RefusedPromotion,
    SavepointReport,
    SubmittedGraph,
)
from ftspark.domain.lifecycle.rules import (
    DRIVER_UNSCHEDULABLE,
    DRIVER_VOLUME_NOT_BOUND,
    NODE_LOST,
    OPERATOR_ERROR,
    decide,
    deferred,
    invalid_spec,
    reconcile_failed,
    reconciled,
    rejected,
    spec_hash,
    upgrade_savepoint_id,
)
from ftspark.domain.lifecycle.standby import made_for as standby_made_for
from ftspark.domain.lifecycle.stopping import stop_savepoint_id

__all__ = [
    "DRIVER_UNSCHEDULABLE",
    "DRIVER_VOLUME_NOT_BOUND",
    "NODE_LOST",
    "OPERATOR_ERROR",
    "QUOTA_RETRY",
    "Action",
    "CreateStandby",
    "Decision",
    "DeleteCheckpointDirectory",
    "DeleteDriver",
    "DeleteFinishedJob",
    "DeleteLeftoverExecutors",
    "DiscardPreviousJob",
    "DisposeSavepoint",
    "DriverObservation",
    "DriverPhase",
    "EmitEvent",
    "KeepDriverLog",
    "Observation",
    "PromoteStandby",
    "RecordResult",
    "RefusedPromotion",
    "ReleaseDriverLease",
    "RequestSavepoint",
    "RequestStop",
    "SavepointReport",
    "SubmitAttempt",
    "SubmittedGraph",
    "decide",
    "deferred",
    "invalid_spec",
    "job_data",
    "reconcile_failed",
    "reconciled",
    "rejected",
    "spec_hash",
    "standby_made_for",
    "stop_savepoint_id",
    "upgrade_savepoint_id",
]
