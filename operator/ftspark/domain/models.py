"""The FaultTolerantSparkJob resource: spec (what the user wants) and status (what the operator saw).

These models are the single source of the CRD schema (crds/ is generated from them, see ftspark.crd).
Every field carries a description: it is what `kubectl explain` shows.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.alias_generators import to_camel, to_snake

from ftspark.domain.cron import CronSchedule
from ftspark.domain.deps import DEP_KINDS, check
from ftspark.domain.liveness import NO_DATA_INTERVAL_KEY, shortest_timeout

# A bucket, then segments none of which is empty, "." or "..": Hadoop normalizes s3://b/a/../c to another
# prefix than the one checked (RE2 has no lookahead, hence the three ways a segment may start).
S3_URI = r"^s3a?://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/([^/.][^/]*|\.[^/.][^/]*|\.\.[^/]+))*/?$"
_JVM_MEMORY = r"^[0-9]+([kmgt]b?)?$"  # Spark's memory strings: 512m, 2g, 1gb
_SECRET_NAME = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"  # a DNS subdomain, as Kubernetes names Secrets
_MIB_PER_UNIT = {"k": 1 / 1024, "m": 1, "g": 1024, "t": 1024**2, "p": 1024**3}
# Settings the operator reads itself (to size the driver pod as Spark does): a value it cannot read is the
# spec's error, named at apply time, not a reconcile that fails on every pass.
SIZE_CONF = ("spark.driver.memoryOverhead", "spark.driver.minMemoryOverhead")
FACTOR_CONF = ("spark.driver.memoryOverheadFactor", "spark.kubernetes.memoryOverheadFactor")
# The pods' CPU requests where they differ from the cores (Spark's own settings): the operator sizes the
# driver's pod by the first, Spark its executors' by the second; either must be a Kubernetes CPU quantity.
DRIVER_REQUEST_CORES = "spark.kubernetes.driver.request.cores"
REQUEST_CORES_CONF = (DRIVER_REQUEST_CORES, "spark.kubernetes.executor.request.cores")
_CPU_QUANTITY = re.compile(r"[0-9]+m|[0-9]+(\.[0-9]{1,3})?")  # 500m, 0.5, 2


def spark_size_mib(size: str) -> int:
    """Spark's size strings (512m, 1g, 1gb; a bare number is MiB) in whole MiB, as Spark rounds them;
    ValueError for anything else."""
    amount = size.strip().lower().removesuffix("b")
    unit = amount[-1:] if amount[-1:] in _MIB_PER_UNIT else ""
    number = amount[: len(amount) - len(unit)]
    if not (number.isascii() and number.isdigit()):
        raise ValueError(f"{size!r} is not a size (e.g. 512m, 2g)")
    return int(int(number) * _MIB_PER_UNIT[unit or "m"])


# Every duration a user sets is at most a year: a date that far ahead is still representable, so no
# arithmetic on it overflows (1e12 s would, and fail every reconcile of the job instead of its validation).
YEAR_SECONDS = 365 * 24 * 3600
SPARK_CONF_MAX_BYTES = 64 * 1024


class _Model(BaseModel):
    """camelCase on the wire, snake_case in Python; unknown fields are refused."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)


def _object(*rules: tuple[str, str]) -> dict[str, Any]:
    """CEL rules (x-kubernetes-validations) for a model's schema."""
    return {"x-kubernetes-validations": [{"rule": rule, "message": message} for rule, message in rules]}


PodTemplate = Annotated[
    dict[str, Any],
    Field(json_schema_extra={"x-kubernetes-preserve-unknown-fields": True}),
]


class SecretKeyRef(_Model):
    name: str = Field(min_length=1, description="A Secret in the job's namespace.")
    key: str = Field(min_length=1, description="The key of the Secret that holds the value.")


class EnvVar(_Model):
    model_config = ConfigDict(
        json_schema_extra=_object(
            ("self.value == '' || !has(self.secretKeyRef)", "set either value or secretKeyRef, not both")
        )
    )
    name: str = Field(min_length=1, description="Name of the environment variable.")
    value: str = Field(default="", description="Value of the environment variable.")
    secret_key_ref: SecretKeyRef | None = Field(
        default=None,
        description="Take the value from a Secret instead, in the driver and the executors (credentials: "
        "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY reach both boto3 and S3A this way).",
    )

    @model_validator(mode="after")
    def _one_source(self) -> EnvVar:
        if self.value and self.secret_key_ref is not None:
            raise ValueError("set either value or secretKeyRef, not both")
        return self


class DriverSpec(_Model):
    cores: int = Field(default=1, ge=1, le=64, description="CPU cores of the driver (spark.driver.cores).")
    memory: str = Field(
        default="1g", pattern=_JVM_MEMORY, description="Driver heap (spark.driver.memory), e.g. 1g."
    )
    pod_template: PodTemplate = Field(
        default_factory=dict,
        description="A partial Pod merged into the driver pod the operator creates "
        "(labels, annotations, tolerations, volumes, sidecars).",
    )
    standby: int = Field(
        default=0,
        ge=0,
        le=1,
        description="1: keep a hot standby driver on another node, its SparkSession up with no executors, "
        "promoted when the driver ends instead of a new pod being started (docs/hot-standby.md). Changing "
        "it restarts nothing.",
    )
    standby_executors: int = Field(
        default=0,
        ge=0,
        le=1000,
        description="With standby: how many of the job's executors the standby keeps up and warmed while it "
        "waits (at most executor.instances), so that a promotion starts its first batch on executors "
        "that have run tasks before. Each costs an executor pod while the standby waits "
        "(docs/hot-standby.md). Changing it replaces the standby and restarts nothing.",
    )
    disruption_budget: bool | None = Field(
        default=None,
        description="Whether the namespace's PodDisruptionBudget ftspark-drivers (made by the operator once "
        "per namespace) covers the job's driver pods and standby: a node drain (kubectl drain, a cluster "
        "autoscaler's or a node upgrade's) may not evict a Ready one. Whether or not it has one, a driver "
        "whose node is cordoned or marked for removal is stopped at the next batch boundary with a final "
        "checkpoint and resumed on another node (phase Relocating; its standby promoted when it has one), "
        "and no failure is counted; the budget makes the drain wait for that instead of killing the driver."
        " Unset: the installation's default (the chart's jobDefaults.driverDisruptionBudget, on); an "
        "installation that does not watch nodes makes none. A change applies from the next attempt on.",
    )


class ExecutorSpec(_Model):
    instances: int = Field(
        default=1, ge=0, le=1000, description="Number of executors (spark.executor.instances)."
    )
    cores: int = Field(default=1, ge=1, le=64, description="CPU cores per executor (spark.executor.cores).")
    memory: str = Field(
        default="1g", pattern=_JVM_MEMORY, description="Executor heap (spark.executor.memory)."
    )
    pod_template: PodTemplate = Field(
        default_factory=dict,
        description="A partial Pod used as Spark's executor pod template "
        "(spark.kubernetes.executor.podTemplateFile).",
    )


