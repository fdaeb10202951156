"""The Kubernetes objects of one driver attempt, as plain manifests (docs/architecture.md, "Objects"): a Pod
running our driver runtime (spark-submit in client mode inside it), the attempt's Secret (Spark's RPC key and
the executors' pod template), a NetworkPolicy in front of the driver and its PodDisruptionBudget, with what
they need before them (the drivers' identity in the namespace, the job's local-recovery key, an admission
probe). `attempt_objects` gives them all as one ordered value. Names are deterministic, so creating them
twice is harmless and a new leader finds them. Pure: the Kubernetes adapter sends them without building
anything; the names both sides agree on are in ftspark.protocol.
"""

from __future__ import annotations

import base64
import copy
import json
from dataclasses import dataclass, field
from typing import Any, assert_never

from ftspark.domain.deps import PY_FILES
from ftspark.domain.models import DRIVER_REQUEST_CORES, UI_ENABLED_KEY, EnvVar, JobSpec, spark_size_mib
from ftspark.protocol import (
    ATTEMPT_LABEL,
    BLOCK_MANAGER_PORT,
    DISRUPTION_BUDGET_LABEL,
    DRIVER_CONTAINER,
    DRIVER_PORT,
    DRIVER_SERVICE_ACCOUNT,
    EXECUTOR_CONTAINER,
    HEALTH_PATH,
    HEALTH_PORT,
    IN_CLUSTER_MASTER,
    JOB_LABEL,
    JOB_NAMESPACE_LABEL,
    MANAGED,
    PROTOCOL_VERSION,
    READY_PATH,
    ROLE_LABEL,
    SERVING_LABEL,
    SPARK_APP_SELECTOR_LABEL,
    SPARK_ROLE_LABEL,
    SPEC_HASH_LABEL,
    STANDBY_LABEL,
    UI_ACCESS_LABEL,
    UI_PORT,
    DriverEnv,
    HaStoreConfig,
    RestoreFrom,
    attempt_secret_name,
    driver_pod_name,
    job_owner_reference,
    spark_app_id,
    ui_service_name,
)

Manifest = dict[str, Any]

EXECUTOR_TEMPLATE_DIR = "/etc/ftspark/executor"
LOCAL_STATE_VOLUME = "spark-local-dir-ftspark"
# The init step that opens the job's node directory to the executor's user (see local_state_dir_opener).
LOCAL_STATE_OPENER = "local-state-dir"
LOCAL_RECOVERY_FS = "io.ftspark.localrecovery.LocalRecoveryFileSystem"
LOCAL_RECOVERY_AFS = "io.ftspark.localrecovery.LocalRecoveryFs"
LOCAL_RECOVERY_AFS_KEY = "spark.hadoop.fs.AbstractFileSystem.s3a.impl"
LOCAL_RECOVERY_JAR = (
    "/opt/ftspark/jars/ftspark-local-recovery.jar"  # in the Spark image; spec.env may override
)
# The job's MAC key for its node-local copies (jvm/local-recovery): a per-job Secret, a file in the executors.
LOCAL_RECOVERY_KEY_VOLUME = "ftspark-local-recovery-key"
LOCAL_RECOVERY_KEY_DIR = "/etc/ftspark/local-recovery"
LOCAL_RECOVERY_KEY = "key"  # the Secret's data key, so the file's name
LOCAL_RECOVERY_KEY_BYTES = 32
LOCAL_RECOVERY_DIR_KEY = "spark.hadoop.fs.ftspark.local-recovery.dir"
LOCAL_RECOVERY_KEY_FILE_KEY = "spark.hadoop.fs.ftspark.local-recovery.key.file"
HOSTNAME_LABEL = "kubernetes.io/hostname"
# Pod Security "restricted" for drivers and executors by default (the Spark image runs as uid 185), and a
# read-only root filesystem; a job's podTemplate may override any field, within what its namespace's Pod
# Security level admits. fsGroup: a volume a provisioner made root's (EBS, PD, most CSI drivers; not hostPath)
# becomes the Spark group's and writable by it; OnRootMismatch walks a big volume only when its top is not.
SPARK_GID = 185  # the Spark image's group (images/spark-py/Dockerfile)
POD_SECURITY_CONTEXT: Manifest = {
    "runAsNonRoot": True,
    "seccompProfile": {"type": "RuntimeDefault"},
    "fsGroup": SPARK_GID,
    "fsGroupChangePolicy": "OnRootMismatch",
}
CONTAINER_SECURITY_CONTEXT: Manifest = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "readOnlyRootFilesystem": True,
}
# What Spark and our runtime write, on emptyDirs (docs/architecture.md, "Pods and the driver's rights"):
# /tmp is java.io.tmpdir, the driver's spark.local.dir, Python's tempfile (the fetched application files) and
# where the JVM unpacks native libraries (snappy, zstd, RocksDB); the Spark image's home is the working
# directory, where executors fetch the job's files, and holds ~/.ivy2 for spark.jars.packages.
WORK_DIR = "/home/spark"
SCRATCH_VOLUMES = (("ftspark-tmp", "/tmp"), ("ftspark-home", WORK_DIR))
# Spark's RPC secret, from the attempt's Secret and never in a pod spec: the driver reads the file
# (spark.authenticate.secret.file; its key is the file's bytes in base64), executors read that key from
# _SPARK_AUTH_SECRET, the first place they look, set by reference. Spark's executors only read a secret
# file when they know their master is Kubernetes, which they do not; and with no file Spark would put a
# generated secret into the executor pods' plain env.
# The driver container of a job with liveness checks on: a container frozen as a whole (runtime/liveness.py)
# stops answering, and after 3 unanswered probes 10 s apart (30-40 s) the kubelet kills it, at once: a frozen
# process cannot shut down in order anyway. The delay covers a start on a busy node (the endpoint comes up
# before Spark, within seconds). Kubelet probes come from the node: NetworkPolicies do not apply to them.
DRIVER_LIVENESS_PROBE: Manifest = {
    "httpGet": {"path": HEALTH_PATH, "port": HEALTH_PORT},
    "initialDelaySeconds": 20,
    "periodSeconds": 10,
    "timeoutSeconds": 5,
    "failureThreshold": 3,
    "terminationGracePeriodSeconds": 1,
}
# A standby's readiness: its SparkSession is up (runtime/liveness.py). Checked often, as a promotion waits
# for it; a failure only keeps the standby from being promoted.
STANDBY_READINESS_PROBE: Manifest = {
    "httpGet": {"path": READY_PATH, "port": HEALTH_PORT},
    "periodSeconds": 2,
    "timeoutSeconds": 2,
    "failureThreshold": 1,
}
RPC_SECRET_VOLUME = "ftspark-rpc"
RPC_SECRET_DIR = "/etc/ftspark/rpc"
RPC_SECRET_FILE, RPC_SECRET_KEY = "secret", "key"
# The job's checkpoint key (adapters.seal): the driver seals its job's checkpoint record with it.
CHECKPOINT_KEY_VOLUME = "ftspark-checkpoint-key"
CHECKPOINT_KEY_DIR = "/etc/ftspark/checkpoint-key"
CHECKPOINT_KEY_FILE = "checkpoint-key"
SPARK_AUTH_SECRET_ENV = "_SPARK_AUTH_SECRET"
# Spark's defaults for the memory a pod needs beyond the heap (spark.driver.memoryOverhead*).
OVERHEAD_FACTOR = 0.10
MIN_OVERHEAD_MIB = 384
EXECUTOR_TEMPLATE_FILE = "pod-template.json"  # JSON is YAML: Spark reads it as its pod template file


