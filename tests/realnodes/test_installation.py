"""The documented install, as written, on real nodes with the project's images, then the fault tour on real
containers. In order, on one installation (starting one costs a minute):
1. `helm install` of the chart: two replicas of the operator image, the Lease, probes, PDB;
2. the examples with the quickstart's edits (endpoint, credentials Secret, output volume), in a namespace at
   Pod Security `restricted`;
3. the exactly-once fault tour, the job with a hot standby driver: executor and driver kills (the standby
   takes over), a frozen driver container (the kubelet's liveness probe kills it), operator-leader and node
   kills, stop and resume;
4. the plain-manifest install (deploy/ftspark-operator.yaml) in place of the chart's.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

from ftspark_dev.bundle import BUNDLE
from ftspark_dev.realnodes.images import OPERATOR_IMAGE
from ftspark_dev.realworld import DEMO_BUCKET, RealWorld, running_real_world
from ftspark_dev.tour import RealFaultTour
from ftspark_dev.windowed_counts import RECORDS_PER_FILE, Output, expected_counts, write_input
from ftspark_dev.world import OPERATOR_NAMESPACE
from tests.waiting import eventually


@pytest.fixture(scope="module")
def world(images: dict[str, Path]) -> Iterator[RealWorld]:
    with running_real_world(nodes=3) as running:
        yield running


@pytest.fixture(scope="module")
def operator_installed(world: RealWorld) -> RealWorld:
    started = time.monotonic()
    result = world.helm_install()
    assert result.returncode == 0, f"helm install failed:\n{result.stderr}\n{result.stdout}"
    print(f"\nhelm install --wait: 2 operator replicas Ready in {time.monotonic() - started:.1f} s")
    return world


def test_helm_install_runs_two_replicas_of_the_operator_image(operator_installed: RealWorld) -> None:
    world = operator_installed
    pods = world.operator_pods()
    assert len(pods) == 2 and all(p.status.phase == "Running" for p in pods)
    assert {p.spec.containers[0].image for p in pods} == {OPERATOR_IMAGE}
    eventually(
        lambda: world.operator_leader() in {p.metadata.name for p in pods}, timeout=60, what="a leader"
    )
    eventually(lambda: world.acting_leaders() == [world.operator_leader()], timeout=30, what="one acting")
    ready = {p.metadata.name: world.probe(p, "/readyz") for p in pods}
    assert all(code == 200 for code, _ in ready.values()), ready
    pdb = client.PolicyV1Api(world.api).read_namespaced_pod_disruption_budget(
        "ftspark-operator", OPERATOR_NAMESPACE
    )
    assert pdb.spec.min_available == 1
    # The image's promise: non-root, read-only root filesystem.
    check = "import os; print(os.getuid()); open('/probe', 'w')"
    ran = world.plane.kubectl(
        "-n", OPERATOR_NAMESPACE, "exec", pods[0].metadata.name, "--", "python", "-c", check, check=False
    )
    assert ran.stdout.split()[0] == "10001" and "Read-only file system" in ran.stderr, ran


def test_windowed_counts_example_runs_at_pod_security_restricted(operator_installed: RealWorld) -> None:
    world = operator_installed
    output = Output(world.work / "windowed-counts-output" / "output")
    world.volume("windowed-counts-output", output.folder.parent)
    staged, files = world.work / "staged", 4
    write_input(staged, files)
    s3 = world.s3.client()
    for part in sorted(staged.glob("part-*")):
        s3.upload_file(str(part), DEMO_BUCKET, f"input/windowed-counts/{part.name}")
    started = time.monotonic()
    world.create(world.example("windowed-counts.yaml"))
    eventually(
        lambda: output.folder.exists() and output.counts() == expected_counts(files),
        timeout=420,
        what=lambda: f"every record counted; {world.status('windowed-counts')}\n"
        f"{world.log('windowed-counts-1-driver')[-4000:]}",
    )
    took = time.monotonic() - started
    print(f"\nwindowed-counts example: submit -> all {files} files counted {took:.1f} s")
    # The status learns of the checkpoint that holds the last counts a moment after it is committed.
    eventually(
        lambda: (status := world.status("windowed-counts"))["phase"] == "Running"
        and status.get("latestCheckpoint"),
        timeout=60,
        what=lambda: f"Running with a checkpoint: {world.status('windowed-counts')}",
    )
    executors = world.core.list_namespaced_pod("jobs", label_selector="spark-role=executor").items
    assert len(executors) == 2
    world.patch("windowed-counts", {"desiredState": "stopped"})
    eventually(lambda: world.status("windowed-counts").get("phase") == "Stopped", timeout=180, what="Stopped")


def test_batch_report_example_succeeds(operator_installed: RealWorld) -> None:
    world = operator_installed
    started = time.monotonic()
    world.create(world.example("batch-report.yaml"))
    eventually(
        lambda: world.status("nightly-report").get("phase") == "Succeeded",
        timeout=420,
        what=lambda: f"Succeeded; {world.status('nightly-report')}\n"
        f"{world.log('nightly-report-1-driver')[-4000:]}",
    )
    print(f"\nbatch-report example: submit -> Succeeded {time.monotonic() - started:.1f} s")
    assert "2026-11-21 region 0: 142858 orders" in world.log("nightly-report-1-driver")


@pytest.mark.timeout(1800)
def test_the_example_job_survives_faults_on_real_containers_exactly_once(
    operator_installed: RealWorld, tmp_path: Path
) -> None:
    world = operator_installed
    tour = RealFaultTour(world, tmp_path, spec={"driver": {"standby": 1}})
    tour.start()
    tour.kill_executor()
    tour.wait_for_standby()
    tour.kill_driver()
    assert tour.events().count("StandbyPromoted") == 1, "the hot standby took over from the killed driver"
    frozen = tour.freeze_driver()
    assert world.status(tour.name)["lastFailure"]["reason"] == "DriverKilled"
    assert "Unhealthy" in world.events(frozen), "the kubelet's liveness probe found the frozen driver"
    tour.kill_leader()
    attempt = world.status(tour.name)["attempt"]
    tour.kill_node()
    assert world.status(tour.name)["attempt"] > attempt
    assert world.status(tour.name)["lastFailure"]["reason"] == "NodeLost"
    tour.stop_and_resume()
    figures = tour.finish()
    print(f"\nreal nodes:\n{tour.report(figures)}")
    assert (figures["lost"], figures["duplicated"]) == (0, 0)
    assert figures["most drivers alive at once"] == 1, "never two drivers of one job at once"
    assert figures["most operator leaders acting at once"] == 1, "never two acting leaders"
    faults = sum(step.endswith("-> next batch") for step in tour.recovery)
    assert figures["re-processed by re-run batches"] <= faults * RECORDS_PER_FILE, "at most one batch a fault"
    events = tour.events()
    assert {"Submitted", "Restarting", "Stopping", "Stopped", "Resumed"} <= set(events), events
    # The driver kill, the freeze and the node kill: each answered by a new attempt, or by the standby when
    # one was ready by then (which of the two is a matter of timing).
    assert events.count("Restarted") + events.count("StandbyPromoted") >= 3, events


def test_plain_manifests_install_the_same_operator(operator_installed: RealWorld) -> None:
    world = operator_installed
    world.helm_uninstall()
    world.plane.kubectl("apply", "-f", str(BUNDLE))
    # The edits the quickstart names: the S3 endpoint, and credentials from the Secret `s3`.
    deployment = ("-n", OPERATOR_NAMESPACE, "set", "env", "deployment/ftspark-operator")
    world.plane.kubectl(*deployment, f"FTSPARK_S3_ENDPOINT={world.s3.endpoint}")
    world.plane.kubectl(*deployment, "--from=secret/s3")
    world.plane.kubectl(
        "-n", OPERATOR_NAMESPACE, "rollout", "status", "deployment/ftspark-operator", "--timeout=300s"
    )
    eventually(
        lambda: world.operator_leader() in {p.metadata.name for p in world.operator_pods()}
        and world.acting_leaders() == [world.operator_leader()],
        timeout=90,
        what="a leader among the manifest's replicas",
    )
