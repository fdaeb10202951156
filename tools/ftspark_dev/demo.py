"""`make demo`: ftspark on a whole local installation, with real Spark, through real faults.

It starts a Kubernetes control plane built from source (etcd, kube-apiserver, kube-scheduler,
kube-controller-manager), three nodes whose pods run as local processes, an S3-protocol server, and two
operator replicas that elect a leader. Then it runs the example stateful streaming job (windowed counts,
checkpoints on S3), kills its driver, then the node its driver runs on, and prints a report: phases seen,
checkpoints, recovery times, records in and out, lost and duplicated. Ctrl-C stops and removes everything.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from ftspark_dev.tour import FaultTour
from ftspark_dev.world import JOBS_NAMESPACE, running_world


def _step(title: str) -> None:
    print(f"\n== {title}", flush=True)


def main() -> None:
    started = time.monotonic()
    _step("starting: control plane, 3 process-backed nodes, S3, 2 operator replicas (first run builds them)")
    with running_world() as world, tempfile.TemporaryDirectory(prefix="ftspark-demo-") as work:
        print(
            f"ready in {time.monotonic() - started:.0f} s; operator leader: {world.fleet.leader(world.api)}"
        )
        print(world.plane.kubectl("get", "nodes", "-o", "wide").stdout)

        tour = FaultTour(world, Path(work))
        _step(
            "submitting examples/windowed_counts.py as a FaultTolerantSparkJob, feeding it a file every 2 s"
        )
        tour.start()
        print(world.plane.kubectl("get", "pods", "-n", JOBS_NAMESPACE, "-o", "wide").stdout)

        _step("fault 1: SIGKILL the driver")
        tour.kill_driver()
        _step("fault 2: kill the node the driver runs on (all its processes, its heartbeats)")
        tour.kill_node()
        _step("waiting until every record is counted")
        figures = tour.finish()

        status = world.status(tour.name)
        _step("report")
        print(f"phases seen:       {' -> '.join(tour.watch.phases_seen if tour.watch else [])}")
        checkpoint = status.get("latestCheckpoint", {}).get("id")
        print(f"latest checkpoint: {checkpoint} (attempt {status.get('attempt')})")
        for fault, seconds in tour.recovery.items():
            print(f"{fault + ':':<44} {seconds:6.1f} s")
        for figure, value in figures.items():
            print(f"{figure + ':':<44} {value}")
        print(world.plane.kubectl("get", "ftsj", "-n", JOBS_NAMESPACE).stdout)
        print(
            world.plane.kubectl(
                "get",
                "events",
                "-n",
                JOBS_NAMESPACE,
                "--field-selector",
                f"involvedObject.name={tour.name}",
                "--sort-by=.metadata.creationTimestamp",
            ).stdout
        )
        _step(f"done in {time.monotonic() - started:.0f} s; stopping everything")


if __name__ == "__main__":
    main()
