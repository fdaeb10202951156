"""The driver runtime's settings, all from the environment the operator gives the driver pod
(ftspark/manifests.py; the names are ftspark.protocol.DriverEnv) plus a few knobs with defaults.

| variable | meaning |
|---|---|
| FTSPARK_JOB | namespace/name of the job (the Lease `<name>-driver` and the stores live in that namespace) |
| FTSPARK_JOB_UID, FTSPARK_ATTEMPT, FTSPARK_POD_NAME | who this driver is; identity = `<pod>@<attempt>` |
| FTSPARK_CHECKPOINT_LOCATION | checkpoint root: query `q` checkpoints in `<root>/<q>` |
| FTSPARK_STORAGE | the job's storage prefix (savepoints go to `<storage>/savepoints/<id>/`); default: the
  checkpoint root's grandparent (`<storage>/checkpoints/<dir>`) |
| FTSPARK_RESTORE_BATCH | roll the checkpoint back to this committed batch before starting |
| FTSPARK_INITIAL_SAVEPOINT | savepoint to start from when a query has no checkpoint yet |
| FTSPARK_SPARK_CONF | JSON object of Spark settings (spark.master may be local[...] in tests) |
| FTSPARK_SPARK_JARS_DIR | the S3A jars; default the Spark image's /opt/ftspark/jars/s3a if there is one, else
  tools/spark_jars.sh's cache, `${FTSPARK_CACHE:-~/.cache/ftspark}/jars/<versions>` |
| FTSPARK_CLASS_DATA_DIR | the driver JVM's class-data archives (runtime/classdata.py); default the Spark
  image's /opt/ftspark/class-data if there is one, else `${FTSPARK_CACHE:-~/.cache/ftspark}/class-data` |
| FTSPARK_RETAINED_CHECKPOINTS | checkpoint pointers kept in the store (default 5) |
| FTSPARK_DEPS_MAX_FILE_MIB | the largest application file or dependency fetched from S3, MiB (default 2048) |
| FTSPARK_HA_STORE | where pointers are reported: `configmaps` (default) or `s3`, as the operator's setting |
| FTSPARK_HA_S3_ROOT | with `s3`: the installation's `s3://<bucket>/<prefix>`, with the job's S3 settings |
| FTSPARK_TERM_FLOOR | `<namespace>/<name>` of the operator's term floor: older control requests are refused |
| FTSPARK_CHECKPOINT_KEY_FILE | the job's checkpoint key, sealing its checkpoint record (attempt's Secret) |
| FTSPARK_RESULTS_NAMESPACE | the operator's results namespace (the store needs one; default: the job's) |
| FTSPARK_LEASE_DURATION / _RENEW_DEADLINE / _RETRY_PERIOD | driver Lease timings in seconds (15/10/2) |
| FTSPARK_LEASE_ACQUIRE_TIMEOUT | give up if the Lease is not ours within this (default 4 lease durations) |
| FTSPARK_STOP_TIMEOUT | a stop waits this long for the batch boundary, then cancels (default 120) |
| FTSPARK_PROGRESS_TIMEOUT | a query silent this long ends the driver: NoProgress (default 300; 0: off) |
| FTSPARK_HEALTH_PORT | answer the liveness probe's GET /healthz on this port (unset: no endpoint) |
| FTSPARK_STANDBY | `1`: stand by, the SparkSession up with no executors, until a `promote` control request |
| FTSPARK_STANDBY_EXECUTORS | executors a standby keeps up and warmed while it waits (default 0) |
| FTSPARK_CONTROL_INTERVAL | seconds between reads of the pod's control annotation (default 1) |
| FTSPARK_TERMINATION_LOG | where the termination message goes (default /dev/termination-log) |
| KUBECONFIG | outside a cluster (tests): the API server to use; in a pod the in-cluster config is used |
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

from ftspark.domain.ha import JobKey
from ftspark.protocol import (
    PROTOCOL_VERSION,
    DriverEnv,
    HaStoreConfig,
    HaStoreKind,
    RuntimeEnv,
    driver_lease_holder,
)

IMAGE_JARS_DIR = Path("/opt/ftspark/jars/s3a")  # images/spark-py/Dockerfile
DEV_JARS_DIR_NAME = "hadoop-aws-3.5.0-awssdk-2.35.4"  # tools/spark_jars.sh's cache directory


def s3a_jars_dir(env: Mapping[str, str], image_dir: Path = IMAGE_JARS_DIR) -> Path:
    """Where the S3A jars are: as set, else in the Spark image, else in the development cache."""
    if env.get(RuntimeEnv.SPARK_JARS_DIR):
        return Path(env[RuntimeEnv.SPARK_JARS_DIR])
    if image_dir.is_dir():
        return image_dir
    cache = Path(env.get(RuntimeEnv.DEV_CACHE) or Path.home() / ".cache" / "ftspark")
    return cache / "jars" / DEV_JARS_DIR_NAME


def s3a_in_spark_jars(home: Path) -> bool:
    """Whether Spark's own jars (a user's image may put hadoop-aws there) hold S3A already."""
    return any((home / "jars").glob("hadoop-aws-*.jar"))


def missing_s3a_jars(jars_dir: Path, home: Path) -> str:
    """What to do when neither the S3A directory nor Spark's jars hold S3A: which jars, for which Hadoop."""
    bundled = sorted((home / "jars").glob("hadoop-client-api-*.jar"))
    hadoop = (
        bundled[0].name.removeprefix("hadoop-client-api-").removesuffix(".jar") if bundled else "<Spark's>"
    )
    return (
        f"no S3A jars in {jars_dir} (FTSPARK_SPARK_JARS_DIR; {IMAGE_JARS_DIR} in ftspark's Spark image) "
        f"nor in Spark's own {home}/jars: add hadoop-aws-{hadoop}.jar and the AWS SDK bundle that Hadoop "
        f"{hadoop} was built with to either (jvm/s3a-deps/pom.xml lists them; images/spark-py/Dockerfile "
        "copies them); on a development machine, run tools/spark_jars.sh"
    )


