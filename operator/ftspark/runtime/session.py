"""The SparkSession the user's script gets, and stable checkpoint directories for its queries.

Spark gives a query without checkpointLocation the directory `<root>/<name>`, or `<root>/<random UUID>` if it
has no name — a new, empty one on every restart. DataStreamWriter.start/toTable are wrapped so that every
query gets `<root>/<name>`, or `<root>/query-<n>` for the n-th unnamed query the script starts (scripts start
their queries in the same order every run). Before a query starts, its directory is prepared (savepoint
restore, rollback) by the callback the driver gives.
"""

from __future__ import annotations

import functools
import inspect
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from py4j.protocol import Py4JError
from pyspark import SparkConf, SparkContext
from pyspark.errors import PySparkRuntimeError
from pyspark.java_gateway import launch_gateway
from pyspark.sql import SparkSession
from pyspark.sql.streaming.readwriter import DataStreamWriter

from ftspark.manifests import LOCAL_RECOVERY_AFS, LOCAL_RECOVERY_AFS_KEY, LOCAL_RECOVERY_JAR
from ftspark.protocol import IN_CLUSTER_MASTER, DriverEnv
from ftspark.runtime.classdata import driver_java_options, extra_classpath, spark_home

CHECKPOINT_OPTION = "checkpointlocation"
EXECUTOR_INSTANCES = "spark.executor.instances"
DRIVER_JAVA_OPTIONS = "spark.driver.extraJavaOptions"


def spark_uri(uri: str) -> str:
    """Spark reaches S3 through S3A: s3://bucket/key is s3a://bucket/key to it."""
    return "s3a://" + uri.removeprefix("s3://") if uri.startswith("s3://") else uri


def in_cluster_master(master: str, env: Mapping[str, str]) -> str:
    """The API server as this pod reaches it. The operator writes the portable in-cluster name; where the
    kubelet says otherwise (KUBERNETES_SERVICE_HOST/PORT, always set in pods) that address wins, as Spark's
    own docs advise: it also works without cluster DNS."""
    host, port = env.get("KUBERNETES_SERVICE_HOST"), env.get("KUBERNETES_SERVICE_PORT", "443")
    if master == IN_CLUSTER_MASTER and host:
        return f"k8s://https://{host}:{port}"
    return master


def local_recovery_jar(env: Mapping[str, str], image_jar: Path = Path(LOCAL_RECOVERY_JAR)) -> str:
    """ftspark's jar (jvm/local-recovery): where spec.localRecovery says, else the image's if it has one, else
    none. Its FileContext binding writes each of Spark's checkpoint files to S3 in one request (Hadoop's own
    binding makes 22), for every job (docs/local-recovery.md, "Fewer requests per checkpoint file"); its
    copies on the node's disk only where spec.localRecovery asks for them. Executors run the driver's
    image, so they have it too."""
    return env.get(DriverEnv.LOCAL_RECOVERY_JAR, "") or (str(image_jar) if image_jar.is_file() else "")


def spark_settings(
    conf: Mapping[str, str], checkpoint_root: str, jars_dir: Path, env: Mapping[str, str] = os.environ
) -> dict[str, str]:
    jar = local_recovery_jar(env)
    classpath = extra_classpath(jars_dir, jar)
    settings = {
        # S3A's jars on the JVM's own classpath (no shipping of the 500 MB SDK bundle to executors: the
        # image has them at the same path).
        "spark.driver.extraClassPath": classpath,
        "spark.executor.extraClassPath": classpath,
        # Before the job's own settings, which may name another binding.
        **({LOCAL_RECOVERY_AFS_KEY: LOCAL_RECOVERY_AFS} if jar else {}),
        **conf,
        "spark.sql.streaming.checkpointLocation": spark_uri(checkpoint_root),
    }
    # Class data shared from an archive made for exactly this classpath (runtime/classdata.py), if any.
    driver_classpath, own_options = settings["spark.driver.extraClassPath"], conf.get(DRIVER_JAVA_OPTIONS, "")
    if java_options := driver_java_options(driver_classpath, spark_home(env), env, own_options):
        settings[DRIVER_JAVA_OPTIONS] = java_options
    if "spark.master" in settings:
        settings["spark.master"] = in_cluster_master(settings["spark.master"], env)
    pod_ip = env.get(DriverEnv.BIND_ADDRESS)
    if pod_ip and settings.get("spark.master", "").startswith("k8s://"):
        # Executors reach the driver at its pod IP: a pod's hostname resolves only inside that pod.
        settings.setdefault("spark.driver.host", pod_ip)
        settings.setdefault("spark.driver.bindAddress", pod_ip)
    return settings


class SparkNotStartedError(Exception):
    """The Spark JVM exited before it started: a setting it refuses, too little memory. It says why on its
    stderr, which is the driver's log, not here."""


def build_session(settings: Mapping[str, str], *, executors: int | None = None) -> SparkSession:
    """executors: as many as the settings say (None), or a standby's number. spark-submit refuses
    spark.executor.instances=0, so a session without executors (a standby's, or a job's whose script needs
    none) has its JVM launched without that setting and the SparkContext, created on it, gets 0; the builder
    then finds that context."""
    if executors is not None:
        settings = {**settings, EXECUTOR_INSTANCES: str(executors)}
    try:
        if settings.get(EXECUTOR_INSTANCES) == "0":
            launched = SparkConf().setAll([(k, v) for k, v in settings.items() if k != EXECUTOR_INSTANCES])
            without = SparkConf().setAll(list(settings.items()))
            SparkContext(conf=without, gateway=launch_gateway(launched))  # type: ignore[no-untyped-call]
        builder = SparkSession.builder
        for key, value in settings.items():
            builder = builder.config(key, value)
        return builder.getOrCreate()
    except PySparkRuntimeError as error:
        if "JAVA_GATEWAY_EXITED" not in str(error):
            raise
        raise SparkNotStartedError(
            "the Spark JVM exited before it started: a setting it refuses (spec.sparkConf), or too little "
            "memory; it names the cause in the driver's log (ftspark logs JOB --attempt N)"
        ) from None