DYNAMIC_ALLOCATION_KEY = "spark.dynamicAllocation.enabled"


class DynamicAllocationSpec(_Model):
    """Spark's dynamic allocation (spark.dynamicAllocation.*) with shuffle tracking, as Kubernetes has no
    external shuffle service: docs/concepts.md, "Dynamic allocation"."""

    model_config = ConfigDict(
        json_schema_extra=_object(
            ("self.minExecutors <= self.maxExecutors", "minExecutors must be <= maxExecutors"),
            (
                "!has(self.initialExecutors) || (self.minExecutors <= self.initialExecutors && "
                "self.initialExecutors <= self.maxExecutors)",
                "initialExecutors must lie within minExecutors and maxExecutors",
            ),
        )
    )
    enabled: bool = Field(default=False, description="Let Spark add and remove executors with the load.")
    min_executors: int = Field(default=1, ge=0, le=1000, description="Executors always kept.")
    max_executors: int = Field(default=10, ge=1, le=1000, description="Executors at most.")
    initial_executors: int | None = Field(
        default=None, ge=0, le=1000, description="Executors at the start of an attempt; unset: minExecutors."
    )
    executor_idle_timeout_seconds: int = Field(
        default=60, ge=1, le=YEAR_SECONDS, description="An executor idle this long is removed."
    )
    shuffle_tracking: bool = Field(
        default=True,
        description="Keep an executor while it holds shuffle data a later stage needs "
        "(spark.dynamicAllocation.shuffleTracking.enabled): what stands in for an external shuffle service.",
    )
    shuffle_tracking_timeout_seconds: int | None = Field(
        default=None,
        ge=1,
        le=YEAR_SECONDS,
        description="Remove an idle executor holding shuffle data after this long all the same (a later "
        "stage that needs it recomputes it). A streaming query's micro-batches leave shuffle data behind "
        "until the JVM's periodic cleanup (spark.cleaner.periodicGC.interval, 30 min): without this, "
        "executors that ran a stateful batch are hardly ever removed. Unset: Spark's default, never.",
    )

    @model_validator(mode="after")
    def _bounded(self) -> DynamicAllocationSpec:
        if self.min_executors > self.max_executors:
            raise ValueError("minExecutors must be <= maxExecutors")
        initial = self.initial_executors
        if initial is not None and not self.min_executors <= initial <= self.max_executors:
            raise ValueError("initialExecutors must lie within minExecutors and maxExecutors")
        return self

    def spark_conf(self) -> dict[str, str]:
        if not self.enabled:
            return {}
        initial = self.min_executors if self.initial_executors is None else self.initial_executors
        return {
            DYNAMIC_ALLOCATION_KEY: "true",
            "spark.dynamicAllocation.minExecutors": str(self.min_executors),
            "spark.dynamicAllocation.maxExecutors": str(self.max_executors),
            "spark.dynamicAllocation.initialExecutors": str(initial),
            "spark.dynamicAllocation.executorIdleTimeout": f"{self.executor_idle_timeout_seconds}s",
            "spark.dynamicAllocation.shuffleTracking.enabled": str(self.shuffle_tracking).lower(),
        } | (
            {"spark.dynamicAllocation.shuffleTracking.timeout": f"{timeout}s"}
            if (timeout := self.shuffle_tracking_timeout_seconds)
            else {}
        )


class CheckpointSpec(_Model):
    storage: str = Field(
        pattern=S3_URI,
        description="s3:// prefix under which the job keeps checkpoints/, savepoints/, ha/ and results/.",
    )
    retained: int = Field(
        default=3, ge=1, le=100, description="Completed checkpoints whose pointers are kept (newest first)."
    )
    retain_on_delete: bool = Field(
        default=False,
        description="Keep the job's checkpoint directories after it is deleted. By default they are deleted "
        "with its result, once the resource is gone and resultStore.ttlSeconds has passed since the job "
        "ended or was deleted (time to recover them). Savepoints are never deleted with the job.",
    )
    max_resume_age_seconds: int = Field(
        default=0,
        ge=0,
        le=YEAR_SECONDS,
        description="A job resumed (desiredState running again after stopped, suspended or cancelled) whose "
        "newest checkpoint is older than this does not start: its sources may no longer hold the data after "
        "that checkpoint (a Kafka retention passed). Ready=False with reason StateTooOld says how old; raise "
        "this or set it to 0 to resume anyway. 0: no limit.",
    )


class FixedDelay(_Model):
    attempts: int = Field(default=3, ge=0, description="Restarts allowed before the job fails for good.")
    delay_seconds: float = Field(
        default=10.0, ge=0, le=YEAR_SECONDS, description="Wait between a failure and the next attempt."
    )


class ExponentialDelay(_Model):
    model_config = ConfigDict(
        json_schema_extra=_object(
            (
                "self.maxBackoffSeconds >= self.initialBackoffSeconds",
                "maxBackoffSeconds must be >= initialBackoffSeconds",
            )
        )
    )
    initial_backoff_seconds: float = Field(
        default=1.0, ge=0, le=YEAR_SECONDS, description="Delay before the first restart."
    )
    max_backoff_seconds: float = Field(
        default=300.0, ge=0, le=YEAR_SECONDS, description="Upper bound of the delay."
    )
    backoff_multiplier: float = Field(
        default=2.0, ge=1, le=1000, description="Factor applied to the delay after a failure."
    )
    jitter_factor: float = Field(default=0.1, ge=0, le=1, description="Random +/- share of the delay.")
    reset_backoff_threshold_seconds: float = Field(
        default=3600.0,
        ge=0,
        le=YEAR_SECONDS,
        description="A run stable this long resets the delay to its initial value.",
    )
    attempts: int | None = Field(
        default=None, ge=0, description="Restarts allowed in all; unset means no limit."
    )

    @model_validator(mode="after")
    def _bounded(self) -> ExponentialDelay:
        if self.max_backoff_seconds < self.initial_backoff_seconds:
            raise ValueError("maxBackoffSeconds must be >= initialBackoffSeconds")
        return self


class FailureRate(_Model):
    max_failures_per_interval: int = Field(
        default=3, ge=1, description="Failures tolerated within one interval."
    )
    interval_seconds: float = Field(
        default=300.0, gt=0, le=YEAR_SECONDS, description="Length of the sliding interval."
    )
    delay_seconds: float = Field(
        default=10.0, ge=0, le=YEAR_SECONDS, description="Wait between a failure and the next attempt."
    )


RestartStrategyType = Literal["fixed-delay", "exponential-delay", "failure-rate", "none"]


