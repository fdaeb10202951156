"""What each reason ftspark shows means and what to do about it, written once: `ftspark status` prints the
remedy of the reason that applies now, and docs/troubleshooting.md is generated from this table (`make docs`).

A reason shows in one of three places: the Degraded condition (the job is not failing yet, or an attempt
failed and is restarted), the Ready condition (the job cannot go on until something changes), and
status.lastFailure / status.failures (why an attempt ended; also Degraded's reason while it restarts).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ftspark.domain.lifecycle import (
    DRIVER_UNSCHEDULABLE,
    DRIVER_VOLUME_NOT_BOUND,
    NODE_LOST,
    OPERATOR_ERROR,
)
from ftspark.domain.lifecycle.rules import STATE_TOO_OLD
from ftspark.domain.lifecycle.submission import QUOTA_EXCEEDED
from ftspark.protocol import (
    EXECUTORS_NOT_STARTED,
    NO_PROGRESS,
    NO_RESTORABLE_CHECKPOINT,
    STOP_TIMED_OUT,
)

Where = Literal["Reconciled=False", "Degraded (waiting)", "Ready=False", "lastFailure"]


@dataclass(frozen=True)
class Remedy:
    where: Where
    meaning: str
    fix: str


REMEDIES: dict[str, Remedy] = {
    # The operator cannot act on the job: nothing of the job is wrong, yet.
    OPERATOR_ERROR: Remedy(
        "Reconciled=False",
        "the operator keeps failing to act on the job; the message is the cause: most often the operator's "
        "own S3 (its endpoint or credentials, when it looks at a checkpoint before a restart) or a right the "
        "API server refuses it",
        "fix what the message names in the operator's installation (the chart's s3 values, its RBAC); the "
        "operator's log has the details; the condition goes at the next reconcile that works",
    ),
    # The driver waits: no failure yet, nothing is restarted.
    DRIVER_UNSCHEDULABLE: Remedy(
        "Degraded (waiting)",
        "no node can run the driver pod; the message is the scheduler's (Insufficient cpu or memory, a node "
        "selector or affinity no node matches, taints)",
        "lower spec.driver.cores / memory (or its CPU request, spark.kubernetes.driver.request.cores), or "
        "add nodes; check the podTemplate's nodeSelector and tolerations",
    ),
    DRIVER_VOLUME_NOT_BOUND: Remedy(
        "Degraded (waiting)",
        "a PersistentVolumeClaim the driver pod mounts is missing or not bound",
        "create the claim in the job's namespace; `kubectl describe pvc` says why it is not bound (its "
        "StorageClass, no matching PersistentVolume)",
    ),
    "ImagePullBackOff": Remedy(
        "Degraded (waiting)",
        "the kubelet cannot pull spec.image (a typo, a private registry, a registry it cannot reach)",
        "check spec.image; for a private registry its pull Secret in spec.imagePullSecrets; on kind, "
        "`kind load docker-image` the image",
    ),
    "ErrImagePull": Remedy(
        "Degraded (waiting)",
        "the kubelet's last pull of spec.image failed; it retries as ImagePullBackOff",
        "as for ImagePullBackOff",
    ),
    "InvalidImageName": Remedy(
        "Degraded (waiting)", "spec.image is no image reference", "write it as registry/name:tag"
    ),
    "CreateContainerConfigError": Remedy(
        "Degraded (waiting)",
        "a Secret or ConfigMap (or a key of one) the pod names in env or volumes does not exist",
        "create it in the job's namespace (e.g. the S3 credentials Secret of spec.env[].secretKeyRef)",
    ),
    QUOTA_EXCEEDED: Remedy(
        "Ready=False",
        "a ResourceQuota of the namespace has no room for the driver pod; the attempt is tried again every "
        "10 s and counts as no failure",
        "free room in the quota, raise it, or ask for less (spec.driver.cores / memory)",
    ),
    # The spec or the stored state stops the job until something changes.
    "InvalidSpec": Remedy(
        "Ready=False",
        "the spec cannot be run: the message names the field (or the API server refused an object made from "
        "it, in its own words); no pod was made",
        "correct the named field; the job starts once the spec is valid",
    ),
    "ManualRestoreRequired": Remedy(
        "Ready=False",
        "no retained checkpoint of the job is complete (storage lost or damaged): another attempt would find "
        "the same, so none is made",
        "restore by hand: set spec.initialSavepoint to a savepoint, or accept a fresh start with a stateless "
        "upgrade; the next spec change starts the job again",
    ),
    STATE_TOO_OLD: Remedy(
        "Ready=False",
        "a resume was refused: the latest checkpoint is older than spec.checkpoint.maxResumeAgeSeconds (its "
        "source may no longer have the data)",
        "raise maxResumeAgeSeconds if the source still has the data, else start fresh (a stateless upgrade)",
    ),
    "RestartsExhausted": Remedy(
        "Ready=False",
        "the restart strategy allows no more attempts; status.failures lists why the last ones ended",
        "fix the cause of the failures below it; any spec change starts the job again",
    ),
    "UpgradeFailed": Remedy(
        "Ready=False",
        "a spec change failed within upgradeRollback.windowSeconds: the job runs lastStableSpec again",
        "correct the change (status.upgradeRollback says why it failed) and apply it again",
    ),
    "UpgradeNotRunning": Remedy(
        "Ready=False",
        "a spec change did not reach Running within upgradeRollback.windowSeconds: rolled back",
        "as for UpgradeFailed; the message says what its driver waited for",
    ),
    # Why an attempt ended: the restart strategy decides what next.
    "ScriptFailed": Remedy(
        "lastFailure",
        "the application raised or exited non-zero; the message is the exception's type and first line and, "
        "for a failed query, its root cause (the executor's Python error, else Java's deepest Caused by)",
        "fix the application; `ftspark logs <job> --attempt <n>` shows the driver's log, its pod gone or not",
    ),
    NO_PROGRESS: Remedy(
        "lastFailure",
        "a query showed no sign of life for spec.liveness.progressTimeoutSeconds: the driver was hung and "
        "was killed",
        "if batches are legitimately longer, raise the timeout; else the driver's log and a thread dump",
    ),
    EXECUTORS_NOT_STARTED: Remedy(
        "lastFailure",
        "the progress timeout passed with no executor running; the message says what the executor pods "
        "wait for (no node fits them, their image, a missing Secret) or that Spark made none",
        "as for the driver's own waiting reasons, for spec.executor (cores, memory, instances, its "
        "podTemplate); `kubectl get events` in the namespace",
    ),
    NO_RESTORABLE_CHECKPOINT: Remedy(
        "lastFailure",
        "the driver found no complete batch in any retained checkpoint (then Ready=False "
        "ManualRestoreRequired)",
        "as for ManualRestoreRequired",
    ),
    "ApplicationFile": Remedy(
        "lastFailure",
        "an application file on S3 (mainApplicationFile, pyFiles, spec.deps) is missing, unreadable, empty, "
        "larger than spec.deps.maxFileMiB, or not a file of its kind (a virtualenv archive for another "
        "Python, or with pyspark in it)",
        "upload it where the spec says, with the job's S3 settings able to read it (docs/dependencies.md)",
    ),
    "MainFileMissing": Remedy(
        "lastFailure", "mainApplicationFile names no file in the image", "fix the path, or the image"
    ),
    "StorageUnavailable": Remedy(
        "lastFailure",
        "the checkpoint storage (spec.checkpoint.storage) cannot be reached or read with the job's S3 "
        "settings: the message says which (endpoint, credentials, bucket)",
        "check the bucket, the endpoint in sparkConf spark.hadoop.fs.s3a.endpoint and the credentials",
    ),
    "Storage": Remedy(
        "lastFailure",
        "an S3 error while the job ran (checkpoint or savepoint files)",
        "as for StorageUnavailable",
    ),
    "Savepoint": Remedy(
        "lastFailure",
        "spec.initialSavepoint cannot be restored (missing, not a savepoint, or of another query)",
        "point it at a savepoint of this job's queries: status.savepoints of the job that took it",
    ),
    "BadConfig": Remedy(
        "lastFailure",
        "the driver's environment does not describe a runnable driver (a pod template that overrides it)",
        "remove FTSPARK_* variables from the pod templates",
    ),
    "RuntimeMismatch": Remedy(
        "lastFailure",
        "the job's image carries an ftspark driver runtime of another release than the operator's (another "
        "protocol version)",
        "build the image with the operator's release of ftspark, or set spec.image to the operator's Spark "
        "image",
    ),
    "ImageIncomplete": Remedy(
        "lastFailure",
        "the job's image lacks what its spec asks for: spec.localRecovery needs ftspark's local-recovery jar",
        "add the jar to your image (docs/own-image.md), turn spec.localRecovery off, or set spec.image to "
        "the operator's Spark image",
    ),
    "SparkNotStarted": Remedy(
        "lastFailure",
        "the Spark JVM exited before it started: a setting it refuses, or too little memory",
        "read the driver's log (`ftspark logs <job> --attempt <n>`): the JVM names the cause; fix it in "
        "spec.sparkConf or spec.driver",
    ),
    "RuntimeFailed": Remedy(
        "lastFailure",
        "the driver runtime itself failed (a bug of ftspark's)",
        "report it with the driver's log",
    ),
    "LeaseLost": Remedy(
        "lastFailure",
        "the driver could not renew its Lease in time (API server unreachable or slow) and stopped writing",
        "nothing, when rare: the next attempt resumes from the latest checkpoint",
    ),
    "FencedOut": Remedy(
        "lastFailure",
        "a newer attempt owns the job's checkpoint records: this one stopped writing",
        "nothing: the newer attempt runs on",
    ),
    "LeaseUnavailable": Remedy(
        "lastFailure",
        "the driver Lease was not free within its acquire timeout (another driver held it)",
        "nothing, when rare; often: the API server's load",
    ),
    STOP_TIMED_OUT: Remedy(
        "lastFailure",
        "a stop found no batch boundary within spec.stopTimeoutSeconds and was cancelled",
        "raise stopTimeoutSeconds above the longest batch, to stop without a rewind",
    ),
    "UnwantedStop": Remedy(
        "lastFailure",
        "the driver obeyed a stop request the job no longer has (a deposed operator leader's)",
        "nothing: the next attempt resumes from the final checkpoint",
    ),
    "OOMKilled": Remedy(
        "lastFailure",
        "the driver container ran out of memory (its limit is spec.driver.memory plus Spark's overhead)",
        "raise spec.driver.memory or sparkConf spark.driver.memoryOverhead",
    ),
    "DriverKilled": Remedy(
        "lastFailure",
        "the driver died of a signal (exit 128 + n): a kill, or the OOM killer inside the container",
        "the pod's events and the node's; if it is memory, as for OOMKilled",
    ),
    "DriverError": Remedy(
        "lastFailure",
        "the driver exited with an error and no words of its own (the message is its log's tail)",
        "the message, and the driver's log",
    ),
    "Evicted": Remedy(
        "lastFailure",
        "the kubelet evicted the driver (node pressure: memory, disk)",
        "requests closer to use; nothing else when rare",
    ),
    "DriverLost": Remedy(
        "lastFailure",
        "the driver pod disappeared (deleted by someone, a node drain)",
        "nothing, when rare; a drain waits for a driver with a disruption budget (the default) and moves it "
        "with a final checkpoint: check spec.driver.disruptionBudget and the chart's "
        "jobDefaults.driverDisruptionBudget",
    ),
    NODE_LOST: Remedy(
        "lastFailure",
        "the driver's node stopped reporting; the driver is presumed lost and its Lease is waited out",
        "nothing: the next attempt runs elsewhere",
    ),
}


def remedy_for(status: Mapping[str, Any]) -> tuple[str, Remedy] | None:
    """The reason that matters now in a job's status (as the API server serves it) and its remedy:
    Reconciled's when False (the operator cannot act), else Ready's when False, else Degraded's when True,
    else the last failure's."""
    conditions = {c.get("type"): c for c in status.get("conditions") or [] if isinstance(c, dict)}
    ready, degraded = conditions.get("Ready", {}), conditions.get("Degraded", {})
    reconciled = conditions.get("Reconciled", {})
    failure = status.get("lastFailure") or {}
    reasons = (
        reconciled.get("reason") if reconciled.get("status") == "False" else None,
        ready.get("reason") if ready.get("status") == "False" else None,
        degraded.get("reason") if degraded.get("status") == "True" else None,
        failure.get("reason") if isinstance(failure, dict) else None,
    )
    return next(((reason, REMEDIES[reason]) for reason in reasons if reason in REMEDIES), None)
