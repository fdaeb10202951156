"""The operator ↔ driver protocol: every name both sides must agree on, in one place.

The operator writes a driver pod (ftspark.manifests) and reads it back (ftspark.reconcile.driver_pods); the
driver runtime (ftspark.runtime) reads its environment, polls its pod for control requests and answers on
it. A change here is a change of the protocol: both sides, and the tools that play either side in tests,
import these names instead of spelling them.

    operator → driver   the environment (DriverEnv), the control annotation (ControlRequest)
    driver → operator   the savepoint answer and rollback annotations, the exit code (Exit) and the
                        termination message (runtime/termination.py documents its JSON)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import IntEnum, StrEnum
from typing import Literal, assert_never, cast, get_args

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from ftspark import API_GROUP, API_VERSION, KIND

# Every object that belongs to a job (driver pods, services, HA ConfigMaps) carries this label with its name.
JOB_LABEL = "ftspark.io/job"
ATTEMPT_LABEL = "ftspark.io/attempt"
ROLE_LABEL = "ftspark.io/role"
# On a cluster-scoped object of a job (localRecovery's PersistentVolume): the job's namespace.
JOB_NAMESPACE_LABEL = "ftspark.io/namespace"
MANAGED = {"app.kubernetes.io/managed-by": "ftspark"}  # the label ftspark's own objects carry
# A hot standby driver (docs/hot-standby.md) carries both while it stands by: it is not the job's driver until
# the operator's promotion removes the first, and the second says which spec it was made for.
STANDBY_LABEL = "ftspark.io/standby"
SPEC_HASH_LABEL = "ftspark.io/spec-hash"
# On the job's current driver pod, never on a standby's until it is promoted: the UI Service selects it.
SERVING_LABEL = "ftspark.io/serving"
# On a driver pod (and standby) whose job wants a disruption budget: the namespace's one selects it.
DISRUPTION_BUDGET_LABEL = "ftspark.io/disruption-budget"
# On a namespace whose pods may reach jobs' Spark UIs (an ingress controller's): the drivers' NetworkPolicy.
UI_ACCESS_LABEL = "ftspark.io/ui-access"
# Spark's own executor labels: every executor pod of an application carries both.
SPARK_APP_SELECTOR_LABEL = "spark-app-selector"
SPARK_ROLE_LABEL = "spark-role"
SPARK_EXEC_ID_LABEL = "spark-exec-id"  # Spark numbers each executor pod of an application

CONTROL_ANNOTATION = "ftspark.io/control"  # operator → driver: one ControlRequest
CONTROL_REFUSED_ANNOTATION = "ftspark.io/control-refused"  # driver → operator: a request not obeyed, and why
SAVEPOINT_ANNOTATION = "ftspark.io/savepoint"  # driver → operator: the savepoint's outcome (JSON)
ROLLBACK_ANNOTATION = "ftspark.io/rollbacks"  # driver → operator: checkpoint rollbacks at start (JSON list)
# A savepoint's manifest, <storage>/savepoints/<id>/_manifest.json: the driver writes it last, and its "job"
# (namespace/name) is what lets the operator dispose of the savepoint, which deletes it last.
SAVEPOINT_MANIFEST = "_manifest.json"

DRIVER_CONTAINER = "driver"
EXECUTOR_CONTAINER = "executor"  # the executors' pod template names it (Spark takes its first container)
DRIVER_SERVICE_ACCOUNT = "ftspark-driver"
DRIVER_PORT = 7078
BLOCK_MANAGER_PORT = 7079
UI_PORT = 4040
# The driver runtime answers GET /healthz here (runtime/liveness.py): the kubelet's liveness probe of the
# driver container (ftspark/manifests.py).
HEALTH_PORT = 7070
HEALTH_PATH = "/healthz"
READY_PATH = "/readyz"  # 200 once the SparkSession is up: a standby's readiness probe
IN_CLUSTER_MASTER = "k8s://https://kubernetes.default.svc"
# What the operator and the driver runtime agree on: the driver's environment (DriverEnv), its pod's labels
# and annotations, the control requests, the termination message, the HA records. The operator sets it in
# the driver's environment and the runtime in the job's image starts only on its own number, so an image
# built with another release of ftspark fails at once and says so (reason RuntimeMismatch), rather than
# running on names it reads otherwise. Raised with any change either side would misread.
PROTOCOL_VERSION = 1  # the runtime prefers KUBERNETES_SERVICE_HOST/PORT

RestoreFrom = Literal["nothing", "latest-checkpoint", "initial-savepoint"]


class DriverEnv(StrEnum):
    """The driver's environment as the operator sets it (runtime/config.py says what each one means)."""

    PROTOCOL = "FTSPARK_PROTOCOL"  # PROTOCOL_VERSION, the operator's
    JOB = "FTSPARK_JOB"
    JOB_UID = "FTSPARK_JOB_UID"
    ATTEMPT = "FTSPARK_ATTEMPT"
    POD_NAME = "FTSPARK_POD_NAME"
    CHECKPOINT_LOCATION = "FTSPARK_CHECKPOINT_LOCATION"
    RESTORE_FROM = "FTSPARK_RESTORE_FROM"
    RESTORE_BATCH = "FTSPARK_RESTORE_BATCH"
    INITIAL_SAVEPOINT = "FTSPARK_INITIAL_SAVEPOINT"
    STORAGE = "FTSPARK_STORAGE"
    RETAINED_CHECKPOINTS = "FTSPARK_RETAINED_CHECKPOINTS"
    DEPS_MAX_FILE_MIB = "FTSPARK_DEPS_MAX_FILE_MIB"  # spec.deps.maxFileMiB
    STOP_TIMEOUT = "FTSPARK_STOP_TIMEOUT"
    PROGRESS_TIMEOUT = "FTSPARK_PROGRESS_TIMEOUT"
    SPARK_CONF = "FTSPARK_SPARK_CONF"
    LOCAL_RECOVERY_JAR = "FTSPARK_LOCAL_RECOVERY_JAR"
    HA_STORE = "FTSPARK_HA_STORE"  # the operator's own setting of the same name, passed on
    HA_S3_ROOT = "FTSPARK_HA_S3_ROOT"
    TERM_FLOOR = "FTSPARK_TERM_FLOOR"  # <namespace>/<name> of the operator's term floor ConfigMap
    CHECKPOINT_KEY_FILE = "FTSPARK_CHECKPOINT_KEY_FILE"  # the job's checkpoint key (adapters.seal), a file
    HEALTH_PORT = "FTSPARK_HEALTH_PORT"
    STANDBY = "FTSPARK_STANDBY"  # "1": a standby, started before it is needed, that waits to be promoted
    STANDBY_EXECUTORS = "FTSPARK_STANDBY_EXECUTORS"  # how many executors a standby keeps up and warm
    BIND_ADDRESS = "SPARK_DRIVER_BIND_ADDRESS"