class RestartStrategy(_Model):
    type: RestartStrategyType = Field(
        default="exponential-delay",
        description="How failed attempts are restarted: fixed-delay, "
        "exponential-delay, failure-rate or none.",
    )
    fixed_delay: FixedDelay = Field(default_factory=FixedDelay, description="Settings of fixed-delay.")
    exponential_delay: ExponentialDelay = Field(
        default_factory=ExponentialDelay, description="Settings of exponential-delay."
    )
    failure_rate: FailureRate = Field(default_factory=FailureRate, description="Settings of failure-rate.")
    configuration_failures: int = Field(
        default=3,
        ge=0,
        le=1000,
        description="Attempts in a row that fail for a cause no restart fixes (a missing application file: "
        "ApplicationFile, MainFileMissing; a driver environment or Spark setting refused: BadConfig, "
        "SparkNotStarted; an image whose ftspark runtime is of another release: RuntimeMismatch; an image "
        "without what the spec asks (the local-recovery jar): ImageIncomplete; an unusable "
        "initialSavepoint: Savepoint; a pod that cannot be made as the spec "
        "says: CreateContainerConfigError, InvalidImageName) after which the job is not restarted, whatever "
        "the strategy allows: it ends Failed, its result (and Ready's message) naming the cause, and the "
        "next spec change starts it again. An attempt that commits a batch resets the count. 0: no limit, "
        "the strategy alone decides.",
    )
    infrastructure_failures: int = Field(
        default=10,
        ge=0,
        le=1000,
        description="Attempts in a row that fail for a cause outside the job (its node lost, or drained "
        "without a budget: NodeLost, DriverLost, Evicted; its driver's Lease lost to the API server: "
        "LeaseLost; no node or image for its pods: DriverUnschedulable, DriverVolumeNotBound, "
        "ImagePullBackOff, ErrImagePull, ExecutorsNotStarted) that are restarted without counting against "
        "the strategy (its attempts, its failure rate, its growing backoff), each after the strategy's "
        "first delay; after this many in a row the job ends Failed, naming the cause. An attempt that "
        "commits a batch resets the count. 0: such failures count as any other.",
    )
    max_consecutive_failures: int = Field(
        default=0,
        ge=0,
        le=1000,
        description="Attempts in a row that may fail, whatever the cause, after which the job ends Failed "
        "even if the strategy or the limits above would restart it; an attempt that commits a batch resets "
        "the count. 0: no cap.",
    )


class LocalRecoverySpec(_Model):
    enabled: bool = Field(
        default=False,
        description="Keep a verified copy of state on the executors' nodes and read it on recovery.",
    )
    affinity: Literal["preferred", "required"] = Field(
        default="preferred",
        description="Node affinity of a new attempt's executors to the nodes used before.",
    )
    host_path: str = Field(
        default="/var/lib/ftspark/local-state",
        pattern=r"^/",
        description="Node-local root directory: a job's executors mount only its subdirectory "
        "jobs/<namespace>/<uid> (Spark's local dir and the job's state copies), through a claim on a "
        "hostPath PersistentVolume the operator makes for the job; an init container (root, no "
        "capabilities) opens that directory to the executor's user, so the namespace's Pod Security level "
        "must be baseline or privileged.",
    )

    @field_validator("host_path")
    @classmethod
    def _plain(cls, path: str) -> str:
        # A node directory the operator makes a volume of: the API server refuses ".." there, and "." or an
        # empty segment would name one directory by two paths (two jobs' roots, one directory).
        if any(part in {"", ".", ".."} for part in path.rstrip("/").split("/")[1:]):
            raise ValueError(f"{path!r}: an absolute path without '.', '..' or empty segments")
        return path


class DepsSpec(_Model):
    """What the job ships with it, each entry an S3 object (s3://, s3a://; the driver fetches it before
    Spark starts, with the job's S3 settings) or a file in the image (local:///path): docs/dependencies.md."""

    py_files: list[str] = Field(
        default_factory=list,
        max_length=64,
        description="Python files and archives (.py, .zip, .egg) on the driver's and the executors' Python "
        "path (spark.submit.pyFiles, as --py-files); the same as the older spec.pyFiles.",
    )
    files: list[str] = Field(
        default_factory=list,
        max_length=64,
        description="Files in each executor's working directory and the driver's SparkFiles directory "
        "(spark.files, as --files; SparkFiles.get(name) finds them).",
    )
    jars: list[str] = Field(
        default_factory=list,
        max_length=64,
        description=".jar files on the driver's and the executors' classpath (spark.jars, as --jars).",
    )
    archives: list[str] = Field(
        default_factory=list,
        max_length=16,
        description="Archives (.zip, .jar, .tar.gz, .tgz, .tar), each unpacked into the executors' working "
        "directory as <name>#<dir> says (spark.archives, as --archives). A packed virtualenv (one holding "
        "lib/python3.X/site-packages, X the image's Python) goes on the driver's and the executors' Python "
        "path: its packages import in the job's script and in its UDFs.",
    )
    max_file_mib: int = Field(
        default=2048,
        alias="maxFileMiB",
        ge=1,
        le=65536,
        description="The largest object the driver fetches from S3, MiB: a larger one ends the attempt "
        "(reason ApplicationFile) before Spark starts.",
    )

    @model_validator(mode="after")
    def _each_entry_a_place_spark_takes(self) -> DepsSpec:
        for kind in DEP_KINDS:
            for index, entry in enumerate(getattr(self, to_snake(kind.field))):
                try:
                    check(kind, entry)
                except ValueError as error:
                    raise ValueError(f"spec.deps.{kind.field}[{index}]: {error}") from None
        return self

    def by_conf_key(self) -> dict[str, list[str]]:
        return {kind.conf_key: getattr(self, to_snake(kind.field)) for kind in DEP_KINDS}


STATE_STORE_PROVIDER_KEY = "spark.sql.streaming.stateStore.providerClass"
CHANGELOG_CHECKPOINTING_KEY = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"
STATE_STORE_PROVIDERS = {
    "hdfs": "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider",
    "rocksdb": "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
}


class StateStoreSpec(_Model):
    """Where Spark keeps a stateful query's state between batches (docs/concepts.md, "State stores")."""

    provider: Literal["hdfs", "rocksdb"] = Field(
        default="hdfs",
        description="hdfs: Spark's default, state in the executors' JVM heap, a delta file per partition and "
        "batch; rocksdb: state in RocksDB on the executors' local disk, off the heap (large state, many "
        "keys). Fixed by the query's first checkpoint: Spark keeps using the provider the checkpoint was "
        "made with, so a change needs a fresh checkpoint (upgradeMode stateless).",
    )
    changelog_checkpointing: bool = Field(
        default=True,
        description="rocksdb only: each batch uploads the changes it made (a changelog) instead of the "
        "RocksDB files it changed, and a background snapshot folds them in: a shorter commit, a longer "
        "restore (at most spark.sql.streaming.stateStore.minDeltasForSnapshot changelogs replayed).",
    )

    def spark_conf(self) -> dict[str, str]:
        conf = {STATE_STORE_PROVIDER_KEY: STATE_STORE_PROVIDERS[self.provider]}
        if self.provider == "rocksdb":
            conf[CHANGELOG_CHECKPOINTING_KEY] = str(self.changelog_checkpointing).lower()
        return conf


