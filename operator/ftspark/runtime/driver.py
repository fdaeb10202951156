"""`python -m ftspark.runtime driver <mainApplicationFile> [args...]`: the driver pod's entry point.

Order matters (docs/driver-runtime.md, "Order of a driver's life"): first fetch and check the inputs (the
application files, the checkpoint bucket), so bad input fails at once, without waiting for a Lease; then hold
the driver Lease, before anything of this attempt can write; only then build the session and run the user's
script. A standby (FTSPARK_STANDBY) builds its session, with no executors, before the Lease, and waits for the
operator to promote it. Each query's checkpoint directory is prepared (savepoint restore, rollback) just
before it starts.
Whatever happens, the driver ends with one termination message and the exit code of termination.Exit.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import runpy
import signal
import subprocess
import sys
import threading
import time
import traceback
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import assert_never

from kubernetes import client
from pyspark import SparkContext
from pyspark.sql import SparkSession

from ftspark.adapters.ha import checkpoint_store
from ftspark.adapters.k8s import kube_configuration
from ftspark.domain.fencing import Epoch
from ftspark.domain.liveness import NO_DATA_INTERVAL_KEY, Stuck
from ftspark.ports.stores import CheckpointStore
from ftspark.protocol import (
    EXECUTORS_NOT_STARTED,
    NO_PROGRESS,
    NO_RESTORABLE_CHECKPOINT,
    ROLLBACK_ANNOTATION,
    SAVEPOINT_ANNOTATION,
    STOP_TIMED_OUT,
    STOPPED,
    ControlRequest,
    Exit,
    RuntimeEnv,
)
from ftspark.runtime import appfiles, savepoint, standby
from ftspark.runtime.appfiles import Application, ApplicationFileError
from ftspark.runtime.checkpoint import CheckpointDir, CheckpointError
from ftspark.runtime.classdata import spark_home
from ftspark.runtime.config import (
    ConfigError,
    RuntimeConfig,
    missing_s3a_jars,
    s3a_in_spark_jars,
)
from ftspark.runtime.control import ControlWatcher, stop_at_boundary
from ftspark.runtime.executors import LostNodeExecutors
from ftspark.runtime.fencing import DriverLease
from ftspark.runtime.liveness import HealthEndpoint, SignsOfLife, Watchdog, executors_waiting, start_watchdog
from ftspark.runtime.objects import ObjectStore, StorageError, join, s3_client
from ftspark.runtime.reporting import PointerReporter, ProgressListener, StartMarks
from ftspark.runtime.savepoint import SavepointError
from ftspark.runtime.session import (
    Queries,
    SparkNotStartedError,
    StoppedBeforeStart,
    build_session,
    first_executor_registered,
    spark_settings,
    spark_uri,
)
from ftspark.runtime.termination import Ending, StderrTail, failure_summary
from ftspark.runtime.warmup import warm_up

log = logging.getLogger("ftspark.runtime")

# After a stop the script normally returns at once (its queries stopped); one that does not (it waits for
# something else, or starts new queries) is cut off.
SCRIPT_GRACE_SECONDS = 10.0
JVM_REAP_SECONDS = 5.0  # a SIGKILLed JVM is gone in milliseconds; this only bounds a stuck kernel


def kube_client(kubeconfig: str | None, pod_name: str) -> client.ApiClient:
    """A client that never retries by itself: the Lease's deadlines bound every call instead."""
    configuration = kube_configuration(kubeconfig)
    configuration.retries = 0
    api = client.ApiClient(configuration)
    api.user_agent = f"ftspark-driver ({pod_name})"  # names the attempt in the API server's audit log
    return api