class RuntimeEnv(StrEnum):
    """The driver runtime's own settings, which the operator never sets: a pod template (or a test harness)
    may, and spec.env may too (unlike a DriverEnv name, which the job policy refuses there)."""

    LEASE_DURATION = "FTSPARK_LEASE_DURATION"  # the driver Lease's timings, seconds
    LEASE_RENEW_DEADLINE = "FTSPARK_LEASE_RENEW_DEADLINE"
    LEASE_RETRY_PERIOD = "FTSPARK_LEASE_RETRY_PERIOD"
    LEASE_ACQUIRE_TIMEOUT = "FTSPARK_LEASE_ACQUIRE_TIMEOUT"
    CONTROL_INTERVAL = "FTSPARK_CONTROL_INTERVAL"  # seconds between reads of its own pod's control requests
    RESULTS_NAMESPACE = "FTSPARK_RESULTS_NAMESPACE"  # where the job results are (default: the job's)
    TERMINATION_LOG = "FTSPARK_TERMINATION_LOG"  # default /dev/termination-log
    SPARK_JARS_DIR = "FTSPARK_SPARK_JARS_DIR"  # the S3A jars (default: the image's, else the dev cache)
    DEV_CACHE = "FTSPARK_CACHE"  # a development machine's cache (default ~/.cache/ftspark): its S3A jars