@dataclass(frozen=True)
class AttemptPlan:
    namespace: str
    job_name: str
    job_uid: str
    attempt: int
    spec: JobSpec
    checkpoint_location: str
    restore_from: RestoreFrom
    restore_batch_id: int | None = None  # the newest verified checkpoint; later batches are rolled back
    local_state_nodes: tuple[str, ...] = ()  # localRecovery: nodes holding the previous executors' state
    ha_store: HaStoreConfig = field(default_factory=HaStoreConfig)  # the installation's: for checkpoints
    # <namespace>/<name> of the operator's term floor ConfigMap: the driver obeys no control request of an
    # older term (a deposed leader's).
    term_floor: str = ""
    # A hot standby for this attempt (docs/hot-standby.md): started before it is needed, promoted by a control
    # request; made for the spec of spec_hash (lifecycle.spec_hash), never promoted for another.
    standby: bool = False
    standby_executors: int = 0  # a standby's warm executors
    spec_hash: str = ""


@dataclass(frozen=True)
class AttemptKeys:
    """An attempt's secret bytes, made by the caller: randomness and the installation's seal are I/O."""

    rpc: bytes  # Spark's RPC key, new for every attempt
    checkpoint: bytes  # the job's checkpoint key (the driver's only: executors never get it)
    local_recovery: bytes  # localRecovery's MAC key: kept only by the attempt that creates the job's Secret


@dataclass(frozen=True)
class AttemptObjects:
    """One attempt's writes, in the order they are made, each manifest with its namespace."""

    identity: tuple[Manifest, ...]  # the drivers' ServiceAccount and rights: made once, an existing one kept
    admission_probe: Manifest | None  # localRecovery: an executor pod, dry-run before anything is written
    # localRecovery, made once per job and kept when they exist: the job's node directory as a hostPath
    # PersistentVolume (cluster-scoped) bound to the job's claim, which its executors mount; the MAC key.
    local_state_volume: Manifest | None
    job_objects: tuple[Manifest, ...]
    # The namespace's one PodDisruptionBudget, which selects every driver pod that wants one: made once per
    # namespace and kept (none when the job wants none).
    drivers_budget: Manifest | None
    # The Secret (what the pod mounts: a missing volume would keep it from starting), the NetworkPolicy
    # (the driver is never reachable by strangers, not even for a moment), the Pod. When the API server
    # refuses one (a user's podTemplate can make the pod invalid), those before it are undone.
    attempt: tuple[Manifest, ...]


def attempt_objects(plan: AttemptPlan, keys: AttemptKeys) -> AttemptObjects:
    recovery = plan.spec.local_recovery.enabled
    attempt = (attempt_secret(plan, keys.rpc, keys.checkpoint), driver_network_policy(plan), driver_pod(plan))
    return AttemptObjects(
        identity=driver_identity(plan.namespace, plan.term_floor),
        admission_probe=_placed(plan.namespace, executor_admission_probe(plan)) if recovery else None,
        local_state_volume=local_state_volume(plan) if recovery else None,
        job_objects=tuple(
            _placed(plan.namespace, manifest)
            for manifest in (
                *(_local_state_objects(plan, keys) if recovery else ()),
                *ui_objects(plan),
            )
        ),
        drivers_budget=drivers_disruption_budget(plan.namespace)
        if plan.spec.driver.disruption_budget
        else None,
        attempt=tuple(_placed(plan.namespace, manifest) for manifest in attempt),
    )


def _local_state_objects(plan: AttemptPlan, keys: AttemptKeys) -> tuple[Manifest, ...]:
    return (local_state_claim(plan), local_recovery_secret(plan, keys.local_recovery))


def _placed(namespace: str, manifest: Manifest) -> Manifest:
    return {**manifest, "metadata": {**manifest["metadata"], "namespace": namespace}}