UI_ENABLED_KEY = "spark.ui.enabled"
UI_KILL_KEY = "spark.ui.killEnabled"
UI_PROXY_BASE_KEY = "spark.ui.proxyBase"


class UiIngressSpec(_Model):
    enabled: bool | None = Field(
        default=None,
        description="Make an Ingress for the UI service. Unset: the installation's default (the chart's "
        "ui.ingress.enabled, off).",
    )
    class_name: str | None = Field(
        default=None,
        max_length=253,
        description="Its ingressClassName; unset: the chart's ui.ingress.className (else the cluster's "
        "default class).",
    )
    host: str | None = Field(
        default=None,
        max_length=253,
        pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$",
        description="Its host; unset: the chart's ui.ingress.host (else any host).",
    )
    path: str | None = Field(
        default=None,
        max_length=200,
        pattern=r"^(/[A-Za-z0-9._~-]+)+$",
        description="The path the UI is served under (Spark's spark.ui.proxyBase); unset: "
        "/spark/<namespace>/<name>.",
    )
    tls_secret_name: str | None = Field(
        default=None,
        pattern=_SECRET_NAME,
        max_length=253,
        description="A TLS Secret of the job's namespace for the host; unset: the chart's "
        "ui.ingress.tlsSecretName (else plain HTTP).",
    )


class UiSpec(_Model):
    enabled: bool = Field(
        default=False,
        description="Run the Spark UI (its kill links off), served by the Service <name>-ui on port 4040, "
        "which always points at the job's current driver (a promoted standby's too): status.uiUrl says "
        "where, `ftspark ui <name>` forwards it to this machine. The driver's NetworkPolicy lets in the "
        "job's own namespace and namespaces labelled ftspark.io/ui-access=true (an ingress controller's). "
        "The UI shows the job's Spark settings and environment (values whose names look secret are "
        "redacted, as spark.redaction.regex says).",
    )
    ingress: UiIngressSpec = Field(
        default_factory=UiIngressSpec, description="An Ingress in front of the UI service."
    )

    def spark_conf(self, proxy_base: str | None) -> dict[str, str]:
        if not self.enabled:
            return {}
        conf = {UI_ENABLED_KEY: "true", UI_KILL_KEY: "false"}
        return conf | ({UI_PROXY_BASE_KEY: proxy_base} if proxy_base else {})


class ResultStoreSpec(_Model):
    ttl_seconds: int = Field(
        default=7 * 24 * 3600,
        ge=0,
        description="How long a finished job's result is kept, counted from when the job finished; 0 keeps "
        "it as long as the operator allows (the chart's maxResultRetentionSeconds, 30 days by default, also "
        "caps longer values; and a namespace keeps at most maxResultsPerNamespace results, the oldest go "
        "first). It is deleted only once the resource is gone too (deleted, or re-created with another "
        "uid): while the resource exists its result is what stops a new leader from running the finished job "
        "again. Results past their retention go at the operator's next sweep (every 300 s by default: the "
        "chart's resultSweepSeconds).",
    )


class LivenessSpec(_Model):
    progress_timeout_seconds: int = Field(
        default=300,
        ge=0,
        le=YEAR_SECONDS,
        description="A running query that shows no sign of life (a batch, or Spark's idle event, sent every "
        f"{NO_DATA_INTERVAL_KEY}, 10 s by default) for this long ends its driver with reason NoProgress, "
        "a failure the restart strategy handles; 0 turns the check off. A batch sends nothing while it runs, "
        "so this must exceed the longest batch and the trigger interval (as Flink's checkpoint timeout "
        "must exceed the longest checkpoint), and the idle interval by 10 s. A change applies from the "
        "next attempt on.",
    )
    start_timeout_seconds: int = Field(
        default=600,
        ge=0,
        le=YEAR_SECONDS,
        description="A driver pod that still waits, this long after its attempt was submitted, for a cause "
        "that does not pass by itself (DriverUnschedulable, DriverVolumeNotBound, ImagePullBackOff, "
        "ErrImagePull, InvalidImageName, CreateContainerConfigError) fails with that reason, and the "
        "restart strategy decides what next; until then the job waits, Degraded saying why. 0: it waits "
        "for ever. A change applies now.",
    )


class SavepointHistorySpec(_Model):
    max_count: int = Field(
        default=10,
        ge=1,
        le=100,
        description="Savepoints kept in status.savepoints; the oldest beyond it are disposed of: their data "
        "under <storage>/savepoints/<id>/ is deleted, then their reference.",
    )
    max_age_seconds: int = Field(
        default=24 * 3600,
        ge=0,
        le=YEAR_SECONDS,
        description="Savepoints older than this (since they completed) are disposed of; 0: no age limit. The "
        "newest savepoint and the one spec.initialSavepoint names are never disposed of.",
    )


class SavepointsSpec(_Model):
    periodic_interval_seconds: int = Field(
        default=0,
        ge=0,
        le=YEAR_SECONDS,
        description="While the job runs, take a savepoint this long after the last periodic one (the first: "
        "this long after the attempt started running); 0 turns periodic savepoints off.",
    )
    on_stop: bool = Field(
        default=False,
        description="desiredState stopped or suspended ends with a savepoint of the final checkpoint's batch "
        "(stop-with-savepoint), recorded in status.savepoints with origin stop; resuming restores that same "
        "batch, so nothing is processed twice. A stop that times out is cancelled and takes none.",
    )
    history: SavepointHistorySpec = Field(
        default_factory=SavepointHistorySpec,
        description="How many savepoints, and how old, the job keeps; disposing of one deletes its data. "
        "Applied while the job runs.",
    )


class UpgradeRollbackSpec(_Model):
    enabled: bool = Field(
        default=False,
        description="Roll a spec change back to the last stable spec when its attempt fails, or does not "
        "reach Running, within windowSeconds. The spec is left as it is: the operator runs the last "
        "stable one (status.upgradeRollback says so) until the spec changes again.",
    )
    window_seconds: int = Field(
        default=300,
        ge=10,
        le=YEAR_SECONDS,
        description="How long a spec's attempt must run to make the spec stable, and how long after an "
        "upgrade a failure (or no Running yet) rolls it back.",
    )


UpgradeMode = Literal["stateless", "last-state", "savepoint"]
DesiredState = Literal["running", "stopped", "cancelled", "suspended"]


