"""Driver recovery side by side: plain Spark and ftspark, on the same nodes (real ones, or process-backed) and
the same job (examples/windowed_counts.py, a file of input every FEED_INTERVAL), each driver SIGKILLed `kills`
times.

- plain Spark: no operator. A driver pod made by hand as spark-submit's cluster mode makes one (the Spark
  image's `driver` entrypoint: spark-submit in client mode inside the pod), with the settings ftspark would
  give the job and a checkpoint directory named on the script's command line (plain Spark resumes only from
  a named one). Right after the kill the next driver pod is created: the best a supervisor that neither
  watches nor fences can do.
- ftspark: the FaultTolerantSparkJob with the default driver-Lease timings (15 s / 10 s / 2 s). The operator
  sees the driver container end, releases its Lease, and starts the next attempt.
- ftspark with a standby (driver.standby: 1): the same, but the next attempt is the standby, its SparkSession
  up before the kill, promoted instead of started. Each kill waits for the new standby's session first.
- ftspark with a warm standby (and driver.standbyExecutors: the job's one executor): the standby's executor
  is up and has run its warm-up before the kill, so the first batch after the promotion runs on it at once.
- node loss (with node_losses): the same warm-standby job, the driver's whole node killed instead (its
  kubelet, its containers). The node controller marks it lost after its grace period (--node-grace), and
  the node is started again after each recovery.
- node loss without a standby (with silent_node_losses): the ftspark job, its driver's node killed. The
  operator makes a standby once the node has not renewed its Lease for --node-silence-seconds (the chart's
  20 s), and promotes it at the node controller's verdict, or once the driver's Lease lapsed on the silent
  node (whichever comes first).

Each kill's timeline is watched from outside, every POLL seconds: the next driver pod created, its container
started, its first executor pod created (its SparkContext is up and asks for executors), an executor
running, an executor registered with the driver (its log says so), and the first batch run after the kill (the
sink's marker of a batch run). Shared by
e2e/test_recovery.py (a short run, process-backed nodes) and `make bench` (`python -m
ftspark_dev.scenarios.recovery --nodes real --kills 5 --node-losses 3`, and once with --node-grace 50, the
cluster default).
"""

from __future__ import annotations

import argparse
import contextlib
import secrets
import statistics
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Protocol

from kubernetes import client

from ftspark.domain.lifecycle.timing import summary
from ftspark.domain.models import JobSpec, RecoveryPhases
from ftspark.manifests import (
    AttemptPlan,
    Manifest,
    attempt_secret,
    driver_pod,
    spark_conf,
)
from ftspark.protocol import (
    DRIVER_CONTAINER,
    EXECUTOR_CONTAINER,
    JOB_LABEL,
    SPARK_ROLE_LABEL,
    DriverEnv,
    driver_pod_name,
)
from ftspark.runtime.executors import WATCHING
from ftspark.runtime.session import spark_settings
from ftspark_dev.cluster.processes import cpu_seconds, memory_mib
from ftspark_dev.scenarios.tour import FaultTour, TourWorld
from ftspark_dev.subjects.subject import SinkFolder
from ftspark_dev.subjects.windowed_counts import WindowedCounts
from ftspark_dev.worlds.process_nodes import JOBS_NAMESPACE, running_world
from ftspark_dev.worlds.real_nodes import running_real_world

STEPS = (
    "driver pod created",
    "container started",
    "executors requested",
    "executor running",
    "executor registered",
    "first batch run",
)
REGISTERED = "Successfully registered with driver"  # Spark's executor, in its log (INFO)
POLL = 0.1
FEED_INTERVAL = 1.0
RECOVERY_TIMEOUT = 180.0
# Settled between kills: batches run again after the last recovery (a kill during the first batch of an
# attempt would measure a start, not a recovery).
SETTLED_RUNS = 3
STANDING_BY = "standing by: spark session ready"  # the standby runtime's log, once it is Ready
PROMOTED = "promoted after"  # ... and once it did
WARMED = "executors warmed in"  # a warm standby's log, once its executors ran their warm-up
FIRST_BATCH = "first batch of this attempt"  # a driver's log: its first batch's time by part
COST_WINDOW = 10.0  # seconds of a standby's CPU time, sampled while it waits


