"""The Kubernetes objects of one driver attempt, as plain manifests (docs/architecture.md, "Objects"): a Pod
running our driver runtime (spark-submit in client mode inside it), a headless Service and the executors'
pod template in a ConfigMap. Names are deterministic, so creating them twice is harmless and a new leader
finds them. Pure: the Kubernetes adapter sends them; the names both sides agree on are in ftspark.protocol.
"""

from __future__ import annotations

import base64
import copy
import json
from dataclasses import dataclass, field
from typing import Any, assert_never

from ftspark import API_GROUP, API_VERSION, KIND
from ftspark.domain.models import EnvVar, JobSpec
from ftspark.protocol import (
    ATTEMPT_LABEL,
    BLOCK_MANAGER_PORT,
    DRIVER_CONTAINER,
    DRIVER_PORT,
    DRIVER_SERVICE_ACCOUNT,
    IN_CLUSTER_MASTER,
    JOB_LABEL,
    ROLE_LABEL,
    SPARK_ROLE_LABEL,
    UI_PORT,
    DriverEnv,
    HaStoreConfig,
    RestoreFrom,
    driver_pod_name,
    executor_template_name,
    spark_app_id,
)

Manifest = dict[str, Any]

EXECUTOR_TEMPLATE_DIR = "/etc/ftspark/executor"
LOCAL_STATE_VOLUME = "spark-local-dir-ftspark"
LOCAL_RECOVERY_FS = "io.ftspark.localrecovery.LocalRecoveryFileSystem"
LOCAL_RECOVERY_AFS = "io.ftspark.localrecovery.LocalRecoveryFs"
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
# Pod Security "restricted" for drivers and executors by default (the Spark image runs as uid 185); a job's
# podTemplate may override any field, within what its namespace's Pod Security level admits.
POD_SECURITY_CONTEXT: Manifest = {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
CONTAINER_SECURITY_CONTEXT: Manifest = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
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


def _owner(plan: AttemptPlan) -> Manifest:
    # Deleting the job garbage-collects its drivers (and, through Spark's ownerReference, their executors).
    return {
        "apiVersion": f"{API_GROUP}/{API_VERSION}",
        "kind": KIND,
        "name": plan.job_name,
        "uid": plan.job_uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _labels(plan: AttemptPlan) -> dict[str, str]:
    return {JOB_LABEL: plan.job_name, ATTEMPT_LABEL: str(plan.attempt), ROLE_LABEL: "driver"}


# Spark requires spark.kubernetes.executor.podNamePrefix (<name>-<attempt>) to be a DNS label of at most 47
# characters (its pods are <prefix>-exec-<n>); 40 leaves room for a six-digit attempt number.
MAX_JOB_NAME_LENGTH = 40


def spark_conf(plan: AttemptPlan) -> dict[str, str]:
    """Spark settings that make a client-mode driver inside our pod drive executors on Kubernetes."""
    spec = plan.spec
    pod = driver_pod_name(plan.job_name, plan.attempt)
    conf = {
        "spark.master": IN_CLUSTER_MASTER,
        "spark.submit.deployMode": "client",
        "spark.app.name": plan.job_name,
        "spark.app.id": spark_app_id(plan.job_uid, plan.attempt),
        "spark.kubernetes.namespace": plan.namespace,
        "spark.kubernetes.driver.pod.name": pod,
        "spark.kubernetes.executor.podNamePrefix": f"{plan.job_name}-{plan.attempt}",
        "spark.kubernetes.container.image": spec.image,
        "spark.kubernetes.container.image.pullPolicy": spec.image_pull_policy,
        "spark.kubernetes.authenticate.driver.serviceAccountName": DRIVER_SERVICE_ACCOUNT,
        "spark.driver.port": str(DRIVER_PORT),
        "spark.driver.blockManager.port": str(BLOCK_MANAGER_PORT),
        "spark.driver.cores": str(spec.driver.cores),
        "spark.driver.memory": spec.driver.memory,
        "spark.executor.instances": str(spec.executor.instances),
        "spark.executor.cores": str(spec.executor.cores),
        "spark.executor.memory": spec.executor.memory,
        "spark.sql.streaming.checkpointLocation": plan.checkpoint_location,
        # spec.env reaches executors too, not only the driver; Secret references through Spark's own setting.
        **{f"spark.executorEnv.{e.name}": e.value for e in spec.env if e.secret_key_ref is None},
        **{
            f"spark.kubernetes.executor.secretKeyRef.{e.name}": f"{ref.name}:{ref.key}"
            for e in spec.env
            if (ref := e.secret_key_ref) is not None
        },
    }
    if spec.py_files:
        conf["spark.submit.pyFiles"] = ",".join(spec.py_files)
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
    return {**conf, **spec.spark_conf, **ours}


def local_recovery_conf(local_dir: str | None, key_file: str | None = None) -> dict[str, str]:
    """S3A behind jvm/local-recovery's FileSystem; state files also kept in local_dir if given, trusted only
    with a valid MAC under the key in key_file (without one the wrapper keeps no copies)."""
    conf = {
        "spark.hadoop.fs.s3a.impl": LOCAL_RECOVERY_FS,
        "spark.hadoop.fs.AbstractFileSystem.s3a.impl": LOCAL_RECOVERY_AFS,
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


def local_recovery_secret_name(plan: AttemptPlan) -> str:
    # With the uid: a re-created job never mounts its predecessor's Secret, which garbage collection removes.
    return f"{plan.job_name}-local-recovery-{plan.job_uid[:8]}"


def local_recovery_secret(plan: AttemptPlan, key: bytes) -> Manifest:
    """The job's random MAC key for its node-local copies (generated by the caller), owned by the job."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": local_recovery_secret_name(plan),
            "labels": {JOB_LABEL: plan.job_name},
            "ownerReferences": [_owner(plan)],
        },
        "type": "Opaque",
        "immutable": True,
        "data": {LOCAL_RECOVERY_KEY: base64.b64encode(key).decode()},
    }


def executor_pod_template(plan: AttemptPlan) -> Manifest:
    """The executors' pod template (Spark takes its first container for the executor): our security defaults,
    what localRecovery needs (the node-local directory as Spark's local dir — Spark uses volumes named
    spark-local-dir-* — and node affinity to where the state already is), then the user's template."""
    spec = plan.spec
    recovery = spec.local_recovery
    container: Manifest = {"name": "executor", "securityContext": copy.deepcopy(CONTAINER_SECURITY_CONTEXT)}
    ours: Manifest = {
        "spec": {"securityContext": copy.deepcopy(POD_SECURITY_CONTEXT), "containers": [container]}
    }
    if recovery.enabled:
        node_dir = local_recovery_node_dir(plan)
        ours["spec"]["volumes"] = [
            {"name": LOCAL_STATE_VOLUME, "hostPath": {"path": node_dir, "type": "DirectoryOrCreate"}},
            # A file, not an environment variable: Python workers and other child processes do not inherit it.
            {
                "name": LOCAL_RECOVERY_KEY_VOLUME,
                "secret": {"secretName": local_recovery_secret_name(plan)},
            },
        ]
        container["volumeMounts"] = [
            {"name": LOCAL_STATE_VOLUME, "mountPath": node_dir},
            {"name": LOCAL_RECOVERY_KEY_VOLUME, "mountPath": LOCAL_RECOVERY_KEY_DIR, "readOnly": True},
        ]
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
    return merge_template(ours, spec.executor.pod_template)


def executor_admission_probe(plan: AttemptPlan) -> Manifest:
    """An executor pod as admission sees it, for a server-side dry run before the attempt: Spark, not the
    operator, creates the executors, and a namespace whose Pod Security level refuses them (localRecovery's
    hostPath needs "privileged") would leave the driver waiting for executors that never come."""
    pod: Manifest = {"apiVersion": "v1", "kind": "Pod", **executor_pod_template(plan)}
    metadata = pod.get("metadata", {})
    # Labelled as the operator's: its admission policy lets it write (even dry) only objects it labels.
    labels = {**metadata.get("labels", {}), **_labels(plan)}
    pod["metadata"] = {**metadata, "name": f"{_executor_template_name(plan)}-probe", "labels": labels}
    spec = pod["spec"]
    # The driver's ServiceAccount exists by now; the namespace's default one may not yet (admission checks).
    spec.setdefault("serviceAccountName", DRIVER_SERVICE_ACCOUNT)
    spec["containers"] = [{"image": plan.spec.image, **c} for c in spec["containers"]]
    return pod


def executor_template_config_map(plan: AttemptPlan) -> Manifest:
    """The executor pod template as the file Spark reads, in a ConfigMap the driver pod mounts.

    Made per attempt, so a spec change never alters the template of a running attempt."""
    template = {"apiVersion": "v1", "kind": "Pod", **executor_pod_template(plan)}
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": _executor_template_name(plan),
            "labels": _labels(plan),
            "ownerReferences": [_owner(plan)],
        },
        "data": {EXECUTOR_TEMPLATE_FILE: json.dumps(template, indent=2, sort_keys=True)},
    }


def _executor_template_name(plan: AttemptPlan) -> str:
    return executor_template_name(driver_pod_name(plan.job_name, plan.attempt))


def driver_service(plan: AttemptPlan) -> Manifest:
    name = driver_pod_name(plan.job_name, plan.attempt)
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "labels": _labels(plan), "ownerReferences": [_owner(plan)]},
        "spec": {
            "clusterIP": "None",
            "selector": _labels(plan),
            "ports": [
                {"name": "driver", "port": DRIVER_PORT},
                {"name": "block-manager", "port": BLOCK_MANAGER_PORT},
                {"name": "ui", "port": UI_PORT},
            ],
        },
    }