HaStoreKind = Literal["configmaps", "s3"]


@dataclass(frozen=True)
class HaStoreConfig:
    """Where an installation keeps its HA records: ConfigMaps, or S3 objects under s3_root
    (s3://<bucket>/<prefix>, one root per installation). The operator and its drivers use the same."""

    kind: HaStoreKind = "configmaps"
    s3_root: str = ""

    def __post_init__(self) -> None:
        if self.kind not in get_args(HaStoreKind):
            raise ValueError(f"the HA store is configmaps or s3, not {self.kind!r}")
        bucket = self.s3_root.removeprefix("s3://").partition("/")[0]
        if self.kind == "s3" and not (self.s3_root.startswith("s3://") and bucket):
            raise ValueError(
                f"the s3 HA store needs its root as s3://<bucket>/<prefix>, not {self.s3_root!r}"
            )
        if self.kind == "configmaps" and self.s3_root:
            raise ValueError(f"an HA S3 root ({self.s3_root}) is set, but the HA store is configmaps")


class TerminationMessage(BaseModel):
    """The driver's last words, in its pod's termination message (at most 4096 bytes, JSON)."""

    model_config = ConfigDict(populate_by_name=True, alias_generator=to_camel)

    reason: str  # one word, e.g. ScriptFailed, LeaseLost, NoRestorableCheckpoint
    exit_code: int
    message: str = ""
    last_committed: dict[str, int] = Field(default_factory=dict)  # query → batch
    rollbacks: list[str] = Field(default_factory=list)


# The reason of a driver that found no complete batch to restore: retrying cannot help, a user must choose
# (a savepoint, or a fresh start), so it is reported as a manual restore, not restarted.
NO_RESTORABLE_CHECKPOINT = "NoRestorableCheckpoint"
# The reasons of an exit 0 that answered a stop request (the script did not finish): never a job's result.
STOPPED = "Stopped"
STOP_TIMED_OUT = "StopTimedOut"
# The reason of a driver that ended itself because a query showed no sign of life for the progress timeout.
NO_PROGRESS = "NoProgress"
# The progress timeout passed with no executor of the attempt running: not a hung driver but executors that
# never started (no node fits them, their image, a quota); the message says what their pods wait for.
EXECUTORS_NOT_STARTED = "ExecutorsNotStarted"


class Exit(IntEnum):
    """The driver's exit codes, one per kind of ending."""

    FINISHED = 0  # the script returned (every query ended) or a requested stop completed
    SCRIPT_FAILED = 1  # the user's script raised
    BAD_INPUT = 2  # an unusable application file, bad environment, unreachable S3, no restorable checkpoint
    FENCED_OUT = 3  # lost the driver Lease, or a newer attempt fenced the checkpoint store
    NO_PROGRESS = 4  # a query silent for the progress timeout (hung, or no executor): restarted
    TERMINATED = 143  # SIGTERM (its pod deleted or evicted): ended at once, its JVM killed first


ControlAction = Literal["stop", "savepoint", "stop-savepoint", "promote"]
CONTROL_ACTIONS: tuple[ControlAction, ...] = get_args(ControlAction)


# An operator term is its Lease's leaseTransitions, an int32 in the Lease API: a higher one could never be
# written to the Lease, so a term floor above it would keep every replica from leading.
MAX_TERM = 2**31 - 1


def parse_term(text: str) -> int | None:
    """A term as written (decimal digits, 0 to MAX_TERM); None for anything else."""
    if not (text.isascii() and text.isdigit()) or len(text) > len(str(MAX_TERM)):
        return None
    term = int(text)
    return term if term <= MAX_TERM else None


# <action>@<argument>;term=<operator term>: no ';' or '@' in an argument (times and savepoint ids have none).
_CONTROL_REQUEST = re.compile(r"(?P<action>[a-z-]+)@(?P<argument>[^;@]*)(?:;term=(?P<term>[0-9]+))?")


