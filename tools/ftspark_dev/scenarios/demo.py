"""`make demo`: ftspark installed as a user installs it, with real Spark, through real faults.

It starts a Kubernetes control plane built from source (etcd, kube-apiserver, kube-scheduler,
kube-controller-manager), three real nodes (kubelet, containerd and runc each, pods on a network of their own)
running the project's images, and an S3-protocol server; installs the operator with `helm install` (two
replicas electing a leader). Then it runs the example stateful streaming job (windowed counts, checkpoints on
S3) with a hot standby driver on another node, kills its driver's container (the standby takes over), then
the node its driver runs on, drains the next driver's node (real nodes only), and prints a report: phases
seen, checkpoints, recovery times, records in and out, lost and duplicated. Ctrl-C stops and removes
everything, and the machine is left as it was found.

Where real nodes cannot start (not root, or no cgroup v1 hierarchies), the same tour runs on process-backed
nodes (pods as local processes), and the demo says so in one line.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from ftspark_dev.realnodes.host import CGROUP_ROOT
from ftspark_dev.scenarios.tour import FaultTour, RealFaultTour, TourWorld
from ftspark_dev.worlds.process_nodes import JOBS_NAMESPACE, running_world
from ftspark_dev.worlds.real_nodes import RealWorld, running_real_world


def _step(title: str) -> None:
    print(f"\n== {title}", flush=True)


def real_nodes_unavailable() -> str | None:
    """Why real nodes cannot start here, or None."""
    if os.geteuid() != 0:
        return "real nodes need root (links, cgroups, mounts)"
    if not (CGROUP_ROOT / "memory" / "cgroup.procs").exists():
        return "real nodes need the cgroup v1 hierarchies (this kubelet setup uses cgroupfs v1)"
    return None


@contextlib.contextmanager
def installation() -> Iterator[TourWorld]:
    reason = real_nodes_unavailable()
    if reason is None:
        _step(
            "starting: control plane, 3 real nodes (kubelet + containerd each), S3; building the images once"
        )
        with running_real_world(nodes=3) as world:
            _step("helm install ftspark-operator (2 replicas from the operator image)")
            installed = world.helm_install()
            if installed.returncode != 0:
                raise RuntimeError(f"helm install failed:\n{installed.stderr}")
            print(world.plane.kubectl("get", "nodes,pods", "-A", "-o", "wide").stdout)
            yield world
    else:
        print(f"falling back to process-backed nodes: {reason}")
        _step("starting: control plane, 3 process-backed nodes, S3, 2 operator replicas")
        with running_world() as process_world:
            yield process_world


def main() -> None:
    started = time.monotonic()
    with installation() as world, tempfile.TemporaryDirectory(prefix="ftspark-demo-") as work:
        print(f"ready in {time.monotonic() - started:.0f} s; operator leader: {world.operator_leader()}")
        spec = {"driver": {"standby": 1}}
        tour = (
            RealFaultTour(world, Path(work), spec=spec)
            if isinstance(world, RealWorld)
            else FaultTour(world, Path(work), spec=spec)
        )
        _step(
            "submitting examples/windowed_counts.py as a FaultTolerantSparkJob with a hot standby driver "
            "(driver.standby: 1), feeding it a file every 2 s"
        )
        tour.start()
        _step("waiting until the standby driver, on another node, has its SparkSession up")
        tour.wait_for_standby()
        plane = world.plane
        print(plane.kubectl("get", "pods", "-n", JOBS_NAMESPACE, "-o", "wide").stdout)

        _step("fault 1: SIGKILL the driver (the operator fences it out and promotes the standby)")
        tour.kill_driver()
        print(f"promoted standby drivers so far: {tour.events().count('StandbyPromoted')}")
        _step("fault 2: kill the node the driver runs on (its kubelet, containerd and containers)")
        tour.kill_node()
        if isinstance(tour, RealFaultTour):
            _step(
                "fault 3: kubectl drain the driver's node (its disruption budget holds the eviction off; the "
                "driver stops with a final checkpoint, the standby takes over; no failure counted)"
            )
            tour.drain_node()
        _step("waiting until every record is counted")
        figures = tour.finish()

        status = world.status(tour.name)
        _step("report")
        print(f"phases seen:       {' -> '.join(tour.watch.phases_seen if tour.watch else [])}")
        checkpoint = status.get("latestCheckpoint", {})
        print(
            f"latest checkpoint: {checkpoint.get('id')} (Spark batch {checkpoint.get('batchId')}, "
            f"attempt {status.get('attempt')})"
        )
        print(tour.report(figures))
        print(plane.kubectl("get", "ftsj", "-n", JOBS_NAMESPACE).stdout)
        print(
            plane.kubectl(
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