class Driver:
    def __init__(self, config: RuntimeConfig, ending: Ending, started: datetime) -> None:
        self.config = config
        self.ending = ending
        self.marks = StartMarks(started)  # the steps of this driver's start, sent with its pointers
        self._s3 = s3_client(config.spark_conf)
        self.objects = ObjectStore(self._s3)
        self.queries = Queries(config.checkpoint_root, self._prepare)
        self._checkpoints: CheckpointStore | None = None
        self._reporter: PointerReporter | None = None
        self._watcher: ControlWatcher | None = None
        self._watchdog: Watchdog | None = None
        self._executors: LostNodeExecutors | None = None
        self._api: client.ApiClient | None = None  # once the inputs are checked
        self._stopping = threading.Lock()  # held while a requested stop runs
        self.session_ready = threading.Event()  # the SparkSession is up (GET /readyz)

    # -- the run -----------------------------------------------------------------------------------------

    def run(self, main_file: str, args: list[str]) -> None:
        cfg = self.config
        try:
            app = appfiles.fetch(
                self.objects, main_file, appfiles.shipped(cfg.spark_conf), max_bytes=cfg.deps_max_bytes
            )
        except ApplicationFileError as error:
            self.ending.set(Exit.BAD_INPUT, "ApplicationFile", str(error))
            return
        if not Path(app.main_file).is_file():
            message = f"main application file {app.main_file} not found"
            self.ending.set(Exit.BAD_INPUT, "MainFileMissing", message)
            return
        try:
            self.objects.check(cfg.checkpoint_root)
        except StorageError as error:
            self.ending.set(Exit.BAD_INPUT, "StorageUnavailable", f"checkpoint storage: {error}")
            return
        api = self._api = kube_client(cfg.kubeconfig, cfg.pod_name)
        lease = DriverLease(api, cfg, on_lost=lambda why: self.fence_out("LeaseLost", why))
        # The Lease is read while the session starts, so that one its holder left (its node lost) is taken as
        # soon as it lapses, and the session's start overlaps that wait: it writes nothing of the job's.
        with lease.followed():
            spark = self._stand_by(api, app) if cfg.standby else self._start_session(api, app)
        cfg = self.config  # a promoted standby's: with the restore batch its promotion named
        if not lease.acquire(cfg.lease_acquire_timeout):
            self.ending.set(
                Exit.FENCED_OUT,
                "LeaseUnavailable",
                f"the driver lease was not ours within {cfg.lease_acquire_timeout:g} s",
            )
            return
        self.marks.now("lease_acquired")
        try:
            self._checkpoints = checkpoint_store(
                cfg.ha_store,
                api,
                self._s3,
                cfg.checkpoint_key_file.read_bytes(),
                results_namespace=cfg.results_namespace,
                namespace=cfg.job.namespace,
            )
            self._reporter = PointerReporter(
                self._checkpoints,
                self.objects,
                cfg.job,
                Epoch(scope="driver", term=cfg.attempt, holder=cfg.pod_name),
                retained=cfg.retained_checkpoints,
                on_fenced=lambda why: self.fence_out("FencedOut", why),
                marks=self.marks,
            )
            self._watcher = ControlWatcher(
                api, cfg.job.namespace, cfg.pod_name, cfg.control_interval, self._control, cfg.term_floor
            )
            self._run_script(app, args, spark)
        finally:
            if self._watcher is not None:
                self._watcher.stop()
            if self._watchdog is not None:
                self._watchdog.stop()
            if self._executors is not None:
                self._executors.stop()
            if self.ending.code != Exit.FENCED_OUT:
                self.report_final()
            lease.release()

    def _stand_by(self, api: client.ApiClient, app: Application) -> SparkSession:
        """Build the session now, with no executors or the few it keeps warm, then wait for the operator's
        promotion, writing nothing of the job's (runtime/standby.py). It is Ready, so promotable, once its
        session is up: the executors' warm-up runs while it waits, cut short by a promotion that comes first
        (a standby made when its node fell silent is promoted at the node's loss, maybe that soon)."""
        started = time.monotonic()
        spark = self._session(app, standing_by=True)
        self._watch_executors(api, spark)
        root = self.config.checkpoint_root
        standby.open_storage(spark, root)
        self.session_ready.set()
        self.marks.now("session_up")
        log.info(
            "standing by: spark session ready in %.1f s, waiting to be promoted", time.monotonic() - started
        )
        with standby.Promotion(api, self.config) as promotion:
            if warm := standby.warm_executors(self.config, app.spark_conf(self.config.spark_conf)):
                warmed = warm_up(spark, standby.sample_object(self.objects, root), until=promotion.came)
                if warmed is None:
                    log.info("standing by: promoted during its %d executors' warm-up, cut short", warm)
                else:
                    log.info("standing by: %d executors warmed in %.1f s", warm, warmed)
            restore_batch = promotion.wait()
        self.marks.now("promoted")
        self.config = dataclasses.replace(self.config, restore_batch=restore_batch)
        log.info(
            "promoted after %.1f s standing by (restore batch: %s)", time.monotonic() - started, restore_batch
        )
        return spark

    def _start_session(self, api: client.ApiClient, app: Application) -> SparkSession:
        started = time.monotonic()
        spark = self._session(app)
        self._watch_executors(api, spark)
        self.session_ready.set()
        self.marks.now("session_up")
        log.info("spark session ready in %.1f s", time.monotonic() - started)
        return spark

    def _session(self, app: Application, *, standing_by: bool = False) -> SparkSession:
        conf = app.spark_conf(self.config.spark_conf)
        settings = spark_settings(conf, self.config.checkpoint_root, self._jars())
        # With dynamic allocation Spark's allocation manager asks for executors as tasks come: none before.
        warm = standing_by and not standby.dynamic_allocation(settings)
        return build_session(settings, executors=standby.warm_executors(self.config, conf) if warm else None)

    def _watch_executors(self, api: client.ApiClient, spark: SparkSession) -> None:
        """On Kubernetes, executors on a lost node are given up at once (runtime/executors.py)."""
        context = spark.sparkContext
        if (context.master or "").startswith("k8s://"):
            self._executors = LostNodeExecutors(api, self.config.job.namespace, context.applicationId)
            self._executors.start()

    def _run_script(self, app: Application, args: list[str], spark: SparkSession) -> None:
        assert self._reporter is not None and self._watcher is not None
        self.queries.install()
        if self.config.standby:
            standby.request_remaining_executors(spark, self.config, app.spark_conf(self.config.spark_conf))
        signs = SignsOfLife()
        listener = ProgressListener(
            self.queries, self._reporter, signs, partial(first_executor_registered, spark)
        )
        spark.streams.addListener(listener)
        idle_interval = spark.conf.get(NO_DATA_INTERVAL_KEY)
        self._watchdog = start_watchdog(signs, self.config.progress_timeout, idle_interval, self.no_progress)
        self._watcher.start()
        if self.ending.decided:  # stopped before the script ran
            return
        sys.argv = [app.main_file, *args]
        # The shipped virtualenvs' packages, for the script (the runtime's own modules are loaded by now).
        sys.path[1:1] = app.python_paths
        sys.stderr = stderr = StderrTail(sys.stderr)
        try:
            runpy.run_path(app.main_file, run_name="__main__")
            # A script may return with its queries still running: they run until they end.
            for running in self.queries.all():
                while running.query.isActive and not self.ending.decided:
                    running.query.awaitTermination(1)
        except StoppedBeforeStart as refused:
            log.info("%s", refused)
        except SystemExit as exit_:
            if exit_.code not in (None, 0):
                self.ending.set(Exit.SCRIPT_FAILED, "ScriptFailed", stderr.exit_summary(exit_.code))
        except (CheckpointError, SavepointError, StorageError) as error:
            self.ending.set(Exit.BAD_INPUT, bad_input_reason(error), str(error))
        except BaseException as error:
            log.error("the script failed:\n%s", traceback.format_exc())
            self.ending.set(Exit.SCRIPT_FAILED, "ScriptFailed", failure_summary(error))
        with self._stopping:  # a requested stop that made the script return decides how it ended
            self.ending.set(Exit.FINISHED, "Finished", "the application finished")

    def _jars(self) -> Path:
        jars = self.config.jars_dir
        on_s3 = spark_uri(self.config.checkpoint_root).startswith("s3a://")
        if on_s3 and not any(jars.glob("*.jar")):
            home = Path(spark_home())
            if not s3a_in_spark_jars(home):  # Spark's classpath: a user's own image may carry S3A there
                raise StorageError(missing_s3a_jars(jars, home))
        return jars

    # -- checkpoints -------------------------------------------------------------------------------------

    def _prepare(self, name: str, location: str) -> None:
        """Before query `name` starts on location: restore the initial savepoint into an empty directory,
        else roll a damaged (or operator-rejected) latest checkpoint back to the newest good batch."""
        checkpoint = CheckpointDir(self.objects, location)
        if self.config.initial_savepoint and not checkpoint.has_metadata():
            batch = savepoint.restore(self.objects, self.config.initial_savepoint, name, location)
            log.info(
                "query %s starts from savepoint %s at batch %s", name, self.config.initial_savepoint, batch
            )
            return
        checking = time.monotonic()
        rollback = checkpoint.repair(self._restore_bound(location))
        log.info("query %s: its checkpoint checked in %.2f s", name, time.monotonic() - checking)
        if rollback is not None:
            log.warning("checkpoint rollback: %s", rollback)
            self.ending.rollbacks.append(str(rollback))
            if self._watcher is not None:  # the operator turns it into an Event while the job runs on
                self._watcher.annotate(ROLLBACK_ANNOTATION, json.dumps(self.ending.rollbacks))

    def _restore_bound(self, location: str) -> int | None:
        """FTSPARK_RESTORE_BATCH binds this query when the operator skipped a newer pointer of it as unusable;
        a committed batch whose pointer was never written (killed in between) is simply kept."""
        wanted = self.config.restore_batch
        if wanted is None or self._checkpoints is None:
            return None
        mine = [p.batch_id for p in self._checkpoints.pointers(self.config.job) if p.location == location]
        return wanted if wanted in mine and max(mine) > wanted else None

    def report_final(self) -> None:
        """Pointers for the batches committed last (their progress events may not have been delivered)."""
        if self._reporter is None:
            return
        for running in self.queries.all():
            try:
                batch = CheckpointDir(self.objects, running.location).latest_commit()
            except StorageError as error:
                log.warning("final checkpoint of %s unknown: %s", running.name, error)
                continue
            if batch is not None:
                self._reporter.committed(running.location, batch)

    def last_committed(self) -> dict[str, int]:
        if self._reporter is None:
            return {}
        by_location = self._reporter.last_committed()
        return {q.name: by_location[q.location] for q in self.queries.all() if q.location in by_location}

    # -- control and fencing (called from other threads) -------------------------------------------------

    def fence_out(self, reason: str, why: str) -> None:
        if not self.ending.set(Exit.FENCED_OUT, reason, why):
            return
        # Another attempt may hold the Lease (lease duration - renew deadline) after we missed our deadline:
        # by then nothing of ours may write. The queries get half of that to stop, then the JVM is killed.
        grace = max(0.2, (self.config.lease_duration - self.config.renew_deadline) / 2)
        log.error("%s: stopping every query, killing the JVM in %.1f s", why, grace)
        # Not on the caller's thread: that may be Spark's listener thread, which query.stop() waits for.
        threading.Thread(target=self._stop_all, name="fence-out", daemon=True).start()
        self._cut_off_later(grace, kill_jvm=True)

    def no_progress(self, found: Stuck, timeout: float) -> None:
        """A query is stuck (the JVM is likely hung, or no executor ever started): end at once, as a failure
        the operator restarts. The JVM is killed, not asked: a hung one would not answer."""
        silent = f"query {found.query} showed no sign of life (no batch, no idle event) for "
        silent += f"{found.silent_seconds:.0f} s, the progress timeout is {timeout:g} s"
        reason, message = NO_PROGRESS, f"{silent}: the driver is hung"
        conf = self.config.spark_conf
        if self._api is not None and conf.get("spark.master", "").startswith("k8s://"):
            waiting = executors_waiting(self._api, self.config.job.namespace, conf.get("spark.app.id", ""))
            if waiting is not None:
                reason, message = EXECUTORS_NOT_STARTED, f"{silent}, and no executor runs: {waiting}"
        if not self.ending.set(Exit.NO_PROGRESS, reason, message):
            return  # already ending some other way
        log.error("%s: killing the JVM and exiting", message)
        self.exit_now(kill_jvm=True)

    def _stop_all(self) -> None:
        for running in self.queries.all():
            try:
                running.query.stop()
            except Exception:
                log.exception("stopping query %s failed", running.name)

    def _cut_off_later(self, delay: float = SCRIPT_GRACE_SECONDS, *, kill_jvm: bool = False) -> None:
        timer = threading.Timer(delay, self._cut_off, kwargs={"kill_jvm": kill_jvm})
        timer.daemon = True
        timer.start()

    def _cut_off(self, *, kill_jvm: bool) -> None:
        log.error("the script did not return in time after its queries were told to stop: exiting")
        self.exit_now(kill_jvm=kill_jvm)

    def terminate(self) -> None:
        """SIGTERM: the pod is being deleted (a cancel, an upgrade, a standby no longer wanted) or evicted.
        Ended at once, as the kubelet's SIGKILL would end it after the grace period: the driver is PID 1 of
        its container, and PID 1 has no default action for SIGTERM, so a driver without this handler waited
        out the whole grace period (30 s) while its successor, which takes its pod's name, could not start. An
        ending decided before (a stop) stays the ending."""
        message = "SIGTERM (pod deleted or evicted): ended at once; the uncommitted batch, if any, runs again"
        self.ending.set(Exit.TERMINATED, "DriverKilled", message)
        self.exit_now(kill_jvm=True)

    def exit_now(self, *, kill_jvm: bool) -> None:
        """End the process with the ending as it is; kill_jvm: without Spark's orderly shutdown."""
        self.ending.write_once(self.config.termination_log, self.last_committed())
        gateway = SparkContext._gateway  # pyspark keeps the JVM process only there
        jvm = getattr(gateway, "proc", None)
        if kill_jvm and jvm is not None:
            # Not left to exit on its own when our pipe closes: its shutdown hooks could still write. Reaped
            # before we exit: SIGKILL is delivered, not done; a JVM with many threads takes a moment to die.
            jvm.kill()
            try:
                jvm.wait(JVM_REAP_SECONDS)
            except subprocess.TimeoutExpired:
                log.error("the JVM (pid %d) was still there %.0f s after SIGKILL", jvm.pid, JVM_REAP_SECONDS)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(int(self.ending.code))

    def _control(self, request: ControlRequest) -> bool:
        """Whether the request is done with: a savepoint waits for the script's queries to start."""
        match request.action:
            case "savepoint":
                if not self.queries.all():
                    return False
                self._savepoint(request.argument)
            case "stop":
                self._stop(savepoint_id="")
            case "stop-savepoint":
                self._stop(savepoint_id=request.argument)
            case "promote":
                log.info("%s: promoted already", request)
            case unknown:
                assert_never(unknown)
        return True

    def _stop(self, savepoint_id: str) -> None:
        """At the batch boundary (cancelled after the stop timeout), then a savepoint if one is asked."""
        with self._stopping:
            running = self.queries.close()  # a script still starting its queries starts no more
            graceful = stop_at_boundary([q.query for q in running], self.config.stop_timeout)
            self.report_final()
            if savepoint_id:
                self._savepoint(savepoint_id)
            batches = self.last_committed()
            reason = STOPPED if graceful else STOP_TIMED_OUT
            if not running:
                message = "stopped before its queries started: their checkpoints as the attempt before left"
            elif graceful:
                message = f"stopped with a final checkpoint: last committed batches {batches}"
            else:
                message = f"no batch boundary within {self.config.stop_timeout:g} s: cancelled at {batches}"
            self.ending.set(Exit.FINISHED, reason, message)
        self._cut_off_later()

    def _savepoint(self, savepoint_id: str) -> None:
        assert self._watcher is not None
        target = join(self.config.storage, "savepoints", savepoint_id)
        locations = {q.name: q.location for q in self.queries.all()}
        try:
            taken = savepoint.take(
                self.objects, savepoint_id, target, locations, str(self.config.job), self.config.job_uid
            )
        except (SavepointError, StorageError) as error:
            log.error("savepoint %s failed: %s", savepoint_id, error)
            self._watcher.annotate(
                SAVEPOINT_ANNOTATION, json.dumps({"id": savepoint_id, "error": str(error)})
            )
            return
        log.info("savepoint %s at %s: batches %s", savepoint_id, taken.location, dict(taken.batches))
        result = {"id": savepoint_id, "location": taken.location, "batches": dict(taken.batches)}
        self._watcher.annotate(SAVEPOINT_ANNOTATION, json.dumps(result))