@dataclass(frozen=True)
class ControlRequest:
    """The control annotation holds one request, `<action>@<argument>;term=<term>`; a new value is a new
    request.

    stop@<iso time>       stop with a final checkpoint: let the running batch commit, stop, exit 0
    savepoint@<id>        copy the latest committed batch of every query to <storage>/savepoints/<id>/
    stop-savepoint@<id>   both: stop at the batch boundary, take the savepoint, exit 0
    promote@<batch>       a standby driver takes over, restoring batch <batch> (empty: the latest)

    term: the fencing term of the operator leader that wrote it. The driver obeys only a request whose term
    is at least the operator's term floor (a deposed leader's is older); one without a term (the format
    before terms) is parsed with term None, and refused. Cancel needs no request: it is the deletion of the
    pod."""

    action: ControlAction
    argument: str
    term: int | None = None

    def __str__(self) -> str:
        term = "" if self.term is None else f";term={self.term}"
        return f"{self.action}@{self.argument}{term}"

    @staticmethod
    def parse(value: str) -> ControlRequest | None:
        matched = _CONTROL_REQUEST.fullmatch(value)
        if matched is None or matched["action"] not in CONTROL_ACTIONS:
            return None
        known, argument = cast(ControlAction, matched["action"]), matched["argument"]
        term = None if matched["term"] is None else parse_term(matched["term"])
        if matched["term"] is not None and term is None:
            return None  # a term no Lease can hold
        return ControlRequest(known, argument, term) if argument or not _names_a_savepoint(known) else None


def _names_a_savepoint(action: ControlAction) -> bool:
    """Its argument is the savepoint's id, so it cannot be empty (a stop's time only tells requests apart)."""
    match action:
        case "savepoint" | "stop-savepoint":
            return True
        case "stop" | "promote":
            return False
        case _:
            assert_never(action)


def term_floor_name(lease_name: str) -> str:
    """The ConfigMap beside the operator's Lease that holds the highest term ever handed out."""
    return f"{lease_name}-term"


def record_key_name(lease_name: str) -> str:
    """The Secret beside the operator's Lease that holds the key its HA records are sealed with."""
    return f"{lease_name}-record-key"


def driver_pod_name(job_name: str, attempt: int) -> str:
    """The attempt's driver pod, its Service and NetworkPolicy, and the prefix of its other objects."""
    return f"{job_name}-{attempt}-driver"


def job_owner_reference(job_name: str, job_uid: str) -> dict[str, str]:
    """An ownerReference to the job: what carries it is garbage-collected with the job."""
    return {"apiVersion": f"{API_GROUP}/{API_VERSION}", "kind": KIND, "name": job_name, "uid": job_uid}


def driver_lease_name(job_name: str) -> str:
    """The job's driver Lease: held by the attempt whose queries run (ftspark.runtime.fencing)."""
    return f"{job_name}-driver"


def driver_logs_name(job_name: str) -> str:
    """The job's ConfigMap that keeps the end of each ended attempt's driver log (`ftspark logs`)."""
    return f"{job_name}-driver-logs"


def driver_lease_holder(pod_name: str, attempt: int) -> str:
    """The identity an attempt's driver holds the Lease as."""
    return f"{pod_name}@{attempt}"


def attempt_secret_name(driver_pod: str) -> str:
    """The attempt's Secret: a new Spark RPC key for every attempt, and the executors' pod template. Named
    for its first content, and kept so: an operator upgraded during an attempt deletes it by this name."""
    return f"{driver_pod}-rpc"


def spark_app_id(job_uid: str, attempt: int) -> str:
    """Spark labels every executor pod spark-app-selector=<this>, so an attempt's executors can be found."""
    return f"{job_app_prefix(job_uid)}{attempt}"


def job_app_prefix(job_uid: str) -> str:
    """What the Spark application ids of every attempt of the job start with."""
    return f"ftspark-{job_uid[:8]}-"


def executor_selector(app_id: str) -> str:
    return f"{SPARK_APP_SELECTOR_LABEL}={app_id},{SPARK_ROLE_LABEL}=executor"


def ui_service_name(job_name: str) -> str:
    """The Service in front of the job's Spark UI (spec.ui), and its Ingress."""
    return f"{job_name}-ui"