def driver_pod(plan: AttemptPlan) -> Manifest:
    spec = plan.spec
    name = driver_pod_name(plan.job_name, plan.attempt)
    env: list[dict[str, Any]] = [
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
        {"name": DriverEnv.STOP_TIMEOUT, "value": str(spec.stop_timeout_seconds)},
        {"name": DriverEnv.SPARK_CONF, "value": json.dumps(spark_conf(plan), sort_keys=True)},
        {"name": DriverEnv.HA_STORE, "value": plan.ha_store.kind},
        {"name": DriverEnv.HA_S3_ROOT, "value": plan.ha_store.s3_root},
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
        ],
        "resources": {"requests": {"cpu": str(spec.driver.cores), "memory": _request(spec.driver.memory)}},
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "securityContext": copy.deepcopy(CONTAINER_SECURITY_CONTEXT),
        "volumeMounts": [{"name": "executor-template", "mountPath": EXECUTOR_TEMPLATE_DIR, "readOnly": True}],
    }
    pod: Manifest = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": {**_labels(plan), SPARK_ROLE_LABEL: "driver"},
            "ownerReferences": [_owner(plan)],
        },
        "spec": {
            "restartPolicy": "Never",  # a failed driver is a failed attempt: the operator decides what next
            "serviceAccountName": DRIVER_SERVICE_ACCOUNT,
            "securityContext": copy.deepcopy(POD_SECURITY_CONTEXT),
            "containers": [container],
            "volumes": [{"name": "executor-template", "configMap": {"name": _executor_template_name(plan)}}],
        },
    }
    return merge_template(pod, spec.driver.pod_template)


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


def _request(memory: str) -> str:
    """Spark's 1g (or 1gb) is 1 GiB and a bare number is MiB; Kubernetes spells them 1Gi and 512Mi."""
    amount = memory.lower().removesuffix("b")
    return f"{amount[:-1]}{amount[-1].upper()}i" if amount[-1] in "kmgt" else f"{amount}Mi"
