"""The example streaming job driven through faults: the end-to-end suite and `make demo` take this tour, on
process-backed nodes (ftspark_dev.worlds.process_nodes) or on real nodes (ftspark_dev.worlds.real_nodes).
Each step injects one fault and measures fault -> next committed batch.

A new fault is a step here that ends in _progress: on FaultTour when both kinds of node can suffer it (what it
needs of the installation goes into TourWorld, which worlds.process_nodes.World and
worlds.real_nodes.RealWorld implement), on ProcessFaultTour when only process-backed nodes can inject it, on
RealFaultTour when only real nodes can show the answer to it; the soak (soak.py, e2e/test_soak.py),
tests/realnodes/test_installation.py and demo.py choose the steps they take."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol, Self

import urllib3
from kubernetes import client

from ftspark.domain.lifecycle.timing import summary
from ftspark.domain.models import RecoveryPhases
from ftspark.protocol import NO_PROGRESS, SPARK_ROLE_LABEL, DriverEnv, Exit, driver_pod_name
from ftspark_dev.cluster.controlplane import ControlPlane
from ftspark_dev.cluster.operators import condition
from ftspark_dev.subjects.subject import SinkFolder, Subject, Verdict
from ftspark_dev.subjects.windowed_counts import WindowedCounts
from ftspark_dev.worlds.process_nodes import World
from ftspark_dev.worlds.real_nodes import RealWorld


class TourWorld(Protocol):
    """An installation the tour can drive: jobs in its jobs namespace, and the faults both kinds of node
    can suffer."""

    plane: ControlPlane

    def job(
        self, name: str, input_dir: Path, output_dir: Path, example: Path, **spec: Any
    ) -> dict[str, Any]: ...
    def create(self, body: dict[str, Any]) -> None: ...
    def delete(self, name: str) -> None: ...
    def job_names(self) -> list[str]: ...
    def patch(self, name: str, spec: dict[str, Any]) -> None: ...
    def status(self, name: str) -> dict[str, Any]: ...
    def drivers(self, name: str) -> list[client.V1Pod]: ...
    def events(self, name: str, uid: str | None = None) -> list[str]: ...
    def uid(self, name: str) -> str: ...
    def log(self, pod: str) -> str: ...
    def kill_pod(self, pod: str) -> None: ...
    def kill_pods(self, label_selector: str) -> list[str]: ...
    def kill_node(self, node: str) -> None: ...
    def restart_node(self, node: str) -> None: ...
    def operator_leader(self) -> str | None: ...
    def acting_leaders(self) -> list[str]: ...

    def kill_operator(self, identity: str) -> None:
        """SIGKILL of a replica; it comes back as its Deployment brings it back."""


class Watch:
    """Samples all along what must never happen: two drivers of the job alive at once, two operator replicas
    acting as leader at once (each replica's liveness probe says whether it leads within its renew deadline;
    a successor can only take over a lease duration after the last renewal, so a sampling round, far shorter
    than that gap, cannot see a handover as an overlap). Also records the phases the job went through."""

    def __init__(self, world: TourWorld, job: str) -> None:
        self.world, self.job, self._stop = world, job, threading.Event()
        self.most_alive = self.most_leaders = 0
        self.phases_seen: list[str] = []
        self.degraded_seen: list[str] = []  # the reasons of Degraded=True, each once
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.wait(0.3):
            try:
                alive = [p for p in self.world.drivers(self.job) if p.status.phase in {"Pending", "Running"}]
                self.most_alive = max(self.most_alive, len(alive))
                status = self.world.status(self.job)
            except (client.ApiException, urllib3.exceptions.HTTPError):
                continue  # the API server is down for a while in one of the steps
            phase = status.get("phase")
            if phase and (not self.phases_seen or self.phases_seen[-1] != phase):
                self.phases_seen.append(phase)
            for entry in status.get("conditions") or []:
                degraded = entry["type"] == "Degraded" and entry["status"] == "True"
                if degraded and entry["reason"] not in self.degraded_seen:
                    self.degraded_seen.append(entry["reason"])
            self.most_leaders = max(self.most_leaders, len(self.world.acting_leaders()))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


class FaultTour:
    def __init__(
        self,
        world: TourWorld,
        work: Path,
        *,
        subject: Subject | None = None,
        feed_interval: float = 2.0,
        spec: dict[str, Any] | None = None,
    ) -> None:
        """spec: fields of the job's spec over the world's defaults."""
        self.subject = subject or WindowedCounts()
        self.world, self.name, self.feed_interval = world, self.subject.name, feed_interval
        self.spec = spec or {}
        self.source, self.output = work / self.name / "in", SinkFolder(work / self.name / "out")
        self.recovery: dict[str, float] = {}  # the last time of each step
        self.timeline: list[tuple[str, float]] = []  # every step's time, in order
        # The operator's own timing of each recovery a fault caused (status.lastFailure.recoveryPhases).
        self.timings: list[tuple[str, RecoveryPhases]] = []
        self._timed_attempt = 0
        self._stop_feeding = threading.Event()
        self._feeder = threading.Thread(target=self._feed, daemon=True)
        self.fed = 0
        self.watch: Watch | None = None
        self.damaged = ""
        self.upgrades = 0
        self._submitted = 0.0  # monotonic

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        """The job deleted and its pods gone, pass or fail, as the recovery bench's rows and the process
        tier's fixture do: a job left running (a driver, its standby, an executor) would slow down every test
        after it on the same nodes. A failed tour first prints what the job went through."""
        self._end_feeding()
        if self.watch is not None:
            self.watch.stop()
        if self.name not in self.world.job_names():
            return
        if error is not None:
            print(f"\n{self.name}: events {self.events()}\nlast failure: {self.failure_evidence()}")
        self.world.delete(self.name)

    # -- steps ---------------------------------------------------------------------------------------------

    def start(self) -> None:
        """Submit the job, feed it a file every feed_interval; returns once the first batch is committed."""
        self.submit()
        self.feed_after_first_batch()

    def submit(self) -> None:
        """Write the first input files and create the job (start's first half: tours started together)."""
        if self.output.batches() or self.output.runs():
            # Its verdict would count another run's batches as this job's output.
            raise ValueError(
                f"{self.output.folder} holds another run's output: a tour needs a folder of its own"
            )
        self.subject.write_input(self.source, 5)
        self.fed = 5
        self._submitted = time.monotonic()
        manifest = self.world.job(
            self.name, self.source, self.output.folder, example=self.subject.example, **self.spec
        )
        self.world.create(manifest)
        self.watch = Watch(self.world, self.name)

    def feed_after_first_batch(self) -> None:
        """Start's second half: once the first batch is committed, a file every feed_interval."""
        self.wait_for(self.batches, 300, "the first batch")
        self._took("submit -> first committed batch", time.monotonic() - self._submitted)
        self._feeder.start()

    def kill_executor(self) -> None:
        killed = self.world.kill_pods(f"{SPARK_ROLE_LABEL}=executor")
        assert killed, "an executor was running"
        self._progress("executor kill", 240)

    def kill_driver(self) -> None:
        self.world.kill_pod(self.current_driver().metadata.name)
        self._progress("driver kill", 300)

    def wait_for_standby(self, timeout: float = 300) -> None:
        """Until the hot standby driver (driver.standby: 1) can take over: the StandbyReady condition."""
        started = time.monotonic()
        self.wait_for(self._standby_ready, timeout, "the hot standby driver ready to take over")
        self._took("hot standby driver ready", time.monotonic() - started)

    def _standby_ready(self) -> bool:
        return condition(self.world.status(self.name), "StandbyReady").get("status") == "True"

    def kill_leader(self) -> None:
        leader = self.world.operator_leader()
        assert leader is not None
        killed = time.monotonic()
        self.world.kill_operator(leader)
        self._progress("operator leader kill", 120)
        self.wait_for(self.world.acting_leaders, 60, "an operator leader acting again")
        self._took("operator leader kill -> a leader acts", time.monotonic() - killed)

    def kill_node(self) -> None:
        node = self.current_driver().spec.node_name
        self.world.kill_node(node)
        self._progress(f"node kill ({node}, the driver's)", 360)
        self.world.restart_node(node)

    def stop_and_resume(self) -> None:
        self.world.patch(self.name, {"desiredState": "stopped"})
        self.wait_for(lambda: self.world.status(self.name).get("phase") == "Stopped", 240, "Stopped")
        self.world.patch(self.name, {"desiredState": "running"})
        self._progress("stop, then resume", 300)

    def cancel_and_resume(self, damage: Callable[[], str] | None = None) -> None:
        """Cancel (no final checkpoint: the running batch is lost and runs again), then resume; damage, if
        given, hurts the checkpoint in between and names the step."""
        self.world.patch(self.name, {"desiredState": "cancelled"})
        self.wait_for(lambda: self.world.status(self.name).get("phase") == "Cancelled", 120, "Cancelled")
        self.wait_for(lambda: not self._alive_drivers(), 120, "no driver after the cancel")
        step = damage() if damage else "cancel, resume"
        self.world.patch(self.name, {"desiredState": "running"})
        self._progress(step, 300)

    def upgrade(self) -> None:
        """A spec change (a Spark setting the job ignores) rolled out in the job's upgrade mode: a new
        attempt, then progress."""
        attempt, started = self.attempt(), time.monotonic()
        self.upgrades += 1
        self.world.patch(self.name, {"sparkConf": {"spark.ftspark.upgrade": str(self.upgrades)}})
        self.wait_for(lambda: self.attempt() > attempt, 120, "the upgraded attempt")
        self._progress("spec upgrade", 300, since=started)

    def attempt(self) -> int:
        return int(self.world.status(self.name).get("attempt", 0))

    def finish(self) -> dict[str, int]:
        """Stops feeding, flushes, waits until the output is what the batch computation says; the figures."""
        self.stop_feeding()
        # After many faults a job may be far behind its input (one file per batch): wait while it catches up.
        try:
            self.wait_for(
                lambda: self.verdict().exact, 180, "every record in the output", moving=self.batches
            )
        except AssertionError as stalled:
            raise AssertionError(f"{self.verdict()}\n{stalled}") from None
        assert self.watch is not None
        self.watch.stop()
        verdict = self.verdict()
        return {
            "records in": verdict.records_in,
            "records counted": verdict.counted,
            "lost": verdict.lost,
            "duplicated": verdict.duplicated,
            "wrong": verdict.wrong,
            "re-processed by re-run batches": verdict.reprocessed,
            "batches": len(self.output.batches()),
            "attempts": int(self.world.status(self.name).get("attempt", 0)),
            "attempts that were a promoted standby": self.events().count("StandbyPromoted"),
            "most drivers alive at once": self.watch.most_alive,
            "most operator leaders acting at once": self.watch.most_leaders,
        }

    def failure_evidence(self) -> str:
        """The job's last failure and what its driver's log says of it: the exceptions and lost tasks that
        the status's one-line message summarizes."""
        failure = self.world.status(self.name).get("lastFailure")
        if not failure:
            return "no failure"
        log = self.world.log(driver_pod_name(self.name, int(failure["attempt"])))
        telling = [line for line in log.splitlines() if _TELLING.search(line)]
        return "\n".join([str(failure), *telling[-80:]])

    def stop_feeding(self) -> None:
        """No more input but the flush (finish's first step; tours finished together each take it first, so
        none is fed while another catches up). Once only."""
        if self._stop_feeding.is_set():
            return
        self._end_feeding()
        self.subject.flush(self.source, self.fed)

    def _end_feeding(self) -> None:
        self._stop_feeding.set()
        if self._feeder.is_alive():  # not started when the tour failed before its first batch
            self._feeder.join()

    def events(self) -> list[str]:
        """The reasons of this job's Events (not those of an earlier job of the same name)."""
        return self.world.events(self.name, uid=self.world.uid(self.name))

    def verdict(self) -> Verdict:
        return self.subject.verdict(self.output.folder, self.fed)

    def report(self, figures: dict[str, int]) -> str:
        """One line per fault's recovery time and per figure (log viewers cut long lines)."""
        lines = [f"{fault + ':':<48} {seconds:6.1f} s" for fault, seconds in self.recovery.items()]
        lines += [f"{figure + ':':<48} {value}" for figure, value in figures.items()]
        lines += [f"{fault}, the operator's timing: {summary(phases)}" for fault, phases in self.timings]
        return "\n".join(lines)

    # -- helpers -------------------------------------------------------------------------------------------

    def _feed(self) -> None:
        while not self._stop_feeding.wait(self.feed_interval):
            self.subject.write_input(self.source, 1, first_file=self.fed)
            self.fed += 1

    def batches(self) -> int:
        return len(self.output.batches())

    def _took(self, step: str, seconds: float) -> None:
        self.recovery[step] = seconds
        self.timeline.append((step, seconds))

    def current_driver(self) -> client.V1Pod:
        """The driver pod of the job's current attempt (names do not sort by attempt: 10 < 9)."""
        pod = driver_pod_name(self.name, int(self.world.status(self.name)["attempt"]))
        (driver,) = [p for p in self.world.drivers(self.name) if p.metadata.name == pod]
        return driver

    def _alive_drivers(self) -> list[str]:
        return [
            p.metadata.name for p in self.world.drivers(self.name) if p.status.phase in {"Pending", "Running"}
        ]

    def _progress(self, fault: str, timeout: float, since: float | None = None) -> None:
        """Waits for a batch committed after now; records the time from since (default now)."""
        before, started = self.batches(), time.monotonic()
        self.wait_for(lambda: self.batches() > before, timeout, f"progress after the {fault}")
        self._took(f"{fault} -> next batch", time.monotonic() - (since or started))
        self._note_recovery(fault)

    def _note_recovery(self, fault: str) -> None:
        """The operator's timing of the recovery, when the fault failed an attempt: recorded once the
        operator saw the batch the tour saw."""

        def new_failure() -> dict[str, Any] | None:
            failure: dict[str, Any] = self.world.status(self.name).get("lastFailure") or {}
            return failure if failure.get("attempt", 0) > self._timed_attempt else None

        if new_failure() is None:
            return
        self.wait_for(lambda: "recoveryPhases" in (new_failure() or {}), 30, f"the timing of the {fault}")
        failure = new_failure() or {}
        self._timed_attempt = failure["attempt"]
        self.timings.append((fault, RecoveryPhases.model_validate(failure["recoveryPhases"])))

    def wait_for(
        self, probe: Callable[[], object], timeout: float, what: str, moving: Callable[[], int] | None = None
    ) -> None:
        """Polls probe until it holds; fails after timeout seconds, counted from the last time moving (if
        given) went up."""
        started, mark = time.monotonic(), moving() if moving else 0
        while time.monotonic() - started < timeout:
            if probe():
                return
            if moving and (now := moving()) > mark:
                started, mark = time.monotonic(), now
            time.sleep(0.5)
        drivers = self.world.drivers(self.name)
        log = self.world.log(drivers[-1].metadata.name) if drivers else ""
        pods = [f"{p.metadata.name}:{p.status.phase}" for p in drivers]
        raise AssertionError(
            f"not within {timeout} s: {what}; drivers {pods}; {self.world.status(self.name)}\n{log[-3000:]}"
        )


# The driver's log lines that say why a batch failed: Spark's exceptions, lost tasks and executors.
_TELLING = re.compile(r"Exception|Caused by|Error|Lost task|FetchFailed|[Ee]xecutor")

# After the kubelet's Killing event: its SIGTERM sent, and a grace second (the driver's) later its SIGKILL.
_KILL_PENDING = 3.0


class RealFaultTour(FaultTour):
    """The faults only the kubelet answers, so only real nodes can show: a driver container frozen as a whole
    (process-backed nodes run no probes), and a node drain (evictions the kubelet carries out)."""

    def __init__(self, world: RealWorld, work: Path, **options: Any) -> None:
        super().__init__(world, work, **options)
        self.real_world = world

    def freeze_driver(self) -> str:
        """Freezes the current driver's container; the kubelet's liveness probe gets no answer and kills it,
        the operator restarts the job. The frozen pod's name. Once the kubelet has said it kills the
        container, the container is resumed, as a paused VM would be: the kill, pending by then, lands at
        once (a frozen container takes the kubelet and containerd some 30 s more to kill on this machine)."""
        driver = self.current_driver().metadata.name
        frozen = time.monotonic()
        self.real_world.freeze_pod(driver)
        self.wait_for(lambda: self._killing(driver), 300, "the kubelet's verdict on the frozen container")
        self._took("driver container frozen -> the kubelet kills", time.monotonic() - frozen)
        # SIGTERM, then SIGKILL a grace second later, both pending: SIGKILL lands first once thawed.
        time.sleep(_KILL_PENDING)
        if not self._container_ended(driver):
            self.real_world.thaw_pod(driver)
        self.wait_for(lambda: self._container_ended(driver), 60, "the frozen container killed")
        self._took("driver container frozen -> killed", time.monotonic() - frozen)
        self._progress("driver container frozen", 300, since=frozen)
        return str(driver)

    def drain_node(self) -> None:
        """`kubectl drain` of the current driver's node, as an admin upgrading it types: the driver's
        disruption budget holds its eviction off while the operator moves it (a final checkpoint, the next
        attempt on another node, its standby promoted when it has one: waited for first); the drain then goes
        on, and the node is uncordoned. No failure is counted."""
        standby = bool(self.spec.get("driver", {}).get("standby"))
        if standby:
            self.wait_for_standby()
        promoted = self.events().count("StandbyPromoted")
        node = str(self.current_driver().spec.node_name)
        attempt, failures = self.attempt(), len(self.world.status(self.name).get("failures") or [])
        drained: list[str] = []

        def drain() -> None:
            done = self.world.plane.kubectl(
                "drain", node, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=110s", check=False
            )
            drained.append(f"exit {done.returncode}: {done.stderr.strip()[-500:]}")

        started = time.monotonic()
        draining = threading.Thread(target=drain, daemon=True)
        draining.start()
        try:
            self.wait_for(lambda: self.attempt() > attempt, 120, f"the driver moved off the drained {node}")
            self._progress(f"node drain ({node}, the driver's)", 300, since=started)
            draining.join(120)
            assert drained and drained[0].startswith("exit 0"), f"kubectl drain: {drained}"
            self._took(f"node drain ({node}) -> kubectl drain done", time.monotonic() - started)
        finally:
            draining.join(120)
            self.world.plane.kubectl("uncordon", node)
        assert len(self.world.status(self.name).get("failures") or []) == failures, "a drain is no failure"
        events = self.events()
        assert "NodeDraining" in events, events
        assert events.count("StandbyPromoted") == promoted + standby, "the standby takes over, if any"

    def _killing(self, pod: str) -> bool:
        return "Killing" in self.world.events(pod) or self._container_ended(pod)

    def _container_ended(self, pod: str) -> bool:
        found = next((p for p in self.world.drivers(self.name) if p.metadata.name == pod), None)
        statuses = found.status.container_statuses or [] if found else []
        return found is None or any(s.state.terminated for s in statuses)


class ProcessFaultTour(FaultTour):
    """The faults only the process-backed installation injects: a network partition of one operator replica
    (its TCP proxy), an API server crash, an S3 outage (SIGSTOP), a damaged checkpoint, and a hung driver
    JVM (SIGSTOP)."""

    def __init__(self, world: World, work: Path, **options: Any) -> None:
        super().__init__(world, work, **options)
        self.process_world = world

    def partition_leader(self) -> None:
        """The leader is cut off from the API server: it stops acting and exits within its renew deadline;
        the standby takes over, or its own identity restarted (healed) by its Deployment does."""
        world, fleet, api = self.process_world, self.process_world.fleet, self.process_world.api
        leader = fleet.leader(api)
        assert leader is not None
        partitioned = fleet.replicas[leader]  # before: its Deployment may restart it once it exits
        cut = time.monotonic()
        world.proxies[leader].partition()
        self.wait_for(lambda: not partitioned.running(), 30, "the partitioned leader to exit")
        self._took("leader partitioned -> it exits", time.monotonic() - cut)
        # The standby, or the same identity restarted by its Deployment (healed), whichever acquires first.
        self.wait_for(lambda: fleet.leader(api) and world.acting_leaders(), 60, "a leader acting again")
        self._took("leader partitioned -> a leader acts", time.monotonic() - cut)
        self._progress("operator leader partitioned", 120, since=cut)
        world.start_operator(leader)  # the Deployment restarts it, the network heals (if not done yet)

    def restart_api_server(self, down_seconds: float = 5.0) -> None:
        """kube-apiserver crashes and stays down a while: watches, Leases (operator, drivers, nodes) and
        Spark's executor watch all reconnect; a driver whose Lease lapsed is replaced."""
        started = time.monotonic()
        self.process_world.plane.restart_apiserver(down_seconds=down_seconds)
        self._progress(f"API server down {down_seconds:.0f} s", 300, since=started)

    def s3_outage(self, seconds: float = 15.0) -> None:
        """The S3 server stops answering: checkpoints stall (requests hang, S3A retries), then go on."""
        started = time.monotonic()
        self.process_world.s3.pause()
        try:
            time.sleep(seconds)
        finally:
            self.process_world.s3.resume()
        self._progress(f"S3 outage of {seconds:.0f} s", 300, since=started)

    def cancel_damage_and_resume(self) -> None:
        """Cancel, tear the newest offset log entry as a crash mid-write would, resume: the driver rolls back
        to the newest good batch, the operator says so, nothing is lost."""

        def damage() -> str:
            location = self.process_world.status(self.name)["latestCheckpoint"]["location"]
            self.damaged = self.process_world.damage_latest_offsets(location)
            return "cancel, damaged checkpoint, resume"

        self.cancel_and_resume(damage)
        batch = self.damaged.rsplit("/", 1)[-1]
        self.wait_for(
            lambda: f"rolled back from batch {batch} to" in self._last_rollback(),
            60,
            "the rollback in the status",
        )
        assert "CheckpointRolledBack" in self.process_world.events(self.name)

    def _last_rollback(self) -> str:
        return str((self.process_world.status(self.name).get("lastRollback") or {}).get("message", ""))

    def hang_driver_jvm(self) -> None:
        """The driver's JVM stops (SIGSTOP) while input keeps arriving: Kubernetes still sees the pod running.
        The driver's watchdog ends it after the job's progress timeout (reason NoProgress) and the operator
        starts a new attempt. Needs the check on (spec.liveness.progressTimeoutSeconds not 0)."""
        world = self.process_world
        attempt = int(world.status(self.name)["attempt"])
        driver = self.current_driver()
        pod = driver.metadata.name
        env = {e.name: e.value for e in driver.spec.containers[0].env or []}
        timeout = float(env[DriverEnv.PROGRESS_TIMEOUT])
        assert timeout > 0, "the job's liveness check is off"
        with world.driver_jvm_stopped(pod):
            # Restart delay, Lease expiry, a new Spark session and a batch come on top of the timeout.
            self._progress("driver JVM stopped", timeout + 300)
        assert self.recovery["driver JVM stopped -> next batch"] >= timeout, (
            "not restarted before the timeout"
        )
        status = world.status(self.name)
        assert int(status["attempt"]) > attempt, f"a new attempt replaced attempt {attempt}: {status}"
        failure = status["lastFailure"]
        assert (failure["reason"], failure["exitCode"]) == (NO_PROGRESS, Exit.NO_PROGRESS), failure
        assert f"progress timeout is {timeout:g} s" in failure["message"], failure
        assert NO_PROGRESS in world.events(self.name)
        assert self.watch is not None and NO_PROGRESS in self.watch.degraded_seen, "Degraded: NoProgress"