def first_executor_registered(spark: SparkSession) -> datetime | None:
    """When the first of the application's current executors registered (Spark's status store, which the UI
    reads too); None before any did, or if the JVM cannot say."""
    try:
        executors = spark.sparkContext._jsc.sc().statusStore().executorList(True)  # no Python API
        added = [executors.apply(i) for i in range(executors.size())]
        times = [summary.addTime().getTime() for summary in added if summary.id() != "driver"]
    except (Py4JError, AttributeError, TypeError, ValueError):  # never in the way of the pointer it goes with
        return None
    return datetime.fromtimestamp(min(times) / 1000, UTC) if times else None


class StoppedBeforeStart(BaseException):
    """Raised from a query's start() once the driver was told to stop: its checkpoints stay as its
    predecessor left them, and no batch runs after the stop. A BaseException, as SystemExit is: a script's
    `except Exception` around its start must not keep it running after the stop."""


@dataclass(frozen=True)
class RunningQuery:
    name: str
    location: str
    query: Any  # pyspark's StreamingQuery


class Queries:
    """Which checkpoint directory each query has, and the queries started so far."""

    def __init__(self, root: str, prepare: Callable[[str, str], None]) -> None:
        self._root = spark_uri(root.rstrip("/"))
        self._prepare = prepare
        self._unnamed = 0
        self._by_id: dict[str, RunningQuery] = {}
        self._changed = threading.Condition()
        # Held through a start, apart from _changed: Spark's start waits for the query's started event,
        # which the listener's lookup (on another thread) takes _changed for.
        self._starting = threading.Lock()
        self._closed = False

    def assign(self, name: str | None, explicit: str | None) -> tuple[str, str]:
        """(name, location) of the query about to start, prepared."""
        with self._changed:
            if explicit is not None:
                key, location = explicit.rstrip("/").rsplit("/", 1)[-1], explicit
            elif name:
                key, location = name, f"{self._root}/{name}"
            else:
                key = f"query-{self._unnamed}"
                self._unnamed += 1
                location = f"{self._root}/{key}"
        self._prepare(key, location)
        return key, location

    def started(self, query: Any, name: str, location: str) -> None:
        with self._changed:
            self._by_id[str(query.id)] = RunningQuery(name, location, query)
            self._changed.notify_all()

    def lookup(self, query_id: str, timeout: float = 10.0) -> RunningQuery | None:
        """The query of an id; waits a little, since its first event can overtake start()'s return."""
        with self._changed:
            self._changed.wait_for(lambda: query_id in self._by_id, timeout)
            return self._by_id.get(query_id)

    def all(self) -> list[RunningQuery]:
        with self._changed:
            return list(self._by_id.values())

    def close(self) -> list[RunningQuery]:
        """No query starts after this (a start under way finishes first); the queries started so far."""
        with self._starting:
            self._closed = True
            return self.all()

    def install(self) -> None:
        """Wrap pyspark's DataStreamWriter (process-wide: one driver per process)."""
        option, options, query_name = (
            DataStreamWriter.option,
            DataStreamWriter.options,
            DataStreamWriter.queryName,
        )

        def remember(writer: Any, key: str, value: Any) -> None:
            if key.lower() == CHECKPOINT_OPTION:
                writer._ftspark_checkpoint = str(value)

        def wrapped_option(self: Any, key: str, value: Any) -> Any:
            remember(self, key, value)
            return option(self, key, value)

        def wrapped_options(self: Any, **values: Any) -> Any:
            for key, value in values.items():
                remember(self, key, value)
            return options(self, **values)

        def wrapped_query_name(self: Any, name: str) -> Any:
            self._ftspark_name = name
            return query_name(self, name)

        def starting(original: Callable[..., Any]) -> Callable[..., Any]:
            signature = inspect.signature(original)

            @functools.wraps(original)
            def start(self: Any, *args: Any, **kwargs: Any) -> Any:
                bound = signature.bind(self, *args, **kwargs).arguments
                extra = {k.lower(): v for k, v in bound.get("options", {}).items()}
                explicit = extra.get(CHECKPOINT_OPTION) or getattr(self, "_ftspark_checkpoint", None)
                name = bound.get("queryName") or getattr(self, "_ftspark_name", None)
                with queries._starting:
                    if queries._closed:
                        raise StoppedBeforeStart(f"query {name or '(unnamed)'} not started: the job stopped")
                    key, location = queries.assign(name, None if explicit is None else str(explicit))
                    if explicit is None:
                        option(self, "checkpointLocation", location)
                    query = original(self, *args, **kwargs)
                    queries.started(query, key, location)
                return query

            return start

        queries = self
        patches = {
            "option": wrapped_option,
            "options": wrapped_options,
            "queryName": wrapped_query_name,
            "start": starting(DataStreamWriter.start),
            "toTable": starting(DataStreamWriter.toTable),
        }
        for method, replacement in patches.items():
            setattr(DataStreamWriter, method, replacement)