class World(TourWorld, Protocol):
    """What the recovery rows need of a world beyond the fault tour's: both kinds of node have it."""

    api: client.ApiClient

    @property
    def bucket(self) -> str: ...
    @property
    def jars(self) -> Path: ...  # the S3A jars, where a driver pod sees them
    def standbys(self, name: str) -> list[client.V1Pod]: ...
    def delete(self, name: str) -> None: ...
    def container_pids(self, pod: str, container: str) -> list[int]: ...


@dataclass(frozen=True)
class Timeline:
    """Seconds from the kill to each of STEPS."""

    seconds: tuple[float, ...]


def watch_recovery(
    world: World,
    is_next_driver: Callable[[client.V1Pod], bool],
    runs: Callable[[], int],
    killed_at: float,
    timeout: float = RECOVERY_TIMEOUT,
) -> Timeline:
    """Polls the API server, the executors' logs and the sink until every step is seen after the kill (runs()
    counted then)."""
    core, log = client.CoreV1Api(world.api), world.log
    runs_before = runs()
    seen: dict[str, float] = {}
    while len(seen) < len(STEPS):
        at = time.monotonic() - killed_at
        if at > timeout:
            raise TimeoutError(f"recovery not complete {timeout:.0f} s after the kill; seen: {seen}")
        pods = core.list_namespaced_pod(JOBS_NAMESPACE, label_selector=SPARK_ROLE_LABEL).items
        driver = next(
            (p for p in pods if p.metadata.labels[SPARK_ROLE_LABEL] == "driver" and is_next_driver(p)), None
        )
        if driver is not None:
            seen.setdefault(STEPS[0], at)
            if any(s.state.running for s in driver.status.container_statuses or []):
                seen.setdefault(STEPS[1], at)
            executors = [p for p in pods if _owned_by(p, driver.metadata.uid)]
            if executors:
                seen.setdefault(STEPS[2], at)
            running = [p.metadata.name for p in executors if p.status.phase == "Running"]
            if running:
                seen.setdefault(STEPS[3], at)
            if STEPS[4] not in seen and any(REGISTERED in log(name) for name in running):
                seen.setdefault(STEPS[4], at)
        if runs() > runs_before:
            seen.setdefault(STEPS[5], at)
        time.sleep(POLL)
    return Timeline(tuple(seen[step] for step in STEPS))


def _owned_by(pod: client.V1Pod, uid: str) -> bool:
    return pod.metadata.labels.get(SPARK_ROLE_LABEL) == "executor" and any(
        owner.uid == uid for owner in pod.metadata.owner_references or []
    )


def _named(name: str) -> Callable[[client.V1Pod], bool]:
    return lambda pod: bool(pod.metadata.name == name)


def _runs(sink: SinkFolder) -> Callable[[], int]:
    return lambda: sum(sink.runs().values())