# Spark settings ftspark derives from the job (names, ports, checkpoint location, master): a user value would
# break fencing or recovery, so it is refused with the key named.
MANAGED_SPARK_CONF = frozenset(
    {
        "spark.master",
        "spark.submit.deployMode",
        "spark.app.id",
        "spark.kubernetes.namespace",
        "spark.kubernetes.driver.pod.name",
        "spark.kubernetes.executor.podNamePrefix",
        "spark.driver.host",
        "spark.driver.port",
        "spark.driver.blockManager.port",
        "spark.sql.streaming.checkpointLocation",
    }
)


class JobSpec(_Model):
    """What to run and how to keep it running."""

    image: str = Field(min_length=1, description="Container image with Spark, Python and ftspark.")
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] = Field(
        default="IfNotPresent", description="Pull policy of the driver and executor images."
    )
    image_pull_secrets: list[Annotated[str, Field(pattern=_SECRET_NAME, max_length=253)]] = Field(
        default_factory=list,
        max_length=16,
        description="Secrets of the job's namespace (kubernetes.io/dockerconfigjson) the kubelet pulls "
        "spec.image with, for the driver (and its standby) and the executors: a private registry.",
    )
    main_application_file: str = Field(
        min_length=1,
        description="The PySpark script: a path in the image (local:///opt/app/job.py or /opt/app/job.py) or "
        "an S3 object (s3://bucket/job.py, also s3a://), which the driver fetches before Spark starts with "
        "the job's S3 settings (sparkConf spark.hadoop.fs.s3a.*, else the AWS_* variables of env).",
    )
    arguments: list[str] = Field(default_factory=list, description="Arguments passed to the script.")
    py_files: list[str] = Field(
        default_factory=list,
        description="Extra Python files or archives (.py, .zip, .egg) for the driver and the executors "
        "(spark.submit.pyFiles, as --py-files): paths in the image, or S3 objects fetched by the driver as "
        "mainApplicationFile is. The older spelling of deps.pyFiles: entries of both are shipped.",
    )
    deps: DepsSpec = Field(
        default_factory=DepsSpec,
        description="Files, jars, archives and Python files the job ships with it.",
    )
    spark_conf: dict[str, str] = Field(
        default_factory=dict,
        description="Extra Spark configuration (--conf k=v). As with spark-submit, "
        "spark.kubernetes.driver.request.cores and spark.kubernetes.executor.request.cores (e.g. 500m) set "
        "the pods' CPU requests below their cores.",
    )
    env: list[EnvVar] = Field(
        default_factory=list, description="Environment variables of driver and executors."
    )
    driver: DriverSpec = Field(default_factory=DriverSpec, description="Driver resources and pod overrides.")
    executor: ExecutorSpec = Field(
        default_factory=ExecutorSpec, description="Executor count, resources, pod overrides."
    )
    dynamic_allocation: DynamicAllocationSpec = Field(
        default_factory=DynamicAllocationSpec,
        description="Executors added and removed with the load; executor.instances is then not used.",
    )
    checkpoint: CheckpointSpec = Field(description="Where checkpoints live and how many are kept.")
    restart_strategy: RestartStrategy = Field(
        default_factory=RestartStrategy, description="What happens after a failed attempt."
    )
    upgrade_rollback: UpgradeRollbackSpec = Field(
        default_factory=UpgradeRollbackSpec,
        description="Automatic rollback of a spec change that does not run (Flink operator's rollback).",
    )
    upgrade_mode: UpgradeMode = Field(
        default="last-state",
        description="How a spec change is rolled out: stateless (fresh checkpoints), "
        "last-state (resume from the latest checkpoint) or savepoint (stop with a final checkpoint and a "
        "savepoint of it, kept in status.savepoints; resume from that batch, nothing re-runs; a stop that "
        "outlasts stopTimeoutSeconds becomes a last-state upgrade).",
    )
    desired_state: DesiredState = Field(
        default="running",
        description="running; stopped (stop with a final checkpoint, resume from it without rewind; no "
        "savepoint is taken); cancelled (stop now); suspended (the same stop as stopped, shown as phase "
        "Suspended: a pause).",
    )
    stop_timeout_seconds: int = Field(
        default=300,
        ge=1,
        le=YEAR_SECONDS,
        description="How long a stop may take before it is escalated to a cancel.",
    )
    savepoint_trigger_nonce: int | None = Field(
        default=None, description="Change this number to take a savepoint of the running job."
    )
    savepoints: SavepointsSpec = Field(
        default_factory=SavepointsSpec, description="Periodic savepoints, and the history of savepoints kept."
    )
    initial_savepoint: str | None = Field(
        default=None,
        pattern=S3_URI,
        description="Start from this savepoint (s3:// path of savepoints/<id>).",
    )
    state_store: StateStoreSpec | None = Field(
        default=None,
        description="The state store of the job's stateful queries (Spark's default, hdfs, when absent); "
        "its sparkConf keys are then ftspark's to set.",
    )
    local_recovery: LocalRecoverySpec = Field(
        default_factory=LocalRecoverySpec, description="Task-local state recovery."
    )
    result_store: ResultStoreSpec = Field(
        default_factory=ResultStoreSpec, description="Retention of the finished job's result."
    )
    ui: UiSpec = Field(default_factory=UiSpec, description="The Spark UI, a Service and an Ingress for it.")
    liveness: LivenessSpec = Field(
        default_factory=LivenessSpec,
        description="When a driver whose queries make no progress counts as hung, and one that cannot "
        "start as failed.",
    )
    ttl_seconds_after_finished: int | None = Field(
        default=None,
        ge=0,
        le=YEAR_SECONDS,
        description="Delete the job resource this long after it finished (Succeeded or Failed for good), "
        "as a Kubernetes Job's ttlSecondsAfterFinished; 0: at once. Unset: the operator's default (the "
        "chart's jobDefaults.ttlSecondsAfterFinished), and with none the resource stays until deleted. Its "
        "result and data then follow resultStore.ttlSeconds and checkpoint.retainOnDelete, as for a job "
        "deleted by hand. A change applies now.",
    )
    failure_history: int = Field(
        default=3,
        ge=0,
        le=20,
        description="How many failed attempts status.failures keeps (status.lastFailure is always the "
        "newest), and how many ended attempts' driver logs the ConfigMap <job>-driver-logs keeps (the end "
        "of each, for ftspark logs); 0 keeps none. A change applies at the next failure and restarts "
        "nothing.",
    )

    @field_validator("spark_conf")
    @classmethod
    def _unmanaged(cls, conf: dict[str, str]) -> dict[str, str]:
        managed = sorted(MANAGED_SPARK_CONF & conf.keys())
        if managed:
            raise ValueError(f"{', '.join(managed)} is set by ftspark and cannot be overridden")
        return conf

    @field_validator("spark_conf")
    @classmethod
    def _readable(cls, conf: dict[str, str]) -> dict[str, str]:
        for key in SIZE_CONF:
            if key in conf:
                try:
                    spark_size_mib(conf[key])
                except ValueError as error:
                    raise ValueError(f"{key}: {error}") from None
        for key in FACTOR_CONF:
            if key in conf and not _positive_number(conf[key]):
                raise ValueError(f"{key}: {conf[key]!r} is not a positive number (e.g. 0.1)")
        for key in REQUEST_CORES_CONF:
            if key in conf and not (_CPU_QUANTITY.fullmatch(conf[key]) and conf[key].strip("0.m")):
                raise ValueError(f"{key}: {conf[key]!r} is not a CPU quantity (e.g. 500m, 0.5, 2)")
        return conf

    @model_validator(mode="after")
    def _one_place_for_each_setting(self) -> JobSpec:
        # The Spark settings a field of the spec makes, which sparkConf may then not make too.
        made_by = {
            "spec.deps both ship dependencies": {
                k for k, entries in self.deps.by_conf_key().items() if entries
            },
            "spec.stateStore both set the state store": self.state_store.spark_conf().keys()
            if self.state_store
            else set(),
            "spec.ui both set the UI": self.ui.spark_conf("/").keys(),
            "spec.dynamicAllocation both set dynamic allocation": self.dynamic_allocation.spark_conf().keys(),
        }
        for field_and_what, keys in made_by.items():
            if both := sorted(keys & self.spark_conf.keys()):
                raise ValueError(f"spec.sparkConf[{both[0]}] and {field_and_what}: keep one")
        return self

    @model_validator(mode="after")
    def _one_way_to_keep_executors_warm(self) -> JobSpec:
        if self.dynamic_allocation.enabled and self.driver.standby_executors:
            raise ValueError(
                "spec.driver.standbyExecutors with spec.dynamicAllocation: a standby keeps "
                "dynamicAllocation.initialExecutors warm (Spark starts them with its session); leave "
                "standbyExecutors 0"
            )
        return self

    @model_validator(mode="after")
    def _fits_the_drivers_environment(self) -> JobSpec:
        # sparkConf and env values reach the driver as Spark settings in one environment variable, which
        # Linux caps at 128 KiB: past it the driver could not even start, attempt after attempt.
        size = len(json.dumps({**self.spark_conf, **{e.name: e.value for e in self.env}}).encode())
        if size > SPARK_CONF_MAX_BYTES:
            raise ValueError(
                f"sparkConf and env values take {size} bytes; at most {SPARK_CONF_MAX_BYTES} fit the "
                "driver's environment (put large values in a file: pyFiles, a Secret or a ConfigMap)"
            )
        return self

    @model_validator(mode="after")
    def _timeout_above_the_idle_interval(self) -> JobSpec:
        timeout = self.liveness.progress_timeout_seconds
        try:
            shortest = shortest_timeout(self.spark_conf)
        except ValueError as error:
            raise ValueError(f"spec.sparkConf[{NO_DATA_INTERVAL_KEY}]: {error}") from None
        if 0 < timeout < shortest:
            raise ValueError(
                f"spec.liveness.progressTimeoutSeconds ({timeout}) must be 0 (off) or at least {shortest:g}: "
                f"an idle query is heard from only every {NO_DATA_INTERVAL_KEY}, plus a margin"
            )
        return self