BadInput = CheckpointError | SavepointError | StorageError | SparkNotStartedError


def bad_input_reason(error: BadInput) -> str:
    """The one word the operator reads: no restorable checkpoint asks for a manual restore."""
    if isinstance(error, CheckpointError):
        return NO_RESTORABLE_CHECKPOINT
    return type(error).__name__.removesuffix("Error")


def serve_health(cfg: RuntimeConfig, ready: threading.Event) -> None:
    """The probes' endpoint, first: the liveness probe starts counting while Spark still starts. ready: set
    once the SparkSession is up (the readiness probe's answer)."""
    if cfg.health_port is None:
        return
    try:
        HealthEndpoint(cfg.bind_address, cfg.health_port, ready).start()
    except OSError as error:
        # Only where pods share a network (process-backed test nodes, which run no probes). In a pod of its
        # own, the probe then fails and the kubelet restarts the driver, with this line in its log.
        log.warning("no liveness endpoint on %s:%d: %s", cfg.bind_address, cfg.health_port, error)


def main(argv: list[str]) -> int:
    started = datetime.now(UTC)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)  # it logs every callback at INFO
    if len(argv) < 2 or argv[0] != "driver":
        print("usage: python -m ftspark.runtime driver <mainApplicationFile> [args...]", file=sys.stderr)
        return int(Exit.BAD_INPUT)
    ending = Ending()
    try:
        cfg = RuntimeConfig.from_env()
    except ConfigError as error:
        ending.set(Exit.BAD_INPUT, error.reason, str(error))
        ending.write_once(Path(os.environ.get(RuntimeEnv.TERMINATION_LOG) or "/dev/termination-log"), {})
        return int(ending.code)
    driver = Driver(cfg, ending, started)
    # Not on the signal's frame, which may hold a lock that terminate takes (the ending's).
    signal.signal(
        signal.SIGTERM,
        lambda *_: threading.Thread(target=driver.terminate, name="sigterm", daemon=True).start(),
    )
    serve_health(cfg, driver.session_ready)
    try:
        driver.run(argv[1], argv[2:])
    except (CheckpointError, SavepointError, StorageError, SparkNotStartedError) as error:
        ending.set(Exit.BAD_INPUT, bad_input_reason(error), str(error))
    except Exception as error:
        log.exception("the driver runtime failed")
        ending.set(Exit.BAD_INPUT, "RuntimeFailed", f"{type(error).__name__}: {error}")
    if ending.code == Exit.FENCED_OUT:
        driver.exit_now(kill_jvm=True)  # no orderly Spark shutdown: it could still write
    ending.write_once(cfg.termination_log, driver.last_committed())
    return int(ending.code)
