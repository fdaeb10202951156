"""The example streaming job driven through faults on a World: the end-to-end suite and `make demo` both
take this tour. Each step injects one fault and measures fault -> next committed batch."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

from ftspark_dev.windowed_counts import RECORDS_PER_FILE, Output, expected_counts, write_input
from ftspark_dev.world import JOBS_NAMESPACE, World


class DriverWatch:
    """Samples the job's driver pods all along: two alive at once must never be seen."""

    def __init__(self, world: World, job: str) -> None:
        self.world, self.job, self.most_alive, self._stop = world, job, 0, threading.Event()
        self.phases_seen: list[str] = []
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.wait(0.3):
            alive = [p for p in self.world.drivers(self.job) if p.status.phase in {"Pending", "Running"}]
            self.most_alive = max(self.most_alive, len(alive))
            phase = self.world.status(self.job).get("phase")
            if phase and (not self.phases_seen or self.phases_seen[-1] != phase):
                self.phases_seen.append(phase)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


class FaultTour:
    def __init__(self, world: World, work: Path, *, name: str = "counts", files: int = 40) -> None:
        self.world, self.name, self.files = world, name, files
        self.source, self.output = work / "in", Output(work / "out")
        self.recovery: dict[str, float] = {}
        self._fed = threading.Event()
        self.watch: DriverWatch | None = None

    # -- steps ---------------------------------------------------------------------------------------------

    def start(self) -> None:
        """Submit the job and feed it a file a second; returns once the first batch is committed."""
        write_input(self.source, 5)
        started = time.monotonic()
        self.world.create(self.world.job(self.name, self.source, self.output.folder))
        self.watch = DriverWatch(self.world, self.name)
        self._wait(self._batches, 300, "the first batch")
        self.recovery["submit -> first committed batch"] = time.monotonic() - started
        threading.Thread(target=self._feed, daemon=True).start()

    def kill_executor(self) -> None:
        killed = self.world.nodes.kill_pods(JOBS_NAMESPACE, "spark-role=executor")
        assert killed, "an executor was running"
        self._progress("executor kill", 240)

    def kill_driver(self) -> None:
        self.world.nodes.kill_pod(JOBS_NAMESPACE, self.world.drivers(self.name)[-1].metadata.name)
        self._progress("driver kill", 300)

    def kill_leader(self) -> None:
        fleet, api = self.world.fleet, self.world.api
        leader = fleet.leader(api)
        assert leader is not None
        fleet.replicas[leader].kill()
        self._progress("operator leader kill", 120)
        self._wait(lambda: fleet.leader(api) not in {None, leader}, 60, "a new operator leader")
        fleet.start(f"{leader}-restarted")  # what the Deployment does

    def kill_node(self) -> None:
        node = self.world.drivers(self.name)[-1].spec.node_name
        self.world.nodes.kill_node(node)
        self._progress(f"node kill ({node}, the driver's)", 360)
        self.world.nodes.restart_node(node)

    def stop_and_resume(self) -> None:
        self.world.patch(self.name, {"desiredState": "stopped"})
        self._wait(lambda: self.world.status(self.name).get("phase") == "Stopped", 240, "Stopped")
        self.world.patch(self.name, {"desiredState": "running"})
        self._progress("stop, then resume", 300)

    def finish(self) -> dict[str, int]:
        """Waits until every record is counted; returns the figures."""
        self._wait(self._fed.is_set, 120, "the feeder")
        expected = expected_counts(self.files)
        self._wait(lambda: self.output.counts() == expected, 300, "every record counted")
        assert self.watch is not None
        self.watch.stop()
        counted = sum(self.output.counts().values())
        return {
            "records in": self.files * RECORDS_PER_FILE,
            "records counted": counted,
            "lost": self.files * RECORDS_PER_FILE - counted
            if counted <= self.files * RECORDS_PER_FILE
            else 0,
            "duplicated": max(0, counted - self.files * RECORDS_PER_FILE),
            "re-processed by re-run batches": self.output.reprocessed_records(),
            "batches": len(self.output.batches()),
            "attempts": int(self.world.status(self.name).get("attempt", 0)),
            "most drivers alive at once": self.watch.most_alive,
        }

    # -- helpers -------------------------------------------------------------------------------------------

    def _feed(self) -> None:
        for n in range(5, self.files):
            write_input(self.source, 1, first_file=n)
            time.sleep(1.0)
        self._fed.set()

    def _batches(self) -> int:
        return len(self.output.batches()) if self.output.folder.exists() else 0

    def _progress(self, fault: str, timeout: float) -> None:
        before, started = self._batches(), time.monotonic()
        self._wait(lambda: self._batches() > before, timeout, f"progress after the {fault}")
        self.recovery[f"{fault} -> next batch"] = time.monotonic() - started

    def _wait(self, probe: Callable[[], object], timeout: float, what: str) -> None:
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            if probe():
                return
            time.sleep(0.5)
        drivers = self.world.drivers(self.name)
        log = self.world.nodes.log(JOBS_NAMESPACE, drivers[-1].metadata.name) if drivers else ""
        pods = [f"{p.metadata.name}:{p.status.phase}" for p in drivers]
        raise AssertionError(
            f"not within {timeout} s: {what}; drivers {pods}; {self.world.status(self.name)}\n{log[-3000:]}"
        )