Phase = Literal[
    "Pending",
    "Submitting",
    "Running",
    "Restarting",
    "Stopping",
    "Stopped",
    "Cancelling",
    "Cancelled",
    "Suspended",
    "Upgrading",
    "Relocating",
    "Succeeded",
    "Failed",
]
ConditionType = Literal["Ready", "Progressing", "Degraded", "StandbyReady", "Reconciled"]


class Condition(_Model):
    type: ConditionType = Field(
        description="Ready, Progressing, Degraded or StandbyReady; Reconciled is there only as False, while "
        "the operator keeps failing to act on the job (reason OperatorError, the message says why)."
    )
    status: Literal["True", "False", "Unknown"] = Field(description="True, False or Unknown.")
    reason: str = Field(description="A CamelCase word for machines.")
    message: str = Field(default="", description="What happened, for people.")
    last_transition_time: datetime = Field(description="When status last changed.")
    observed_generation: int | None = Field(
        default=None, description="The spec generation this was computed from."
    )


JSON_SAFE = 2**53  # figures a driver reports go into the status: integers JSON carries exactly, finite floats


class BatchFigures(_Model):
    """A committed micro-batch's figures, as Spark reported its progress (StreamingQueryProgress)."""

    duration_ms: int = Field(
        default=0, ge=0, le=JSON_SAFE, description="How long the batch took, ms (Spark's triggerExecution)."
    )
    input_rows: int = Field(default=0, ge=0, le=JSON_SAFE, description="Rows it read from its sources.")
    input_rows_per_second: float = Field(
        default=0.0,
        ge=0,
        le=JSON_SAFE,
        allow_inf_nan=False,
        description="The rate rows arrived at since the batch before.",
    )
    processed_rows_per_second: float = Field(
        default=0.0,
        ge=0,
        le=JSON_SAFE,
        allow_inf_nan=False,
        description="The rate the batch processed them at: below the input rate for long, the job falls "
        "behind.",
    )
    state_rows: int = Field(
        default=0, ge=0, le=JSON_SAFE, description="Rows in the query's state stores after the batch."
    )
    state_bytes: int = Field(
        default=0,
        ge=0,
        le=JSON_SAFE,
        description="Memory the query's state stores used after the batch, bytes.",
    )


class CheckpointRef(_Model):
    id: int = Field(
        ge=0,
        description="Checkpoint id: the job's checkpoint counter, one up for every checkpoint a driver "
        "records, across attempts and queries (Flink's CheckpointIDCounter). Not a Spark batch id: see "
        "batchId.",
    )
    batch_id: int | None = Field(
        default=None, ge=0, description="The Spark micro-batch id this checkpoint committed, in its query."
    )
    time: datetime = Field(description="When the checkpoint completed.")
    location: str = Field(description="The query's checkpoint directory (s3a://, as Spark names it).")
    figures: BatchFigures | None = Field(
        default=None,
        description="The batch's figures as Spark reported them (none for a batch only found committed at a "
        "stop).",
    )


SavepointOrigin = Literal["manual", "periodic", "upgrade", "stop"]


class SavepointRef(_Model):
    id: str = Field(description="Savepoint id.")
    time: datetime = Field(description="When the savepoint completed.")
    location: str = Field(description="s3:// location of savepoints/<id>.")
    batch_id: int = Field(ge=0, description="The micro-batch the savepoint holds.")
    trigger_nonce: int | None = Field(default=None, description="The nonce that asked for it, if any.")
    origin: SavepointOrigin | None = Field(
        default=None,
        description="What asked for it: manual (savepointTriggerNonce), periodic "
        "(savepoints.periodicIntervalSeconds), upgrade (upgradeMode: savepoint) or stop (savepoints.onStop); "
        "unset on savepoints recorded before origins were, which the history never disposes of.",
    )


