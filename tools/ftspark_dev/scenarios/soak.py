"""`make soak`: two stateful streaming jobs of different shapes (windowed counts, session windows) through a
seeded, random schedule of faults on the process-backed installation, checked exactly-once against the batch
computation of their input at the end. The session-window job keeps a hot standby driver (driver.standby: 1),
the other none: the faults land on either, so both ways of recovering meet them.

Each fault is one of FAULTS; the schedule draws them with random.Random(seed), so a seed replays the same
kinds in the same order (not the same timings: Spark and the API server keep their own). The recovery time of
a fault is from its start until every job it touches has committed a batch after it.

Two views say that nothing ran twice:
- the probes, sampled (tour.Watch): drivers alive per job and operator replicas that say they lead;
- the API server's, complete: its audit log of every successful write by an operator replica or a driver
  runtime (each names itself in its User-Agent). A handover leaves a gap between the old writer's last write
  and the new one's first (a successor acts only a lease duration after the last renewal, the old one stops at
  its renew deadline), so two writers of one kind inside OVERLAP_WINDOW seconds are two acting at once.

    python -m ftspark_dev.scenarios.soak --faults 100 --seed 14
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from pathlib import Path
from statistics import quantiles
from typing import Any

from kubernetes import client

from ftspark.protocol import JOB_LABEL, SPARK_ROLE_LABEL, record_key_name
from ftspark_dev.cluster.operators import OPERATOR_LEASE
from ftspark_dev.scenarios.tour import ProcessFaultTour
from ftspark_dev.subjects.sessions import Sessions
from ftspark_dev.subjects.windowed_counts import WindowedCounts
from ftspark_dev.worlds.process_nodes import JOBS_NAMESPACE, OPERATOR_NAMESPACE, World, running_world

# A hung driver is restarted after 60 s without progress (the default, 300 s, would make a long soak longer).
# Not less: a batch is silent until it ends, and on a busy machine (2 cores, a restore after a fault) one has
# lasted over 30 s, so a shorter timeout replaces drivers that are only slow.
SPEC = {
    "liveness": {"progressTimeoutSeconds": 60},
    # A long run's faults add up to more restarts than any fixed budget (a 100-fault run failed a job for good
    # after 10 restarts, at fault 29): failure-rate, Flink's choice for a stream that must not end, gives up
    # only on a crash loop.
    "restartStrategy": {
        "type": "failure-rate",
        "failureRate": {"maxFailuresPerInterval": 5, "intervalSeconds": 60, "delaySeconds": 1},
    },
}
WITH_STANDBY = SPEC | {"driver": {"standby": 1}}
# Two jobs share 2 cores: a file every 3 s (one per micro-batch) lets them catch up after each fault.
FEED_INTERVAL = 3.0
OVERLAP_WINDOW = 0.5  # seconds; below the gap a correct handover leaves (lease duration - renew deadline)
WRITES = {"create", "update", "patch", "delete", "deletecollection"}


@dataclass
class Soak:
    world: World
    work: Path
    seed: int
    tours: list[ProcessFaultTour] = field(init=False)
    recoveries: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    schedule: list[str] = field(default_factory=list)
    # Wall-clock start of the run: the audit log also holds what ran before on the same API server (other
    # tests' operator installations and jobs of the same names), which is none of the soak's business.
    started: float = 0.0

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.tours = [
            ProcessFaultTour(self.world, self.work, subject=subject, spec=spec, feed_interval=FEED_INTERVAL)
            for subject, spec in ((WindowedCounts(), SPEC), (Sessions(), WITH_STANDBY))
        ]

    # -- the run -------------------------------------------------------------------------------------------

    def run(self, faults: int, kinds: Iterable[str] = ()) -> dict[str, dict[str, int]]:
        """Starts the jobs, injects faults, finishes; figures per job. The schedule takes every kind (of
        kinds, default all) once in a random order, then random kinds, faults in all."""
        chosen = sorted(kinds) or sorted(FAULTS)
        self.schedule = self.rng.sample(chosen, len(chosen))[:faults]
        self.schedule += [self.rng.choice(chosen) for _ in range(faults - len(self.schedule))]
        self.started = time.time()
        for tour in self.tours:  # both at once: their starts share the machine, not the clock
            tour.submit()
        for tour in self.tours:
            tour.feed_after_first_batch()
        for n, kind in enumerate(self.schedule):
            print(f"[soak] fault {n + 1}/{faults}: {kind}", flush=True)
            self.inject(kind)
        for tour in self.tours:
            tour.stop_feeding()
        return {tour.name: tour.finish() for tour in self.tours}

    def inject(self, kind: str) -> None:
        tour = self.rng.choice(self.tours)
        before = {t.name: t.batches() for t in self.tours}
        started = time.monotonic()
        touched = FAULTS[kind](self, tour)
        for other in touched:
            other.wait_for(partial(_beyond, other, before[other.name]), 360, f"progress after {kind}")
        self.recoveries[kind].append(time.monotonic() - started)

    # -- faults: each returns the jobs it touches ----------------------------------------------------------

    def kill_executors(self, tour: ProcessFaultTour) -> list[ProcessFaultTour]:
        killed = self.world.kill_pods(f"{JOB_LABEL}={tour.name},{SPARK_ROLE_LABEL}=executor")
        assert killed, f"an executor of {tour.name} was running"
        return [tour]

    def kill_driver(self, tour: ProcessFaultTour) -> list[ProcessFaultTour]:
        tour.kill_driver()
        return [tour]

    def hang_driver_jvm(self, tour: ProcessFaultTour) -> list[ProcessFaultTour]:
        tour.hang_driver_jvm()
        return [tour]

    def stop_resume(self, tour: ProcessFaultTour) -> list[ProcessFaultTour]:
        tour.stop_and_resume()
        return [tour]

    def cancel_resume(self, tour: ProcessFaultTour) -> list[ProcessFaultTour]:
        tour.cancel_and_resume()
        return [tour]

    def cancel_damage_resume(self, tour: ProcessFaultTour) -> list[ProcessFaultTour]:
        tour.cancel_damage_and_resume()
        return [tour]

    def upgrade(self, tour: ProcessFaultTour) -> list[ProcessFaultTour]:
        tour.upgrade()
        return [tour]

    def delete_ha_configmaps(self, tour: ProcessFaultTour) -> list[ProcessFaultTour]:
        """By hand, the job's HA records (its checkpoint pointers and job graph): its driver is fenced out at
        its next checkpoint, the next attempt resumes from the directory the status names."""
        attempt = tour.attempt()
        core = client.CoreV1Api(self.world.api)
        for config_map in core.list_namespaced_config_map(
            JOBS_NAMESPACE, label_selector=f"{JOB_LABEL}={tour.name}"
        ).items:
            core.delete_namespaced_config_map(config_map.metadata.name, JOBS_NAMESPACE)
        tour.wait_for(lambda: tour.attempt() > attempt, 120, "a new attempt after the HA records went")
        assert "StateNotFound" not in self.world.events(tour.name), "resumed with its state"
        return [tour]

    def kill_leader(self, tour: ProcessFaultTour) -> list[ProcessFaultTour]:
        tour.kill_leader()
        return self.tours

    def kill_node(self, tour: ProcessFaultTour) -> list[ProcessFaultTour]:
        tour.kill_node()
        return self.tours

    def pause_leader(self, tour: ProcessFaultTour) -> list[ProcessFaultTour]:
        """SIGSTOP of the leader for twice its lease: the standby takes over; resumed, the old one must see
        it lost the Lease before it acts (the API server's view checks that it does not)."""
        fleet = self.world.fleet
        leader = fleet.leader(self.world.api)
        assert leader is not None
        resumed = fleet.pause(leader, 2 * fleet.lease_duration + 1)
        tour.wait_for(lambda: fleet.leader(self.world.api) not in {None, leader}, 60, "a new leader")
        resumed.join()
        tour.wait_for(
            lambda: leader not in self.world.acting_leaders(), 30, f"{leader} to see it lost the Lease"
        )
        return self.tours  # it exits, as it should, and its Deployment brings it back (World.supervise)

    def partition_leader(self, tour: ProcessFaultTour) -> list[ProcessFaultTour]:
        tour.partition_leader()
        return self.tours

    def restart_api_server(self, tour: ProcessFaultTour) -> list[ProcessFaultTour]:
        tour.restart_api_server()
        return self.tours

    def s3_outage(self, tour: ProcessFaultTour) -> list[ProcessFaultTour]:
        tour.s3_outage(seconds=10.0)
        return self.tours

    def delete_operator_lease(self, tour: ProcessFaultTour) -> list[ProcessFaultTour]:
        """By hand: the term must not go back (the term floor), or every job's records refuse the leader."""
        client.CoordinationV1Api(self.world.api).delete_namespaced_lease(OPERATOR_LEASE, OPERATOR_NAMESPACE)
        tour.wait_for(lambda: self.world.fleet.leader(self.world.api), 60, "a leader on a new Lease")
        tour.kill_driver()  # something only an acting leader answers
        return self.tours

    # -- figures -------------------------------------------------------------------------------------------

    def writers_at_once(self) -> dict[str, int]:
        """From the audit log: most operator replicas, and most drivers of one job, that wrote successfully
        within OVERLAP_WINDOW seconds of each other."""
        return writers_in(self.busiest_windows())

    def busiest_windows(self) -> dict[str, list[tuple[float, str, str]]]:
        """Per group (the operator, each job's drivers): the successful writes of the OVERLAP_WINDOW with the
        most writers since the run started, as (when, who, what). When is the API server's receipt of the
        request, the moment the writer acted: a write sent before a leader's deadline may complete after it on
        a slow server."""
        writes: dict[str, list[tuple[float, str, str]]] = defaultdict(list)
        for event in self.world.plane.audit_events():
            agent = event.get("userAgent", "")
            if event.get("verb") not in WRITES or (event.get("responseStatus") or {}).get("code", 500) >= 400:
                continue
            if _any_replica_may(event):
                continue
            kind, _, who = agent.partition(" (")
            if kind not in {"ftspark-operator", "ftspark-driver"}:
                continue
            who = who.rstrip(")")
            at = datetime.fromisoformat(event["requestReceivedTimestamp"].replace("Z", "+00:00")).timestamp()
            if at < self.started:
                continue
            what = f"{event['verb']} {event.get('requestURI', '')}"
            # A driver's pod name is <job>-<attempt>-driver: its kind is its job.
            group = "operator" if kind == "ftspark-operator" else who.rsplit("-", 2)[0]
            writes[group].append((at, who, what))
        return {group: _busiest_window(sorted(found)) for group, found in writes.items()}

    def recovery_table(self) -> str:
        """Recovery times per kind of the faults recovered so far."""
        done = sum(len(times) for times in self.recoveries.values())
        lines = [f"soak: seed {self.seed}, {done} of {len(self.schedule)} faults recovered", ""]
        lines.append(f"{'fault':<26} {'count':>5} {'p50 s':>7} {'p90 s':>7} {'max s':>7}")
        for kind in sorted(self.recoveries):
            times = sorted(self.recoveries[kind])
            lines.append(
                f"{kind:<26} {len(times):>5} {_percentile(times, 50):>7.1f} {_percentile(times, 90):>7.1f} "
                f"{times[-1]:>7.1f}"
            )
        return "\n".join(lines)

    def table(self, figures: dict[str, dict[str, int]]) -> str:
        lines = [self.recovery_table(), ""]
        names = list(figures)
        lines.append(f"{'':<44}" + "".join(f"{name:>12}" for name in names))
        for row in next(iter(figures.values())):
            lines.append(f"{row:<44}" + "".join(f"{figures[name][row]:>12}" for name in names))
        writers = self.writers_at_once()
        lines.append("")
        lines.append(f"{'most operator replicas writing at once (audit)':<52} {writers.get('operator', 0)}")
        for name in names:
            lines.append(f"{f'most drivers of {name} writing at once (audit)':<52} {writers.get(name, 0)}")
        return "\n".join(lines)


FAULTS: dict[str, Callable[[Soak, ProcessFaultTour], list[ProcessFaultTour]]] = {
    "executor kill": Soak.kill_executors,
    "driver kill": Soak.kill_driver,
    "driver JVM stopped": Soak.hang_driver_jvm,
    "stop, resume": Soak.stop_resume,
    "cancel, resume": Soak.cancel_resume,
    "cancel, torn checkpoint": Soak.cancel_damage_resume,
    "spec upgrade": Soak.upgrade,
    "HA ConfigMaps deleted": Soak.delete_ha_configmaps,
    "leader kill": Soak.kill_leader,
    "node kill": Soak.kill_node,
    "leader SIGSTOP past lease": Soak.pause_leader,
    "leader partitioned": Soak.partition_leader,
    "API server restart": Soak.restart_api_server,
    "S3 outage": Soak.s3_outage,
    "operator Lease deleted": Soak.delete_operator_lease,
}


def _beyond(tour: ProcessFaultTour, batches: int) -> bool:
    return tour.batches() > batches


def writers_in(windows: dict[str, list[tuple[float, str, str]]]) -> dict[str, int]:
    """Distinct writers per group in the windows busiest_windows() found."""
    return {group: len({who for _, who, _ in window}) for group, window in windows.items()}


def _any_replica_may(event: dict[str, Any]) -> bool:
    """The one write a replica makes without leading, by design: creating the installation's record key at its
    start (create-if-absent: the loser of two at once reads the winner's key). A fresh installation's replicas
    start while the soak's jobs are submitted, so it can fall next to the new leader's first writes."""
    target = event.get("objectRef") or {}
    return (event["verb"], target.get("resource"), target.get("name")) == (
        "create",
        "secrets",
        record_key_name(OPERATOR_LEASE),
    )


def _busiest_window(writes: list[tuple[float, str, str]]) -> list[tuple[float, str, str]]:
    """The writes of the OVERLAP_WINDOW-long span with the most distinct writers (writes sorted by time)."""
    busiest: list[tuple[float, str, str]] = []
    most = start = 0
    for end, (at, _, _) in enumerate(writes):
        while writes[start][0] < at - OVERLAP_WINDOW:
            start += 1
        window = writes[start : end + 1]
        if (writers := len({who for _, who, _ in window})) > most:
            busiest, most = window, writers
    return busiest


def _percentile(times: list[float], percent: int) -> float:
    if len(times) == 1:
        return times[0]
    return quantiles(times, n=100, method="inclusive")[percent - 1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--faults", type=int, default=100)
    parser.add_argument("--seed", type=int, default=14)
    parser.add_argument("--kinds", nargs="*", default=[], choices=sorted(FAULTS), metavar="KIND")
    args = parser.parse_args(argv)
    with running_world() as world:
        soak = Soak(world, world.work / "soak", args.seed)
        try:
            figures = soak.run(args.faults, args.kinds)
        except BaseException:
            print(soak.recovery_table())  # what a long run got through before it stopped
            raise
        print(soak.table(figures))
        return 0 if verdict_ok(soak, figures) else 1


def verdict_ok(soak: Soak, figures: dict[str, dict[str, int]]) -> bool:
    exact = all(f["lost"] == f["duplicated"] == f["wrong"] == 0 for f in figures.values())
    single = all(
        f["most drivers alive at once"] <= 1 and f["most operator leaders acting at once"] <= 1
        for f in figures.values()
    )
    return exact and single and max(soak.writers_at_once().values(), default=0) <= 1


if __name__ == "__main__":
    sys.exit(main())