# What a driver asks of the API server in its namespace, measured (e2e/test_security.py, with the API
# server's audit log; docs/architecture.md, "The driver's rights"): Spark's Kubernetes client creates,
# watches, lists and deletes (by name) its executor pods and reads its own; our runtime reads and annotates
# its pod, takes its Lease and writes checkpoint pointers into the ConfigMap the operator made. Nothing else:
# no Services, Secrets or PVCs, and no deletecollection (Spark's clean-up at stop is refused; its executors
# end with the driver and go with its pod).
DRIVER_RULES: tuple[Manifest, ...] = (
    {
        "apiGroups": [""],
        "resources": ["pods"],
        "verbs": ["get", "list", "watch", "create", "delete", "patch"],
    },
    {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "update"]},
    {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "create", "update"]},
)


def driver_identity(namespace: str, term_floor: str) -> tuple[Manifest, ...]:
    """The drivers' ServiceAccount in a namespace of jobs with its Role and RoleBinding, and `get` on
    exactly the operator's term floor ConfigMap (`<namespace>/<name>`): one Role there, a RoleBinding per
    namespace of jobs."""
    floor_namespace, _, floor = term_floor.partition("/")
    floor_role = f"{DRIVER_SERVICE_ACCOUNT}-term-floor"
    drivers = [{"kind": "ServiceAccount", "name": DRIVER_SERVICE_ACCOUNT, "namespace": namespace}]
    floor_rule = {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": [floor], "verbs": ["get"]}

    def managed(kind: str, name: str, in_namespace: str, **fields: Any) -> Manifest:
        api = "v1" if kind == "ServiceAccount" else "rbac.authorization.k8s.io/v1"
        metadata = {"name": name, "namespace": in_namespace, "labels": dict(MANAGED)}
        return {"apiVersion": api, "kind": kind, "metadata": metadata, **fields}

    def role_ref(name: str) -> Manifest:
        return {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name}

    return (
        managed("ServiceAccount", DRIVER_SERVICE_ACCOUNT, namespace),
        managed("Role", DRIVER_SERVICE_ACCOUNT, namespace, rules=copy.deepcopy(list(DRIVER_RULES))),
        managed(
            "RoleBinding",
            DRIVER_SERVICE_ACCOUNT,
            namespace,
            roleRef=role_ref(DRIVER_SERVICE_ACCOUNT),
            subjects=drivers,
        ),
        managed("Role", floor_role, floor_namespace, rules=[floor_rule]),
        managed(
            "RoleBinding",
            f"{floor_role}-{namespace}",
            floor_namespace,
            roleRef=role_ref(floor_role),
            subjects=drivers,
        ),
    )


def _owner(plan: AttemptPlan) -> Manifest:
    # Deleting the job garbage-collects its drivers (and, through Spark's ownerReference, their executors).
    return {
        **job_owner_reference(plan.job_name, plan.job_uid),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _labels(plan: AttemptPlan) -> dict[str, str]:
    return {JOB_LABEL: plan.job_name, ATTEMPT_LABEL: str(plan.attempt), ROLE_LABEL: "driver"}


# Spark requires spark.kubernetes.executor.podNamePrefix (<name>-<attempt>) to be a DNS label of at most 47
# characters (its pods are <prefix>-exec-<n>); 40 leaves room for a six-digit attempt number.
MAX_JOB_NAME_LENGTH = 40


SNAPSHOT_CADENCE = {
    "spark.sql.streaming.stateStore.maintenanceInterval": "15s",
    "spark.sql.streaming.stateStore.minDeltasForSnapshot": "5",
}


def spark_conf(plan: AttemptPlan) -> dict[str, str]:
    """Spark settings that make a client-mode driver inside our pod drive executors on Kubernetes."""
    spec = plan.spec
    pod = driver_pod_name(plan.job_name, plan.attempt)
    rpc_key = f"{_attempt_secret_name(plan)}:{RPC_SECRET_KEY}"
    conf = {
        "spark.master": IN_CLUSTER_MASTER,
        "spark.submit.deployMode": "client",
        "spark.app.name": plan.job_name,
        "spark.app.id": spark_app_id(plan.job_uid, plan.attempt),
        "spark.kubernetes.namespace": plan.namespace,
        "spark.kubernetes.driver.pod.name": pod,
        "spark.kubernetes.executor.podNamePrefix": f"{plan.job_name}-{plan.attempt}",
        # The job's label on its executors: the operator finds (and, under its admission policy, may delete)
        # the executors an earlier attempt left behind before it starts the next one.
        f"spark.kubernetes.executor.label.{JOB_LABEL}": plan.job_name,
        "spark.kubernetes.container.image": spec.image,
        "spark.kubernetes.container.image.pullPolicy": spec.image_pull_policy,
        "spark.kubernetes.authenticate.driver.serviceAccountName": DRIVER_SERVICE_ACCOUNT,
        "spark.driver.port": str(DRIVER_PORT),
        "spark.driver.blockManager.port": str(BLOCK_MANAGER_PORT),
        "spark.driver.cores": str(spec.driver.cores),
        "spark.driver.memory": spec.driver.memory,
        # With dynamic allocation Spark starts max(this, minExecutors, initialExecutors): left to the latter.
        **(
            {}
            if spec.dynamic_allocation.enabled
            else {"spark.executor.instances": str(spec.executor.instances)}
        ),
        "spark.executor.cores": str(spec.executor.cores),
        "spark.executor.memory": spec.executor.memory,
        # Spark reads the shuffle files of an executor with the same address straight from its own disk, but
        # each executor pod's local dirs are its own volumes: pods sharing an address (hostNetwork, or pods
        # that take their node's address) would find no file there and fail the stage. Pods with addresses of
        # their own never take that path, so this costs them nothing.
        "spark.shuffle.readHostLocalDisk": "false",
        # A restart reads each state partition's newest snapshot and every delta file (or changelog) after
        # it, a few S3 requests each. Spark snapshots a partition at most once a minute, once 10 deltas piled
        # up; more often keeps a restart's reading short, for more snapshot writes. The figures, and how a
        # job with a large state trades it back: docs/concepts.md, "State stores".
        **SNAPSHOT_CADENCE,
        "spark.sql.streaming.checkpointLocation": plan.checkpoint_location,
        # Only holders of the attempt's Secret talk to the driver and executors; a user may add
        # spark.network.crypto.enabled=true for AES on the wire.
        "spark.authenticate": "true",
        "spark.authenticate.secret.file": f"{RPC_SECRET_DIR}/{RPC_SECRET_FILE}",
        f"spark.kubernetes.executor.secretKeyRef.{SPARK_AUTH_SECRET_ENV}": rpc_key,
        # The UI has no authentication of its own: off unless spec.ui (kill links off) or sparkConf says.
        UI_ENABLED_KEY: "false",
        **spec.ui.spark_conf(ui_path(plan.namespace, plan.job_name, spec)),
        # Calls the driver's Role does not allow (DRIVER_RULES), left out: a driver
        # has no Service (executors reach it at its pod IP); executors run the driver's image, conf dir
        # included; owning and reusing PVCs is for on-demand claims, which drivers may not create.
        "spark.kubernetes.driver.service.deleteOnTermination": "false",
        "spark.kubernetes.executor.disableConfigMap": "true",
        "spark.kubernetes.driver.ownPersistentVolumeClaim": "false",
        "spark.kubernetes.driver.reusePersistentVolumeClaim": "false",
        # spec.env reaches executors too, not only the driver; Secret references through Spark's own setting.
        **{f"spark.executorEnv.{e.name}": e.value for e in spec.env if e.secret_key_ref is None},
        **{
            f"spark.kubernetes.executor.secretKeyRef.{e.name}": f"{ref.name}:{ref.key}"
            for e in spec.env
            if (ref := e.secret_key_ref) is not None
        },
    }
    conf |= spec.dynamic_allocation.spark_conf()
    shipped = spec.deps.by_conf_key()
    shipped[PY_FILES.conf_key] = [*spec.py_files, *shipped[PY_FILES.conf_key]]
    conf |= {key: ",".join(entries) for key, entries in shipped.items() if entries}
    conf["spark.kubernetes.executor.podTemplateFile"] = f"{EXECUTOR_TEMPLATE_DIR}/{EXECUTOR_TEMPLATE_FILE}"
    # localRecovery's settings win over the user's: where a job's copies live and which key vouches for them
    # is the operator's to say (the mounts make other directories invisible anyway).
    ours = (
        local_recovery_conf(
            f"{local_recovery_node_dir(plan)}/state", f"{LOCAL_RECOVERY_KEY_DIR}/{LOCAL_RECOVERY_KEY}"
        )
        if spec.local_recovery.enabled
        else {}
    )
    state_store = spec.state_store.spark_conf() if spec.state_store else {}
    return {**conf, **spec.spark_conf, **state_store, **ours}


def local_recovery_conf(local_dir: str | None, key_file: str | None = None) -> dict[str, str]:
    """S3A behind jvm/local-recovery's FileSystem; state files also kept in local_dir if given, trusted only
    with a valid MAC under the key in key_file (without one the wrapper keeps no copies)."""
    conf = {
        "spark.hadoop.fs.s3a.impl": LOCAL_RECOVERY_FS,
        LOCAL_RECOVERY_AFS_KEY: LOCAL_RECOVERY_AFS,
        "spark.hadoop.fs.ftspark.local-recovery.delegate.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
    }
    if local_dir is not None:
        conf[LOCAL_RECOVERY_DIR_KEY] = local_dir
    if key_file is not None:
        conf[LOCAL_RECOVERY_KEY_FILE_KEY] = key_file
    return conf


def local_recovery_node_dir(plan: AttemptPlan) -> str:
    """The job's own directory under spec.localRecovery.hostPath, the only one its executors mount: another
    job's executors on the node cannot see its copies. By uid, so a re-created job starts empty."""
    return f"{plan.spec.local_recovery.host_path.rstrip('/')}/jobs/{plan.namespace}/{plan.job_uid}"


# A hostPath volume has no size: the PersistentVolume's is nominal (the claim must ask no more); the chart's
# local-state sweeper bounds a job's directory.
LOCAL_STATE_NOMINAL_SIZE = "1Gi"


LOCAL_STATE_VOLUME_PREFIX = "ftspark-local-state-"  # + the job's uid
LOCAL_STATE_VOLUME_SELECTOR = f"{JOB_NAMESPACE_LABEL},{JOB_LABEL}"


def local_state_volume_name(job_uid: str) -> str:
    return f"{LOCAL_STATE_VOLUME_PREFIX}{job_uid}"


def local_state_claim_name(plan: AttemptPlan) -> str:
    return f"{plan.job_name}-local-state-{plan.job_uid[:8]}"


def local_state_volume(plan: AttemptPlan) -> Manifest:
    """The job's node directory as a PersistentVolume, so that its executors mount it through a claim: Pod
    Security admits a pod's hostPath volume only at "privileged", a claim at every level. The kubelet makes
    the directory on whichever node an executor lands (DirectoryOrCreate), so one volume serves every node.
    Pre-bound to the job's claim alone (claimRef): no other claim, in any namespace, can bind it. Retained
    when the claim goes (with the job): the operator deletes a released one (Drivers.delete_released_volumes)
    and the directories stay for the sweeper."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {
            "name": local_state_volume_name(plan.job_uid),
            "labels": {**MANAGED, JOB_LABEL: plan.job_name, JOB_NAMESPACE_LABEL: plan.namespace},
        },
        "spec": {
            "capacity": {"storage": LOCAL_STATE_NOMINAL_SIZE},
            # Every executor of the job, on every node (each node has its own directory).
            "accessModes": ["ReadWriteMany"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",
            "claimRef": {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "namespace": plan.namespace,
                "name": local_state_claim_name(plan),
            },
            "hostPath": {"path": local_recovery_node_dir(plan), "type": "DirectoryOrCreate"},
        },
    }


def local_state_claim(plan: AttemptPlan) -> Manifest:
    """The job's claim on its local-state volume, owned by the job (it goes with the job, which releases the
    volume)."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": local_state_claim_name(plan),
            "labels": {JOB_LABEL: plan.job_name},
            "ownerReferences": [_owner(plan)],
        },
        "spec": {
            "accessModes": ["ReadWriteMany"],
            "storageClassName": "",
            "volumeName": local_state_volume_name(plan.job_uid),
            "resources": {"requests": {"storage": LOCAL_STATE_NOMINAL_SIZE}},
        },
    }


