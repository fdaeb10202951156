"""A hot standby's side of the driver (docs/hot-standby.md): how many executors it keeps warm, the head start
it takes on the job's storage while it waits, the wait for the operator's promotion, and the executors it
asks for once promoted. A standby writes nothing of the job's before its promotion."""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Mapping

import urllib3
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException
from py4j.protocol import Py4JError
from pyspark.sql import SparkSession

from ftspark.protocol import ControlRequest
from ftspark.runtime.config import RuntimeConfig
from ftspark.runtime.control import ControlWatcher
from ftspark.runtime.objects import ObjectStore, StorageError
from ftspark.runtime.session import EXECUTOR_INSTANCES, spark_uri

log = logging.getLogger(__name__)

_WATCH_SECONDS = 60  # each watch of the standby's pod; then a new one

# Spark's number of executors on Kubernetes when spark.executor.instances is not set.
SPARK_DEFAULT_EXECUTORS = 2


def dynamic_allocation(conf: Mapping[str, str]) -> bool:
    """Spark's allocation manager asks for executors as tasks come: none are asked for ahead."""
    return conf.get("spark.dynamicAllocation.enabled", "false").lower() == "true"


def warm_executors(config: RuntimeConfig, conf: Mapping[str, str]) -> int:
    """How many executors a standby keeps up: its setting, at most the job's number (conf: the
    application's Spark settings)."""
    if not config.standby or dynamic_allocation(conf):
        return 0
    return min(config.standby_executors, _executors_wanted(conf))


def request_remaining_executors(spark: SparkSession, config: RuntimeConfig, conf: Mapping[str, str]) -> None:
    """A promoted standby's executors beyond those it kept: the job's number, asked for now that the Lease
    is held."""
    if dynamic_allocation(conf):
        return
    wanted, kept = _executors_wanted(conf), warm_executors(config, conf)
    if wanted <= kept:
        log.info("%d executors kept warm while standing by: none to ask for", kept)
        return
    granted = spark.sparkContext._jsc.sc().requestExecutors(wanted - kept)
    log.info(
        "asked for %d executors (%d kept warm): %s",
        wanted - kept,
        kept,
        "requested" if granted else "not supported by this master",
    )


def open_storage(spark: SparkSession, checkpoint_root: str) -> None:
    """The checkpoint root read once through the JVM's Hadoop FileSystem (a read: a standby writes nothing),
    so that S3A has started before the queries restart."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    root = jvm.org.apache.hadoop.fs.Path(spark_uri(checkpoint_root))
    try:
        root.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()).exists(root)
    except Py4JError as error:  # only a head start: the queries' own start reports a real failure
        log.warning("standing by: the checkpoint storage could not be read yet: %s", error)


def sample_object(objects: ObjectStore, checkpoint_root: str) -> str | None:
    """A query's metadata file under the checkpoint root, for the executors' first S3A read: small, and never
    deleted while the active driver cleans up old batches (a standby is made after a checkpoint, so there is
    one)."""
    try:
        found = objects.first_named(checkpoint_root, "metadata")
    except StorageError as error:
        log.warning("standing by: the checkpoint root could not be listed: %s", error)
        return None
    return spark_uri(found) if found else None


class Promotion:
    """The operator's promote request (of a term no older than its floor), watched from the moment the standby
    is ready to take over, through its executors' warm-up: `came` is set when it arrives, and `wait` gives the
    batch it names, which bounds the restore (None: the latest). A Lease that merely expired never promotes a
    standby: only the operator knows that the active driver ended, and it advances the checkpoint fence
    before it promotes."""

    def __init__(self, api: client.ApiClient, config: RuntimeConfig) -> None:
        self.came = threading.Event()
        self._api, self._config = api, config
        self._batches: queue.Queue[int | None] = queue.Queue()
        self._done = threading.Event()
        self._watcher = ControlWatcher(
            api,
            config.job.namespace,
            config.pod_name,
            config.control_interval,
            self._on_request,
            config.term_floor,
        )

    def __enter__(self) -> Promotion:
        self._watcher.start()
        threading.Thread(
            target=_poke_on_change,
            args=(self._api, self._config, self._watcher.poke, self._done),
            name="promotion-watch",
            daemon=True,
        ).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._watcher.stop()

    def wait(self) -> int | None:
        return self._batches.get()

    def _on_request(self, request: ControlRequest) -> bool:
        """Done with every request: a standby obeys a promotion and nothing else."""
        if request.action != "promote":
            log.warning("standing by: %s ignored (a standby runs no query)", request)
        elif request.argument and not request.argument.isdigit():
            log.error("standing by: %s ignored: the restore batch is not a number", request)
        else:
            self._batches.put(int(request.argument) if request.argument else None)
            self.came.set()
        return True


def _poke_on_change(
    api: client.ApiClient, config: RuntimeConfig, poke: Callable[[], None], done: threading.Event
) -> None:
    """A watch of the standby's own pod: its promotion is read as soon as the operator writes it, not at the
    next poll (half an interval sooner on average). The poll stays: a watch that breaks only costs that."""
    core = client.CoreV1Api(api)
    selector = f"metadata.name={config.pod_name}"
    while not done.is_set():
        try:
            for _ in watch.Watch().stream(
                core.list_namespaced_pod,
                config.job.namespace,
                field_selector=selector,
                timeout_seconds=_WATCH_SECONDS,
                _request_timeout=_WATCH_SECONDS + 10,
            ):
                if done.is_set():
                    return
                poke()
        except (ApiException, urllib3.exceptions.HTTPError) as error:
            log.debug("standing by: the watch of its pod broke (the poll goes on): %s", error)
            done.wait(config.control_interval)


def _executors_wanted(conf: Mapping[str, str]) -> int:
    return int(conf.get(EXECUTOR_INSTANCES, SPARK_DEFAULT_EXECUTORS))