class SavepointRequest(_Model):
    id: str = Field(description="Id of the savepoint asked of the driver.")
    trigger_nonce: int | None = Field(
        default=None, description="The savepointTriggerNonce it answers; unset for a periodic savepoint."
    )
    requested_at: datetime = Field(description="When the driver was asked.")

    @property
    def origin(self) -> SavepointOrigin:
        """Only a nonce or the periodic timer ask a running driver (an upgrade asks a stop)."""
        return "periodic" if self.trigger_nonce is None else "manual"


class Placement(_Model):
    attempt: int = Field(ge=0, description="The attempt whose executors ran there.")
    nodes: list[str] = Field(default_factory=list, description="Nodes that ran its executors (local state).")


def _step(description: str) -> Any:
    """A step of a recovery: seconds from the failure, absent when the attempt had no part in it."""
    return Field(default=None, ge=0, le=JSON_SAFE, description=description)


class RecoveryPhases(_Model):
    """Where a recovery's seconds went: for each step, the seconds from the failure (the driver's container
    ended, on its kubelet's word, else the failure seen) until the step was done. A step's own time is its
    figure less the one before it in time. The driver's steps count in the order they were done (a
    new driver builds its session while it waits for the Lease); one done before the operator's last step (a
    standby's session, up before the failure) counts as done with it; a step this attempt had no part in (a
    standby's pod start) is absent."""

    seen: float = Field(ge=0, le=JSON_SAFE, description="The operator saw the failure.")
    submitted: float | None = _step(
        "The next attempt was submitted: its driver pod created, or the standby promoted (the "
        "restart strategy's delay comes before).",
    )
    pod_running: float | None = _step(
        "The new driver's container started (scheduling, the image, the container).",
    )
    runtime_started: float | None = _step("The driver runtime's Python began.")
    session_up: float | None = _step("Its SparkSession was up (the JVM, the SparkContext).")
    lease_acquired: float | None = _step(
        "The new driver holds the driver Lease: every older driver is fenced out.",
    )
    executors_registered: float | None = _step("Its first executor registered with it.")
    first_batch_started: float | None = _step(
        "Its first batch began: the user's script ran and the query started.",
    )
    committed: float = Field(
        ge=0,
        le=JSON_SAFE,
        description="That batch was committed: the state restored, the batch run, its checkpoint recorded.",
    )
    standby: bool = Field(default=False, description="The attempt was a hot standby, promoted.")


class Failure(_Model):
    reason: str = Field(description="Why the attempt ended, e.g. DriverError, OOMKilled, NodeLost.")
    message: str = Field(default="", description="The driver's termination message or the observed cause.")
    exit_code: int | None = Field(default=None, description="The driver container's exit code.")
    category: Literal["application", "infrastructure", "configuration"] | None = Field(
        default=None,
        description="Whose the cause is, as the restart strategy counts it: the application's (its code, "
        "its sizing), the infrastructure's (restartStrategy.infrastructureFailures: not counted by the "
        "strategy) or the configuration's (restartStrategy.configurationFailures: no restart fixes it).",
    )
    attempt: int = Field(ge=0, description="The attempt that failed.")
    started_at: datetime | None = Field(
        default=None, description="When the attempt started (its driver ran, or its standby was promoted)."
    )
    ended_at: datetime | None = Field(
        default=None,
        description="When the driver's container ended, on its kubelet's word (none for a lost node or pod).",
    )
    time: datetime = Field(description="When the failure was observed.")
    recovery_seconds: float | None = Field(
        default=None,
        ge=0,
        description="From this failure seen to the next committed batch (the first checkpoint of a later "
        "attempt); absent until then.",
    )
    recovery_phases: RecoveryPhases | None = Field(
        default=None, description="Where the recovery's seconds went; absent until the next batch committed."
    )


class StableSpec(_Model):
    generation: int = Field(ge=0, description="The generation of the spec that ran stably.")
    spec_hash: str = Field(description="Its hash, as the job graph records it.")
    spec: str = Field(description="The spec itself, as JSON: what a rollback runs.")
    time: datetime = Field(description="When it was found stable.")


class UpgradeRollback(_Model):
    generation: int = Field(
        ge=0,
        description="The generation rolled back: while it is the spec's, the operator runs lastStableSpec.",
    )
    time: datetime = Field(description="When it was rolled back.")
    reason: str = Field(description="Why: UpgradeFailed or UpgradeNotRunning.")
    message: str = Field(default="", description="What happened to the upgrade's attempt.")


class RollbackRef(_Model):
    attempt: int = Field(ge=0, description="The attempt whose driver rolled its checkpoint back.")
    time: datetime = Field(description="When the operator saw the rollback.")
    message: str = Field(description="Which checkpoint, from which batch to which, and why.")


ResultState = Literal["Succeeded", "Failed", "Cancelled"]  # Cancelled: deleted before it ended


class JobResult(_Model):
    state: ResultState = Field(description="How the job ended for good.")
    time: datetime = Field(description="When the job ended.")
    message: str = Field(default="", description="Details.")


class RestartState(_Model):
    count: int = Field(default=0, ge=0, description="Restarts so far (attempts after the first).")
    backoff_seconds: float | None = Field(
        default=None, description="exponential-delay: the backoff last applied, before jitter."
    )
    recent_failures: list[datetime] = Field(
        default_factory=list, description="Failure times the strategy still counts (failure-rate window)."
    )
    next_attempt_at: datetime | None = Field(default=None, description="When the next attempt may start.")
    configuration_failures: int = Field(
        default=0,
        ge=0,
        description="Attempts in a row that failed for a configuration cause (restartStrategy."
        "configurationFailures); reset when an attempt commits a batch.",
    )
    infrastructure_failures: int = Field(
        default=0,
        ge=0,
        description="Attempts in a row that failed for a cause outside the job (restartStrategy."
        "infrastructureFailures); reset when an attempt commits a batch.",
    )
    consecutive_failures: int = Field(
        default=0,
        ge=0,
        description="Attempts in a row that failed, whatever the cause (restartStrategy."
        "maxConsecutiveFailures); reset when an attempt commits a batch.",
    )