def _wait(probe: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not probe():
        if time.monotonic() > deadline:
            raise TimeoutError(f"not within {timeout:.0f} s: {what}")
        time.sleep(POLL)


# -- ftspark -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FtsparkRun:
    timelines: list[Timeline]
    leases: list[str]  # how each attempt after a kill got the driver Lease (its runtime's log line)
    # ... and its first batch's time by part, in Spark's words (the runtime's log line)
    first_batches: list[str]
    figures: dict[str, int]  # the fault tour's at the end: records in, counted, lost, duplicated, ...
    promotions: int = 0  # attempts after a kill that were a promoted standby (their runtime's log says so)
    warmed: int = 0  # ... whose executors had run their warm-up before it
    watching: int = 0  # ... whose runtime watched its executor pods for a lost node (runtime/executors.py)
    standby_cost: StandbyCost | None = None  # the first standby's, once its session was up
    # Each recovery as the operator timed it (status.lastFailure.recoveryPhases): from the killed
    # container's end, where the outside timelines count from the kill.
    phases: list[RecoveryPhases] = field(default_factory=list)


@dataclass(frozen=True)
class StandbyCost:
    """What a standby costs while it waits: its container's processes (the runtime and its JVM) and those of
    the executors it keeps warm."""

    rss_mib: float
    cores: float  # CPU time over wall time, sampled over COST_WINDOW

    def __str__(self) -> str:
        return f"RSS {self.rss_mib:.0f} MiB, CPU {self.cores * 100:.1f} % of a core"


def standby_cost(world: World, pod: client.V1Pod, window: float) -> StandbyCost:
    pids = world.container_pids(pod.metadata.name, DRIVER_CONTAINER)
    executors = client.CoreV1Api(world.api).list_namespaced_pod(
        JOBS_NAMESPACE, label_selector=SPARK_ROLE_LABEL
    )
    for executor in executors.items:
        if _owned_by(executor, pod.metadata.uid):
            pids += world.container_pids(executor.metadata.name, EXECUTOR_CONTAINER)
    before, started = sum(cpu_seconds(pid) for pid in pids), time.monotonic()
    time.sleep(window)
    used = sum(cpu_seconds(pid) for pid in pids) - before
    return StandbyCost(sum(memory_mib(pid) for pid in pids), used / (time.monotonic() - started))


def ftspark_recoveries(
    world: World,
    work: Path,
    kills: int,
    *,
    standby: bool = False,
    warm: bool = False,
    node_grace: float | None = None,
) -> FtsparkRun:
    """warm: the standby keeps the job's executor (the example job has one) up and warmed. node_grace: the
    driver's node is killed instead of its container (the node controller's grace period, seconds), and
    started again after each recovery. Each row's job has a name of its own, so that rows may run at once."""
    spec: dict[str, object] = {"short_lease": False}
    if standby:
        spec["driver"] = {"standby": 1, **({"standbyExecutors": 1} if warm else {})}
    row = f"standby-{'warm' if warm else 'cold'}" if standby else "ftspark"
    if node_grace is not None:
        row += "-node"
    subject = WindowedCounts(name=f"counts-{row}")
    tour = FaultTour(world, work / row, subject=subject, feed_interval=FEED_INTERVAL, spec=spec)
    tour.start()
    runs = _runs(tour.output)
    timelines: list[Timeline] = []
    leases: list[str] = []
    first_batches: list[str] = []
    phases: list[RecoveryPhases] = []
    promotions = warmed = watching = 0
    cost: StandbyCost | None = None
    takeovers: list[str] = []  # each successor's promotion line (its restore batch), for a failure's message
    try:
        for _ in range(kills):
            _settle(runs)
            if standby:
                _wait(
                    lambda: _standing_by(world, tour.name, warm),
                    RECOVERY_TIMEOUT,
                    "a standby with its session up" + (" and its executors warmed" if warm else ""),
                )
                if cost is None:
                    (waiting,) = world.standbys(tour.name)
                    cost = standby_cost(world, waiting, COST_WINDOW)
                # The standby's start slowed the job down: its backlog drains first, so that the kill hits a
                # batch of the usual size, as on the other rows.
                _settle(runs)
            killed = tour.current_driver()
            attempt = tour.attempt()
            successor = driver_pod_name(tour.name, attempt + 1)
            with _fault(world, killed, node_grace) as killed_at:
                timeout = RECOVERY_TIMEOUT + (node_grace or 0)
                timelines.append(watch_recovery(world, _named(successor), runs, killed_at, timeout))
            phases.append(operator_timing(world, tour.name, attempt))
            log = world.log(successor)
            leases.append(_line(log, "holding lease", "no lease line"))
            first_batches.append(_line(log, FIRST_BATCH, "no first batch line"))
            promotions += PROMOTED in log
            warmed += WARMED in log
            watching += WATCHING in log
            takeovers.append(_line(log, PROMOTED, "not promoted"))
        try:
            figures = tour.finish()
        except AssertionError as failed:
            raise AssertionError(
                f"the job {spec} after {len(takeovers)} kills {takeovers}: {failed}"
            ) from None
    finally:
        world.delete(tour.name)
    return FtsparkRun(timelines, leases, first_batches, figures, promotions, warmed, watching, cost, phases)


def _line(log: str, marker: str, absent: str) -> str:
    """The log's first line with marker in it."""
    return next((line for line in log.splitlines() if marker in line), absent)


@contextlib.contextmanager
def _fault(world: World, driver: client.V1Pod, node_grace: float | None) -> Iterator[float]:
    """The driver's container SIGKILLed, or its node killed (node_grace given) and started again after the
    block; the fault's time (monotonic)."""
    killed_at = time.monotonic()
    if node_grace is None:
        world.kill_pod(driver.metadata.name)
        yield killed_at
        return
    node = str(driver.spec.node_name)
    world.kill_node(node)
    try:
        yield killed_at
    finally:
        world.restart_node(node)


def operator_timing(world: World, job: str, attempt: int) -> RecoveryPhases:
    """The recovery from the failure of attempt as the status says it, once the operator recorded it."""
    found: list[RecoveryPhases] = []

    def recorded() -> bool:
        failure = world.status(job).get("lastFailure") or {}
        if failure.get("attempt") == attempt and "recoveryPhases" in failure:
            found.append(RecoveryPhases.model_validate(failure["recoveryPhases"]))
        return bool(found)

    _wait(recorded, 30, f"the operator's timing of the recovery from attempt {attempt}")
    return found[-1]


def _standing_by(world: World, job: str, warm: bool) -> bool:
    """A standby is Ready once its session is up; a warm one's row waits for its warm-up too, which a
    promotion would cut short."""
    logs = [world.log(pod.metadata.name) for pod in world.standbys(job)]
    return any(STANDING_BY in log and (WARMED in log or not warm) for log in logs)


def _settle(runs: Callable[[], int]) -> None:
    target = runs() + SETTLED_RUNS
    _wait(lambda: runs() >= target, RECOVERY_TIMEOUT, f"{SETTLED_RUNS} batch runs")


# -- plain Spark ---------------------------------------------------------------------------------------------


class PlainSpark:
    """The same job as driver pods made by hand: attempt n is the pod plain-n-driver, with its RPC Secret and
    executor template, owned by nothing (no operator, no job resource)."""

    name = "plain"

    def __init__(self, world: World, work: Path) -> None:
        self.world, self.core = world, client.CoreV1Api(world.api)
        self.subject = WindowedCounts()
        self.source, self.sink = work / "plain" / "in", SinkFolder(work / "plain" / "out")
        manifest = world.job(self.name, self.source, self.sink.folder, self.subject.example)
        # The script's input and output as the world's pods see them, and the checkpoint directory.
        manifest["spec"]["arguments"].append(f"s3a://{world.bucket}/plain/checkpoint")
        self.spec = JobSpec.model_validate(manifest["spec"])
        self.uid, self.attempt, self.fed = str(uuid.uuid4()), 0, 0
        self._stop = threading.Event()
        self._feeder = threading.Thread(target=self._feed, daemon=True)

    def start(self) -> None:
        self.subject.write_input(self.source, 5)
        self.fed = 5
        pod = self.next_driver()
        try:
            _wait(lambda: bool(self.sink.batches()), RECOVERY_TIMEOUT, "the plain driver's first batch")
        except TimeoutError as error:
            status = self.core.read_namespaced_pod(pod, JOBS_NAMESPACE).status
            raise TimeoutError(f"{error}\n{status}\n{self.world.log(pod)[-4000:]}") from None
        self._feeder.start()

    def next_driver(self) -> str:
        self.attempt += 1
        plan = AttemptPlan(
            namespace=JOBS_NAMESPACE,
            job_name=self.name,
            job_uid=self.uid,
            attempt=self.attempt,
            spec=self.spec,
            checkpoint_location=f"s3://{self.world.bucket}/plain/root",
            restore_from="latest-checkpoint",
        )
        # The plain driver reports no checkpoints: its checkpoint key is never used.
        self._create(attempt_secret(plan, secrets.token_bytes(32), secrets.token_bytes(32)))
        self._create(plain_driver_pod(plan, self.world.jars))
        return driver_pod_name(self.name, self.attempt)

    def kill_and_replace(self) -> tuple[str, float]:
        """SIGKILL the driver, create the next one at once, then delete the dead one's pod."""
        killed = driver_pod_name(self.name, self.attempt)
        killed_at = time.monotonic()
        self.world.kill_pod(killed)
        following = self.next_driver()
        self.core.delete_namespaced_pod(killed, JOBS_NAMESPACE, grace_period_seconds=0)
        return following, killed_at

    def stop(self) -> None:
        self._stop.set()
        selector = f"{JOB_LABEL}={self.name}"  # its drivers, executors, Secrets and templates
        self.core.delete_collection_namespaced_pod(JOBS_NAMESPACE, label_selector=selector)
        self.core.delete_collection_namespaced_secret(JOBS_NAMESPACE, label_selector=selector)
        self.core.delete_collection_namespaced_config_map(JOBS_NAMESPACE, label_selector=selector)

    def _create(self, body: Manifest) -> None:
        """Owned by nothing: there is no job resource (the garbage collector deletes what a missing owner
        owns)."""
        body["metadata"].pop("ownerReferences", None)
        kind = body["kind"]
        create = {
            "Secret": self.core.create_namespaced_secret,
            "ConfigMap": self.core.create_namespaced_config_map,
            "Pod": self.core.create_namespaced_pod,
        }[kind]
        create(JOBS_NAMESPACE, body)

    def _feed(self) -> None:
        while not self._stop.wait(FEED_INTERVAL):
            self.subject.write_input(self.source, 1, first_file=self.fed)
            self.fed += 1


def plain_driver_pod(plan: AttemptPlan, jars: Path) -> Manifest:
    """ftspark's driver pod for the attempt, running spark-submit on the user's script instead of the ftspark
    runtime, with the Spark settings the runtime would build (expanded by the kubelet: the pod IP and the API
    server's address are the pod's own)."""
    env = {
        DriverEnv.BIND_ADDRESS: f"$({DriverEnv.BIND_ADDRESS})",
        "KUBERNETES_SERVICE_HOST": "$(KUBERNETES_SERVICE_HOST)",
        "KUBERNETES_SERVICE_PORT": "$(KUBERNETES_SERVICE_PORT)",
    }
    conf = spark_conf(plan)
    settings = spark_settings(conf, conf["spark.sql.streaming.checkpointLocation"], jars, env)
    pod = driver_pod(plan)
    (container,) = pod["spec"]["containers"]
    main_file = plan.spec.main_application_file.removeprefix("local://")
    container.pop("command")
    container["args"] = [
        "driver",
        *(part for key, value in settings.items() for part in ("--conf", f"{key}={value}")),
        main_file,
        *plan.spec.arguments,
    ]
    container.pop("livenessProbe", None)  # the runtime's health endpoint: plain Spark has none
    return pod


def plain_recoveries(world: World, work: Path, kills: int) -> list[Timeline]:
    plain = PlainSpark(world, work)
    plain.start()
    runs = _runs(plain.sink)
    timelines = []
    try:
        for _ in range(kills):
            _settle(runs)
            following, killed_at = plain.kill_and_replace()
            timelines.append(watch_recovery(world, _named(following), runs, killed_at))
    finally:
        plain.stop()
    return timelines


# -- the table -----------------------------------------------------------------------------------------------


FTSPARK = "ftspark"
STANDBYS = {False: "ftspark with a standby", True: "ftspark with a warm standby"}  # by warm
NODE_LOSS = "node loss: ftspark with a warm standby"
SILENT_NODE_LOSS = "node loss: ftspark, a standby made when the node fell silent"


@dataclass(frozen=True)
class SideBySide:
    plain: list[Timeline]
    # By row: FTSPARK, STANDBYS' and NODE_LOSS (the driver's node killed, not its container), as run.
    ftspark_runs: dict[str, FtsparkRun]

    @staticmethod
    def medians(timelines: list[Timeline]) -> tuple[float, ...]:
        return tuple(
            statistics.median(column) for column in zip(*(t.seconds for t in timelines), strict=True)
        )

    def runs(self) -> list[tuple[str, FtsparkRun]]:
        return list(self.ftspark_runs.items())

    def rows(self) -> list[tuple[str, list[Timeline]]]:
        plain = [("plain Spark", self.plain)] if self.plain else []
        return plain + [(label, run.timelines) for label, run in self.runs()]

    def ratio(self, timelines: list[Timeline]) -> float:
        """The median kill → first batch of timelines over plain Spark's."""
        return self.medians(timelines)[-1] / self.medians(self.plain)[-1]

    def table(self) -> str:
        header = "| driver SIGKILL (unless named) → | " + " | ".join(STEPS) + " |"
        lines = [header, "|---|" + "---|" * len(STEPS)]
        for label, timelines in self.rows():
            medians = self.medians(timelines)
            lines.append(
                f"| {label} (median of {len(timelines)}) | "
                + " | ".join(f"{s:.1f} s" for s in medians)
                + " |"
            )
        lines.append("")
        for label, run in self.runs():
            if run.standby_cost is not None:
                lines.append(f"{label}: the standby's cost while it waits: {run.standby_cost}")
        for label, run in self.runs() if self.plain else []:
            if label not in {NODE_LOSS, SILENT_NODE_LOSS}:
                ratio = self.ratio(run.timelines)
                lines.append(f"{label} / plain Spark, kill → first batch run: {ratio:.2f} times")
        return "\n".join(lines)

    def phase_table(self) -> str:
        """Where the seconds went, as the operator timed them (medians, seconds from the container's end)."""
        names = [name for name in RecoveryPhases.model_fields if name != "standby"]
        lines = [
            "| the operator's timing → | " + " | ".join(_words(name) for name in names) + " |",
            "|---|" + "---|" * len(names),
        ]
        for label, run in self.runs():
            medians = []
            for name in names:
                values = [v for p in run.phases if (v := getattr(p, name)) is not None]
                medians.append(f"{statistics.median(values):.1f}" if values else "-")
            lines.append(f"| {label} (median of {len(run.phases)}) | " + " | ".join(medians) + " |")
        return "\n".join(lines)


def _words(name: str) -> str:
    return name.replace("_", " ")


def row_report(label: str, timelines: list[Timeline], run: FtsparkRun | None = None) -> str:
    """A row's own lines, printed as soon as the row is done: a whole bench runs for an hour."""
    medians = SideBySide.medians(timelines)
    lines = [f"{label}: done, medians of {len(timelines)}: " + _steps(medians)]
    lines += [f"{label} kill {n}: {_steps(timeline.seconds)}" for n, timeline in enumerate(timelines, 1)]
    if run is not None:
        lines += [
            f"{label} kill {n}, the operator's Event: {summary(p)}" for n, p in enumerate(run.phases, 1)
        ]
        for n, (lease, first) in enumerate(zip(run.leases, run.first_batches, strict=True), 1):
            lines += [
                f"{label}: attempt after kill {n}: {lease}",
                f"{label}: attempt after kill {n}: {first}",
            ]
        lines.append(
            f"{label}: the job after its kills: " + ", ".join(f"{k} {v}" for k, v in run.figures.items())
        )
    return "\n".join(lines)


def _steps(seconds: tuple[float, ...]) -> str:
    return ", ".join(f"{step} {s:.1f} s" for step, s in zip(STEPS, seconds, strict=True))


def side_by_side(
    world: World,
    work: Path,
    kills: int,
    *,
    standbys: tuple[bool, ...] = (False, True),
    plain: bool = True,
    at_once: bool = False,
    node_losses: int = 0,
    silent_node_losses: int = 0,
    node_grace: float = 20,
    report: Callable[[str], None] = lambda _: None,
) -> SideBySide:
    """kills: driver kills per row (none: no such rows); standbys: a row with a standby for each, warm or
    not; plain: the plain Spark row (a figure to compare
    with, which proves nothing of ftspark). ftspark first: its run makes the driver ServiceAccount that the
    plain pods use too. at_once: ftspark's rows run at the same time, each with its own job (what CI runs:
    every step and guarantee is the same, only the figures are those of a busier machine). node_losses: a
    row of that many node kills, after the others, the node controller's grace period node_grace;
    silent_node_losses: the same without a standby asked for. report: each row's lines (row_report), as
    the row is done."""
    rows: dict[str, Callable[[], FtsparkRun]] = {}
    if kills:
        rows[FTSPARK] = partial(ftspark_recoveries, world, work, kills)
        for warm in standbys:
            rows[STANDBYS[warm]] = partial(ftspark_recoveries, world, work, kills, standby=True, warm=warm)

    def reported(label: str, row: Callable[[], FtsparkRun]) -> FtsparkRun:
        run = row()
        report(row_report(label, run.timelines, run))
        return run

    with ThreadPoolExecutor(max_workers=max(1, len(rows) if at_once else 1)) as pool:
        started = {label: pool.submit(reported, label, row) for label, row in rows.items()}
        runs = {label: run.result() for label, run in started.items()}
    plain_row = plain_recoveries(world, work, kills) if plain and kills else []
    if plain_row:
        report(row_report("plain Spark", plain_row))
    if node_losses:
        runs[NODE_LOSS] = reported(
            NODE_LOSS,
            partial(
                ftspark_recoveries, world, work, node_losses, standby=True, warm=True, node_grace=node_grace
            ),
        )
    if silent_node_losses:
        runs[SILENT_NODE_LOSS] = reported(
            SILENT_NODE_LOSS,
            partial(ftspark_recoveries, world, work, silent_node_losses, node_grace=node_grace),
        )
    return SideBySide(plain_row, runs)


@contextlib.contextmanager
def _world(nodes: str, node_grace: int) -> Iterator[World]:
    """Real nodes with the operator installed by its chart, as a user has it; or process-backed ones."""
    if nodes == "process":
        if node_grace != 20:
            raise ValueError("process-backed worlds keep the 20 s grace period")
        with running_world() as world:
            yield world
        return
    with running_real_world(nodes=3, node_grace_seconds=node_grace) as real:
        installed = real.helm_install()
        if installed.returncode != 0:
            raise RuntimeError(f"helm install failed:\n{installed.stderr}\n{installed.stdout}")
        yield real


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--kills", type=int, default=5, help="driver kills per side (medians are printed)")
    parser.add_argument("--nodes", choices=("real", "process"), default="real", help="the kind of node")
    parser.add_argument("--node-losses", type=int, default=0, help="node kills, with a warm standby")
    parser.add_argument(
        "--silent-node-losses",
        type=int,
        default=0,
        help="node kills of a job that asks for no standby (it gets one when the node falls silent)",
    )
    parser.add_argument(
        "--node-grace", type=int, default=20, help="the node controller's grace period, seconds"
    )
    args = parser.parse_args()
    with (
        _world(args.nodes, args.node_grace) as world,
        tempfile.TemporaryDirectory(prefix="ftspark-recovery-") as work,
    ):
        print(f"{args.nodes} nodes, the node controller's grace period {args.node_grace} s")
        compared = side_by_side(
            world,
            Path(work),
            args.kills,
            node_losses=args.node_losses,
            silent_node_losses=args.silent_node_losses,
            node_grace=args.node_grace,
            report=lambda lines: print(lines, flush=True),
        )
    print()
    print(compared.table())
    print()
    print(compared.phase_table())


if __name__ == "__main__":
    main()