def local_recovery_secret_name(plan: AttemptPlan) -> str:
    # With the uid: a re-created job never mounts its predecessor's Secret, which garbage collection removes.
    return f"{plan.job_name}-local-recovery-{plan.job_uid[:8]}"


def local_recovery_secret(plan: AttemptPlan, key: bytes) -> Manifest:
    """The job's random MAC key for its node-local copies (generated by the caller), owned by the job."""
    return _secret(
        plan, local_recovery_secret_name(plan), {JOB_LABEL: plan.job_name}, {LOCAL_RECOVERY_KEY: key}
    )


def _secret(plan: AttemptPlan, name: str, labels: dict[str, str], data: dict[str, bytes]) -> Manifest:
    """An immutable Secret the job owns (it goes with the job), labelled as the operator's."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "labels": labels, "ownerReferences": [_owner(plan)]},
        "type": "Opaque",
        "immutable": True,
        "data": {item: base64.b64encode(value).decode() for item, value in data.items()},
    }


def executor_pod_template(plan: AttemptPlan) -> Manifest:
    """The executors' pod template (Spark takes its first container for the executor): our security defaults
    with their scratch volumes, what localRecovery needs (the job's node directory, through its claim, as
    Spark's local dir — Spark uses volumes named spark-local-dir-* — and node affinity to where the state
    already is), a standby's preferably away from the job's driver (the executors it keeps warm would be
    lost with that driver's node), then the user's template."""
    spec = plan.spec
    recovery = spec.local_recovery
    volumes, mounts = _scratch_volumes()
    container: Manifest = {
        "name": EXECUTOR_CONTAINER,
        "workingDir": WORK_DIR,
        "securityContext": copy.deepcopy(CONTAINER_SECURITY_CONTEXT),
        "volumeMounts": mounts,
    }
    ours: Manifest = {
        "spec": {
            "securityContext": copy.deepcopy(POD_SECURITY_CONTEXT),
            "containers": [container],
            "volumes": volumes,
            **_pull_secrets(spec),
        }
    }
    if recovery.enabled:
        node_dir = local_recovery_node_dir(plan)
        volumes.extend(
            [
                {
                    "name": LOCAL_STATE_VOLUME,
                    "persistentVolumeClaim": {"claimName": local_state_claim_name(plan)},
                },
                # A file, not an environment variable: Python workers and other child processes do not
                # inherit it.
                {
                    "name": LOCAL_RECOVERY_KEY_VOLUME,
                    "secret": {"secretName": local_recovery_secret_name(plan)},
                },
            ]
        )
        mounts.extend(
            [
                {"name": LOCAL_STATE_VOLUME, "mountPath": node_dir},
                {"name": LOCAL_RECOVERY_KEY_VOLUME, "mountPath": LOCAL_RECOVERY_KEY_DIR, "readOnly": True},
            ]
        )
        ours["spec"]["initContainers"] = [local_state_dir_opener(plan)]
    if recovery.enabled and plan.local_state_nodes:
        term: Manifest = {
            "matchExpressions": [
                {"key": HOSTNAME_LABEL, "operator": "In", "values": list(plan.local_state_nodes)}
            ]
        }
        required: Manifest = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}
        preferred: Manifest = {
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "preference": term}]
        }
        match recovery.affinity:
            case "required":
                ours["spec"]["affinity"] = {"nodeAffinity": required}
            case "preferred":
                ours["spec"]["affinity"] = {"nodeAffinity": preferred}
            case unknown:
                assert_never(unknown)
    if plan.standby:
        away = {"labelSelector": _active_driver(plan), "topologyKey": HOSTNAME_LABEL}
        preferred_away = [{"weight": 100, "podAffinityTerm": away}]
        ours["spec"].setdefault("affinity", {})["podAntiAffinity"] = {
            "preferredDuringSchedulingIgnoredDuringExecution": preferred_away
        }
    return merge_template(ours, spec.executor.pod_template)


def local_state_dir_opener(plan: AttemptPlan) -> Manifest:
    """The kubelet makes a missing hostPath directory root's, mode 0755, and no fsGroup applies to a hostPath
    volume (a PersistentVolume's neither): the executor's user could not write its node directory. Before
    the executor starts, this makes the job's directory (only that one) writable by every user, sticky: it
    is mounted by the job's own pods only, and its parents stay root's 0755. As root, the directory's owner,
    with no capability and nothing else mounted (a chmod by the owner needs none): Pod Security "baseline"
    admits it, "restricted" (runAsNonRoot) does not."""
    node_dir = local_recovery_node_dir(plan)
    return {
        "name": LOCAL_STATE_OPENER,
        "image": plan.spec.image,
        "command": ["chmod", "1777", node_dir],
        "securityContext": {
            **copy.deepcopy(CONTAINER_SECURITY_CONTEXT),
            "runAsUser": 0,
            "runAsNonRoot": False,
        },
        "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"memory": "32Mi"}},
        "volumeMounts": [{"name": LOCAL_STATE_VOLUME, "mountPath": node_dir}],
    }


def executor_admission_probe(plan: AttemptPlan) -> Manifest:
    """An executor pod as admission sees it, for a server-side dry run before the attempt: Spark, not the
    operator, creates the executors, and a namespace whose Pod Security level refuses them (localRecovery's
    init step runs as root, which "restricted" refuses) would leave the driver waiting for executors that
    never come."""
    pod: Manifest = {"apiVersion": "v1", "kind": "Pod", **executor_pod_template(plan)}
    metadata = pod.get("metadata", {})
    # Labelled as the operator's: its admission policy lets it write (even dry) only objects it labels.
    labels = {**metadata.get("labels", {}), **_labels(plan)}
    name = f"{driver_pod_name(plan.job_name, plan.attempt)}-executor-probe"
    pod["metadata"] = {**metadata, "name": name, "labels": labels}
    spec = pod["spec"]
    # The driver's ServiceAccount exists by now; the namespace's default one may not yet (admission checks).
    spec.setdefault("serviceAccountName", DRIVER_SERVICE_ACCOUNT)
    spec["containers"] = [{"image": plan.spec.image, **c} for c in spec["containers"]]
    return pod


def _attempt_secret_name(plan: AttemptPlan) -> str:
    return attempt_secret_name(driver_pod_name(plan.job_name, plan.attempt))


def _scratch_volumes() -> tuple[list[Manifest], list[Manifest]]:
    """The emptyDirs Spark writes to under a read-only root, with their mounts."""
    volumes: list[Manifest] = [{"name": name, "emptyDir": {}} for name, _ in SCRATCH_VOLUMES]
    mounts: list[Manifest] = [{"name": name, "mountPath": path} for name, path in SCRATCH_VOLUMES]
    return volumes, mounts


def attempt_secret(plan: AttemptPlan, key: bytes, checkpoint_key: bytes) -> Manifest:
    """The attempt's Secret: Spark's RPC key (random bytes) as the driver's file and as Spark's key from it,
    the job's checkpoint key (the driver's file only: executors never get it), and the executor pod template
    as the file Spark reads. One object, not a ConfigMap beside it: an attempt is one write fewer. Made per
    attempt, so a spec change never alters the template of a running attempt."""
    template = {"apiVersion": "v1", "kind": "Pod", **executor_pod_template(plan)}
    data = {
        RPC_SECRET_FILE: key,
        RPC_SECRET_KEY: base64.b64encode(key),
        CHECKPOINT_KEY_FILE: checkpoint_key,
        EXECUTOR_TEMPLATE_FILE: json.dumps(template, indent=2, sort_keys=True).encode(),
    }
    return _secret(plan, _attempt_secret_name(plan), _labels(plan), data)


def _secret_file_volume(name: str, plan: AttemptPlan, item: str) -> Manifest:
    """One file of the attempt's Secret, alone in its directory."""
    return {
        "name": name,
        "secret": {"secretName": _attempt_secret_name(plan), "items": [{"key": item, "path": item}]},
    }


def driver_network_policy(plan: AttemptPlan) -> Manifest:
    """Only the attempt's own pods (its executors, the driver itself) reach the driver's RPC and block
    manager ports. Other policies of the namespace may add to it (e.g. the UI, if a job turns it on)."""
    executors = {
        SPARK_APP_SELECTOR_LABEL: spark_app_id(plan.job_uid, plan.attempt),
        SPARK_ROLE_LABEL: "executor",
    }
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {
            "name": driver_pod_name(plan.job_name, plan.attempt),
            "labels": _labels(plan),
            "ownerReferences": [_owner(plan)],
        },
        "spec": {
            "podSelector": {"matchLabels": _labels(plan)},
            "policyTypes": ["Ingress"],
            "ingress": [
                {
                    "from": [
                        {"podSelector": {"matchLabels": executors}},
                        {"podSelector": {"matchLabels": _labels(plan)}},
                    ],
                    "ports": [
                        {"protocol": "TCP", "port": DRIVER_PORT},
                        {"protocol": "TCP", "port": BLOCK_MANAGER_PORT},
                    ],
                },
                *([_ui_ingress_rule()] if plan.spec.ui.enabled else []),
            ],
        },
    }