class ConfigError(Exception):
    """The environment does not describe a runnable driver."""

    reason = "BadConfig"  # the attempt's end reason (domain/remedies.py)


class ProtocolMismatchError(ConfigError):
    """The operator that made the pod speaks another protocol than this runtime (the job's image)."""

    reason = "RuntimeMismatch"


class ImageIncompleteError(ConfigError):
    """The job's image lacks what its spec asks for (a user's own image: docs/own-image.md)."""

    reason = "ImageIncomplete"


@dataclass(frozen=True)
class RuntimeConfig:
    job: JobKey
    job_uid: str
    attempt: int
    pod_name: str
    checkpoint_root: str
    storage: str
    spark_conf: Mapping[str, str]
    jars_dir: Path
    checkpoint_key_file: Path
    restore_batch: int | None = None
    initial_savepoint: str | None = None
    retained_checkpoints: int = 5
    deps_max_bytes: int = 2048 << 20
    ha_store: HaStoreConfig = field(default_factory=HaStoreConfig)
    term_floor: tuple[str, str] = ("", "")  # namespace, name
    results_namespace: str = ""
    lease_duration: int = 15
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    lease_acquire_timeout: float = 60.0
    stop_timeout: float = 120.0
    progress_timeout: float = 300.0
    control_interval: float = 1.0
    health_port: int | None = None
    standby: bool = False
    standby_executors: int = 0
    bind_address: str = "127.0.0.1"  # the pod IP in a pod (SPARK_DRIVER_BIND_ADDRESS)
    termination_log: Path = Path("/dev/termination-log")
    kubeconfig: str | None = None

    @property
    def identity(self) -> str:
        return driver_lease_holder(self.pod_name, self.attempt)

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> RuntimeConfig:
        def required(name: str) -> str:
            value = env.get(name, "")
            if not value:
                raise ConfigError(f"{name} is not set: the driver runtime runs in pods the operator creates")
            return value

        def number(name: str, default: float) -> float:
            raw = env.get(name, "")
            try:
                return float(raw) if raw else default
            except ValueError:
                raise ConfigError(f"{name}={raw!r} is not a number") from None

        spoken = env.get(DriverEnv.PROTOCOL, "")
        if spoken != str(PROTOCOL_VERSION):
            operator = f"protocol {spoken}" if spoken else "no protocol version (a release before them)"
            raise ProtocolMismatchError(
                f"the operator that made this pod speaks {operator}, the ftspark driver runtime in the job's "
                f"image protocol {PROTOCOL_VERSION}: build the image with the operator's release of ftspark "
                "(docs/operations.md, Upgrading) or use the operator's own Spark image"
            )
        local_recovery_jar = env.get(DriverEnv.LOCAL_RECOVERY_JAR, "")
        if local_recovery_jar and not Path(local_recovery_jar).is_file():
            # Else the executors fail at their first state file with a ClassNotFoundException.
            raise ImageIncompleteError(
                f"spec.localRecovery needs ftspark's local-recovery jar at {local_recovery_jar}, which the "
                "job's image lacks: add it (docs/own-image.md) or use the operator's Spark image"
            )
        namespace, _, name = required(DriverEnv.JOB).partition("/")
        if not name:
            raise ConfigError(f"FTSPARK_JOB must be namespace/name, not {env[DriverEnv.JOB]!r}")
        try:
            spark_conf = json.loads(env.get(DriverEnv.SPARK_CONF) or "{}")
        except json.JSONDecodeError as error:
            raise ConfigError(f"FTSPARK_SPARK_CONF is not JSON: {error}") from None
        floor_namespace, _, floor_name = required(DriverEnv.TERM_FLOOR).partition("/")
        if not (floor_namespace and floor_name) or "/" in floor_name:
            raise ConfigError(f"FTSPARK_TERM_FLOOR must be namespace/name, not {env[DriverEnv.TERM_FLOOR]!r}")
        root = required(DriverEnv.CHECKPOINT_LOCATION).rstrip("/")
        lease_duration = int(number(RuntimeEnv.LEASE_DURATION, 15))
        restore_batch = env.get(DriverEnv.RESTORE_BATCH, "")
        try:
            ha_store = HaStoreConfig(
                kind=cast(HaStoreKind, env.get(DriverEnv.HA_STORE) or "configmaps"),
                s3_root=env.get(DriverEnv.HA_S3_ROOT, ""),
            )
        except ValueError as error:
            raise ConfigError(str(error)) from None
        return cls(
            job=JobKey(namespace=namespace, name=name),
            job_uid=env.get(DriverEnv.JOB_UID, ""),
            attempt=int(number(DriverEnv.ATTEMPT, 0)),
            pod_name=required(DriverEnv.POD_NAME),
            checkpoint_root=root,
            storage=(env.get(DriverEnv.STORAGE) or root.rsplit("/", 2)[0]).rstrip("/"),
            spark_conf={str(k): str(v) for k, v in spark_conf.items()},
            jars_dir=s3a_jars_dir(env),
            checkpoint_key_file=Path(required(DriverEnv.CHECKPOINT_KEY_FILE)),
            restore_batch=int(restore_batch) if restore_batch else None,
            initial_savepoint=env.get(DriverEnv.INITIAL_SAVEPOINT) or None,
            retained_checkpoints=int(number(DriverEnv.RETAINED_CHECKPOINTS, 5)),
            deps_max_bytes=int(number(DriverEnv.DEPS_MAX_FILE_MIB, 2048)) << 20,
            ha_store=ha_store,
            term_floor=(floor_namespace, floor_name),
            results_namespace=env.get(RuntimeEnv.RESULTS_NAMESPACE) or namespace,
            lease_duration=lease_duration,
            renew_deadline=number(RuntimeEnv.LEASE_RENEW_DEADLINE, 10.0),
            retry_period=number(RuntimeEnv.LEASE_RETRY_PERIOD, 2.0),
            lease_acquire_timeout=number(RuntimeEnv.LEASE_ACQUIRE_TIMEOUT, 4.0 * lease_duration),
            stop_timeout=number(DriverEnv.STOP_TIMEOUT, 120.0),
            progress_timeout=number(DriverEnv.PROGRESS_TIMEOUT, 300.0),
            control_interval=number(RuntimeEnv.CONTROL_INTERVAL, 1.0),
            health_port=int(number(DriverEnv.HEALTH_PORT, 0)) or None,
            standby=env.get(DriverEnv.STANDBY) == "1",
            standby_executors=int(number(DriverEnv.STANDBY_EXECUTORS, 0)),
            bind_address=env.get(DriverEnv.BIND_ADDRESS) or "127.0.0.1",
            termination_log=Path(env.get(RuntimeEnv.TERMINATION_LOG) or "/dev/termination-log"),
            kubeconfig=env.get("KUBECONFIG") or None,
        )