class JobStatus(_Model):
    """What the operator observed and did; written only by the operator."""

    phase: Phase = Field(default="Pending", description="Lifecycle phase.")
    attempt: int = Field(
        default=0, ge=0, description="Current attempt number (0 before the first submission)."
    )
    observed_generation: int | None = Field(default=None, description="The spec generation last acted upon.")
    conditions: list[Condition] = Field(
        default_factory=list,
        description="Ready, Progressing, Degraded.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )
    driver_pod: str | None = Field(default=None, description="Name of the current attempt's driver pod.")
    ui_url: str | None = Field(
        default=None,
        description="Where the Spark UI of the current attempt is (spec.ui): the Ingress's URL, else the "
        "Service's in-cluster one.",
    )
    latest_checkpoint: CheckpointRef | None = Field(
        default=None, description="The newest completed checkpoint (the highest checkpoint id)."
    )
    checkpoint_directory: str | None = Field(
        default=None,
        description="The checkpoint directory of the current attempt, as the operator chose it; a job whose "
        "job graph was deleted by hand resumes from it.",
    )
    savepoints: list[SavepointRef] = Field(default_factory=list, description="Savepoints taken, newest last.")
    savepoint_in_progress: SavepointRequest | None = Field(
        default=None, description="A savepoint the driver was asked for and has not answered yet."
    )
    handled_savepoint_nonce: int | None = Field(
        default=None, description="The last savepointTriggerNonce acted upon (taken, or failed)."
    )
    last_periodic_savepoint_at: datetime | None = Field(
        default=None,
        description="When the last periodic savepoint was asked for: the next one is due an interval later.",
    )
    retired_checkpoint_directories: list[str] = Field(
        default_factory=list,
        description="Checkpoint directories of earlier runs that a fresh start (a stateless upgrade, a "
        "restore from initialSavepoint) left behind, recorded before the new run starts: deleted once the "
        "new run is Running (and, with upgradeRollback, past its window), then dropped from here.",
    )
    savepoints_disposing: list[str] = Field(
        default_factory=list,
        description="Ids of savepoints being disposed of, recorded before any of their data is deleted: a "
        "savepoint listed here is given up and must not be restored from. Its reference leaves "
        "status.savepoints (and its id this list) once its data is seen gone; a new leader finishes what "
        "another left half done.",
    )
    last_failure: Failure | None = Field(default=None, description="The most recent failed attempt.")
    failures: list[Failure] = Field(
        default_factory=list,
        description="The last spec.failureHistory failed attempts, newest last: why each ended, when, and "
        "its exit code.",
    )
    last_rollback: RollbackRef | None = Field(
        default=None,
        description="The most recent damaged checkpoint a driver gave up committed batches of (rolled back).",
    )
    restarts: RestartState = Field(default_factory=RestartState, description="Restart strategy bookkeeping.")
    last_stable_spec: StableSpec | None = Field(
        default=None,
        description="With upgradeRollback enabled: the newest spec whose attempt ran for windowSeconds.",
    )
    upgrade_rollback: UpgradeRollback | None = Field(
        default=None, description="The spec change last rolled back to lastStableSpec, and why."
    )
    attempt_submitted_at: datetime | None = Field(
        default=None, description="When the current attempt was submitted."
    )
    placement: Placement | None = Field(
        default=None,
        description="Where the executors ran: localRecovery sends the next attempt's back there.",
    )
    attempt_started_at: datetime | None = Field(
        default=None, description="When the current driver started running."
    )
    stop_requested_at: datetime | None = Field(
        default=None, description="When a stop (with checkpoint or savepoint) was asked of the driver."
    )
    result: JobResult | None = Field(default=None, description="Set once the job has ended for good.")


class FaultTolerantSparkJob(_Model):
    """A PySpark application the operator keeps running with checkpoints, savepoints and HA."""

    model_config = ConfigDict(extra="ignore")
    spec: JobSpec = Field(description="What to run and how to keep it running.")
    status: JobStatus = Field(default_factory=JobStatus, description="What the operator observed.")


def _positive_number(text: str) -> bool:
    try:
        return 0 < float(text) < float("inf")
    except ValueError:
        return False


ConcurrencyPolicy = Literal["Forbid", "Replace", "Allow"]


class ScheduleSpec(_Model):
    """What to run (a FaultTolerantSparkJob's spec) and when (docs/concepts.md, "Scheduled runs")."""

    schedule: str = Field(
        min_length=1,
        max_length=200,
        description="When to start a run: cron's five fields (minute hour day-of-month month day-of-week; "
        "*, a-b, /step, lists, jan-dec, sun-sat) or @yearly, @monthly, @weekly, @daily, @hourly.",
    )
    time_zone: str = Field(
        default="UTC", max_length=64, description="The IANA time zone the schedule is read in (Europe/Paris)."
    )
    concurrency_policy: ConcurrencyPolicy = Field(
        default="Forbid",
        description="A run due while an earlier one has not finished: Forbid (skip it), Replace (delete the "
        "earlier one, its result Cancelled, then start it) or Allow (start it beside).",
    )
    suspend: bool = Field(default=False, description="Start no run while true; runs in progress go on.")
    starting_deadline_seconds: int | None = Field(
        default=None,
        ge=1,
        le=YEAR_SECONDS,
        description="A run found due later than this (no operator leader at its time) is not started: "
        "an Event says so. Unset: the latest such run is started once, however late.",
    )
    successful_runs_history_limit: int = Field(
        default=3, ge=0, le=100, description="Succeeded runs kept; the oldest beyond are deleted."
    )
    failed_runs_history_limit: int = Field(
        default=1, ge=0, le=100, description="Failed runs kept; the oldest beyond are deleted."
    )
    template: JobSpec = Field(description="The spec of each run, a FaultTolerantSparkJob <name>-<minute>.")

    @model_validator(mode="after")
    def _readable_schedule(self) -> ScheduleSpec:
        try:
            CronSchedule.parse(self.schedule, self.time_zone)
        except ValueError as error:
            raise ValueError(f"spec.schedule: {error}") from None
        return self

    def cron(self) -> CronSchedule:
        return CronSchedule.parse(self.schedule, self.time_zone)


class ScheduleStatus(_Model):
    """What the operator scheduled; written only by the operator."""

    observed_generation: int | None = Field(default=None, description="The spec generation last acted upon.")
    conditions: list[Condition] = Field(
        default_factory=list,
        description="Ready: False with reason InvalidSpec while the spec cannot be scheduled.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )
    last_schedule_time: datetime | None = Field(
        default=None, description="The schedule's time last acted on (a run started, skipped or missed)."
    )
    next_schedule_time: datetime | None = Field(default=None, description="When the next run is due.")
    last_run: str | None = Field(default=None, description="The run last started.")
    active: list[str] = Field(default_factory=list, description="Runs that have not finished.")


class ScheduledSparkJob(_Model):
    """FaultTolerantSparkJobs started on a cron schedule."""

    model_config = ConfigDict(extra="ignore")
    spec: ScheduleSpec = Field(description="What to run, and when.")
    status: ScheduleStatus = Field(default_factory=ScheduleStatus, description="What the operator scheduled.")