def _ui_ingress_rule() -> Manifest:
    """spec.ui: the UI port from the job's own namespace and from namespaces an admin labelled for it."""
    return {
        "from": [{"podSelector": {}}, {"namespaceSelector": {"matchLabels": {UI_ACCESS_LABEL: "true"}}}],
        "ports": [{"protocol": "TCP", "port": UI_PORT}],
    }


def ui_path(namespace: str, job_name: str, spec: JobSpec) -> str | None:
    """The path the UI is served under behind its Ingress (None without one)."""
    ingress = spec.ui.ingress
    if not (spec.ui.enabled and ingress.enabled):
        return None
    return ingress.path or f"/spark/{namespace}/{job_name}"


def ui_url(namespace: str, job_name: str, spec: JobSpec) -> str | None:
    """Where a user finds the UI: the Ingress's URL, else the Service's in-cluster one."""
    if not spec.ui.enabled:
        return None
    path, ingress = ui_path(namespace, job_name, spec), spec.ui.ingress
    if path is None:
        return f"http://{ui_service_name(job_name)}.{namespace}.svc:{UI_PORT}"
    scheme = "https" if ingress.tls_secret_name else "http"
    return f"{scheme}://{ingress.host}{path}/" if ingress.host else f"{path}/ (on the ingress controller)"


def ui_objects(plan: AttemptPlan) -> tuple[Manifest, ...]:
    """spec.ui: the Service that follows the job's current driver, and its Ingress; one per job, owned by it,
    made at its first attempt with it and kept."""
    if not plan.spec.ui.enabled:
        return ()
    name = ui_service_name(plan.job_name)
    labels = {JOB_LABEL: plan.job_name, **MANAGED}
    metadata = {"name": name, "labels": labels, "ownerReferences": [_owner(plan)]}
    selector = {JOB_LABEL: plan.job_name, ROLE_LABEL: "driver", SERVING_LABEL: "true"}
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": copy.deepcopy(metadata),
        "spec": {
            "selector": selector,
            "ports": [{"name": "ui", "port": UI_PORT, "targetPort": UI_PORT, "protocol": "TCP"}],
        },
    }
    path = ui_path(plan.namespace, plan.job_name, plan.spec)
    if path is None:
        return (service,)
    ingress_spec = plan.spec.ui.ingress
    rule: Manifest = {
        "http": {
            "paths": [
                {
                    "path": path,
                    "pathType": "Prefix",
                    "backend": {"service": {"name": name, "port": {"number": UI_PORT}}},
                }
            ]
        }
    }
    if ingress_spec.host:
        rule["host"] = ingress_spec.host
    body: Manifest = {"rules": [rule]}
    if ingress_spec.class_name:
        body["ingressClassName"] = ingress_spec.class_name
    if ingress_spec.tls_secret_name:
        hosts = [ingress_spec.host] if ingress_spec.host else []
        body["tls"] = [{"hosts": hosts, "secretName": ingress_spec.tls_secret_name}]
    ingress = {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": metadata, "spec": body}
    return (service, ingress)


DRIVERS_BUDGET = "ftspark-drivers"


def drivers_disruption_budget(namespace: str) -> Manifest:
    """No eviction (a node drain's) of a driver pod that wants none: once its node is cordoned the operator
    stops it with a final checkpoint and resumes it elsewhere, and the drain goes on when the pod is gone. A
    pod that is not Ready (starting, a standby not up) may be evicted: nothing of the job's is lost with it.

    One per namespace, selecting the driver pods labelled for it, rather than one per pod: a budget per
    attempt was a create and a delete per attempt, a tenth of a new job's API calls. It has no owner (it
    serves every job in the namespace) and selects nothing when no driver runs there."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": DRIVERS_BUDGET, "namespace": namespace, "labels": dict(MANAGED)},
        "spec": {
            "maxUnavailable": 0,
            "selector": {"matchLabels": {ROLE_LABEL: "driver", DISRUPTION_BUDGET_LABEL: "true"}},
            "unhealthyPodEvictionPolicy": "AlwaysAllow",
        },
    }


def driver_pod(plan: AttemptPlan) -> Manifest:
    spec = plan.spec
    name = driver_pod_name(plan.job_name, plan.attempt)
    conf = spark_conf(plan)
    volumes, mounts = _scratch_volumes()
    volumes.append(_secret_file_volume(RPC_SECRET_VOLUME, plan, RPC_SECRET_FILE))
    mounts.append({"name": RPC_SECRET_VOLUME, "mountPath": RPC_SECRET_DIR, "readOnly": True})
    volumes.append(_secret_file_volume(CHECKPOINT_KEY_VOLUME, plan, CHECKPOINT_KEY_FILE))
    mounts.append({"name": CHECKPOINT_KEY_VOLUME, "mountPath": CHECKPOINT_KEY_DIR, "readOnly": True})
    memory = f"{_driver_memory_mib(conf)}Mi"  # also the limit: eviction under node pressure takes it last
    probed = spec.liveness.progress_timeout_seconds > 0  # 0 turns the job's liveness checks off, both
    served = probed or plan.standby  # the runtime's health endpoint: liveness, a standby's readiness
    env: list[dict[str, Any]] = [
        {"name": DriverEnv.PROTOCOL, "value": str(PROTOCOL_VERSION)},
        {"name": DriverEnv.JOB, "value": f"{plan.namespace}/{plan.job_name}"},
        {"name": DriverEnv.JOB_UID, "value": plan.job_uid},
        {"name": DriverEnv.ATTEMPT, "value": str(plan.attempt)},
        {"name": DriverEnv.CHECKPOINT_LOCATION, "value": plan.checkpoint_location},
        {"name": DriverEnv.RESTORE_FROM, "value": plan.restore_from},
        {
            "name": DriverEnv.RESTORE_BATCH,
            "value": "" if plan.restore_batch_id is None else str(plan.restore_batch_id),
        },
        {"name": DriverEnv.INITIAL_SAVEPOINT, "value": spec.initial_savepoint or ""},
        # The driver runtime's own settings (ftspark/runtime/config.py documents them all).
        {"name": DriverEnv.STORAGE, "value": spec.checkpoint.storage},
        {"name": DriverEnv.RETAINED_CHECKPOINTS, "value": str(spec.checkpoint.retained)},
        {"name": DriverEnv.DEPS_MAX_FILE_MIB, "value": str(spec.deps.max_file_mib)},
        {"name": DriverEnv.STOP_TIMEOUT, "value": str(spec.stop_timeout_seconds)},
        {"name": DriverEnv.PROGRESS_TIMEOUT, "value": str(spec.liveness.progress_timeout_seconds)},
        {"name": DriverEnv.SPARK_CONF, "value": json.dumps(conf, sort_keys=True)},
        {"name": DriverEnv.HA_STORE, "value": plan.ha_store.kind},
        {"name": DriverEnv.HA_S3_ROOT, "value": plan.ha_store.s3_root},
        {"name": DriverEnv.TERM_FLOOR, "value": plan.term_floor},
        {"name": DriverEnv.CHECKPOINT_KEY_FILE, "value": f"{CHECKPOINT_KEY_DIR}/{CHECKPOINT_KEY_FILE}"},
        *([{"name": DriverEnv.HEALTH_PORT, "value": str(HEALTH_PORT)}] if served else []),
        *([{"name": DriverEnv.STANDBY, "value": "1"}] if plan.standby else []),
        *(
            [{"name": DriverEnv.STANDBY_EXECUTORS, "value": str(plan.standby_executors)}]
            if plan.standby and plan.standby_executors
            else []
        ),
        # Executors reach the driver at its pod IP: works without cluster DNS, and on every cluster.
        {"name": DriverEnv.BIND_ADDRESS, "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {"name": DriverEnv.POD_NAME, "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        *(
            [{"name": DriverEnv.LOCAL_RECOVERY_JAR, "value": LOCAL_RECOVERY_JAR}]
            if spec.local_recovery.enabled
            else []
        ),
        *(_container_env(e) for e in spec.env),
    ]
    container = {
        "name": DRIVER_CONTAINER,
        "image": spec.image,
        "imagePullPolicy": spec.image_pull_policy,
        "command": ["python", "-m", "ftspark.runtime", "driver"],
        "args": [spec.main_application_file, *spec.arguments],
        "env": env,
        "ports": [
            {"name": "driver", "containerPort": DRIVER_PORT},
            {"name": "block-manager", "containerPort": BLOCK_MANAGER_PORT},
            {"name": "ui", "containerPort": UI_PORT},
            *([{"name": "health", "containerPort": HEALTH_PORT}] if served else []),
        ],
        **({"livenessProbe": copy.deepcopy(DRIVER_LIVENESS_PROBE)} if probed else {}),
        **({"readinessProbe": copy.deepcopy(STANDBY_READINESS_PROBE)} if plan.standby else {}),
        "resources": {
            "requests": {
                "cpu": spec.spark_conf.get(DRIVER_REQUEST_CORES, str(spec.driver.cores)),
                "memory": memory,
            },
            "limits": {"memory": memory},
        },
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "workingDir": WORK_DIR,
        "securityContext": copy.deepcopy(CONTAINER_SECURITY_CONTEXT),
        "volumeMounts": [
            {"name": "executor-template", "mountPath": EXECUTOR_TEMPLATE_DIR, "readOnly": True},
            *mounts,
        ],
    }
    pod: Manifest = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": {
                **_labels(plan),
                SPARK_ROLE_LABEL: "driver",
                **_role_labels(plan),
                **({DISRUPTION_BUDGET_LABEL: "true"} if spec.driver.disruption_budget else {}),
            },
            "ownerReferences": [_owner(plan)],
        },
        "spec": {
            "restartPolicy": "Never",  # a failed driver is a failed attempt: the operator decides what next
            "serviceAccountName": DRIVER_SERVICE_ACCOUNT,
            "securityContext": copy.deepcopy(POD_SECURITY_CONTEXT),
            "containers": [container],
            "volumes": [
                _secret_file_volume("executor-template", plan, EXECUTOR_TEMPLATE_FILE),
                *volumes,
            ],
            **({"affinity": _away_from_the_driver(plan)} if plan.standby else {}),
            **_pull_secrets(spec),
        },
    }
    return merge_template(pod, spec.driver.pod_template)


def _pull_secrets(spec: JobSpec) -> Manifest:
    """spec.imagePullSecrets as a pod spec's field (none when there are none)."""
    return (
        {"imagePullSecrets": [{"name": name} for name in spec.image_pull_secrets]}
        if spec.image_pull_secrets
        else {}
    )


def _role_labels(plan: AttemptPlan) -> dict[str, str]:
    """A standby's; the job's driver instead serves the UI (the promotion swaps them)."""
    return (
        {STANDBY_LABEL: "true", SPEC_HASH_LABEL: plan.spec_hash} if plan.standby else {SERVING_LABEL: "true"}
    )


def _active_driver(plan: AttemptPlan) -> Manifest:
    """The job's driver pod, not a standby."""
    return {
        "matchLabels": {JOB_LABEL: plan.job_name, ROLE_LABEL: "driver"},
        "matchExpressions": [{"key": STANDBY_LABEL, "operator": "DoesNotExist"}],
    }


def _away_from_the_driver(plan: AttemptPlan) -> Manifest:
    """A standby never shares a node with the job's driver: it would be lost with it."""
    return {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": _active_driver(plan), "topologyKey": HOSTNAME_LABEL}
            ]
        }
    }


def merge_template(base: Manifest, template: Manifest) -> Manifest:
    """The user's partial pod over ours: maps merge, lists append (containers merge by name), scalars win."""
    merged = copy.deepcopy(base)
    for key, value in template.items():
        current = merged.get(key)
        if isinstance(current, dict) and isinstance(value, dict):
            merged[key] = merge_template(current, value)
        elif (
            key in {"containers", "initContainers"} and isinstance(current, list) and isinstance(value, list)
        ):
            by_name = {c.get("name"): c for c in current}
            for container in value:
                name = container.get("name")
                by_name[name] = merge_template(by_name[name], container) if name in by_name else container
            merged[key] = list(by_name.values())
        elif isinstance(current, list) and isinstance(value, list):
            merged[key] = current + value
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def _container_env(variable: EnvVar) -> dict[str, Any]:
    if variable.secret_key_ref is None:
        return {"name": variable.name, "value": variable.value}
    return {"name": variable.name, "valueFrom": {"secretKeyRef": variable.secret_key_ref.model_dump()}}


def _driver_memory_mib(conf: dict[str, str]) -> int:
    """The driver pod's memory as Spark 4.0's Kubernetes backend sizes a driver pod (BasicDriverFeatureStep):
    spark.driver.memory plus spark.driver.memoryOverhead, by default max(overhead factor * memory,
    spark.driver.minMemoryOverhead)."""
    heap = spark_size_mib(conf["spark.driver.memory"])
    if "spark.driver.memoryOverhead" in conf:
        return heap + spark_size_mib(conf["spark.driver.memoryOverhead"])
    factor = float(
        conf.get("spark.driver.memoryOverheadFactor")
        or conf.get("spark.kubernetes.memoryOverheadFactor")  # deprecated since Spark 3.3, still read
        or OVERHEAD_FACTOR
    )
    minimum = spark_size_mib(conf.get("spark.driver.minMemoryOverhead", f"{MIN_OVERHEAD_MIB}m"))
    return heap + max(int(factor * heap), minimum)
