"""What a user does to a running job, with real Spark: change its spec in each upgradeMode, take a savepoint
and start a new job from it; a job that ends, which no new operator leader may start again; and a job whose
code imports what only the virtualenv it ships has."""

from __future__ import annotations

import threading
import time
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from tests.waiting import eventually

from ftspark.domain.lifecycle import upgrade_savepoint_id
from ftspark.protocol import SPARK_ROLE_LABEL
from ftspark_dev.cluster.processes import REPO_ROOT
from ftspark_dev.scenarios.tour import FaultTour
from ftspark_dev.subjects.shipped_venv import MARK, PACKAGE, PYTHON, venv_archive
from ftspark_dev.subjects.windowed_counts import Output, WindowedCounts, expected_counts, write_input
from ftspark_dev.worlds.process_nodes import JOBS_NAMESPACE, OPERATOR_NAMESPACE, World


def _upgraded(world: World, name: str, attempt: int) -> bool:
    status = world.status(name)
    return bool(status.get("attempt", 0) > attempt and status.get("phase") == "Running")


def _all_counted(outputs: list[Output], files: int) -> bool:
    """What the job wrote over all its output folders (later ones win) counts every file."""
    merged: dict[str, int] = {}
    for output in outputs:
        if output.folder.exists():
            merged.update(output.counts())
    return merged == expected_counts(files)


def _counted(output: Output, files: int) -> bool:
    return output.folder.exists() and output.counts() == expected_counts(files)


@pytest.mark.timeout(1800)
def test_spec_upgrades_in_each_mode_and_a_fork_from_a_savepoint(world: World, tmp_path: Path) -> None:
    """Each upgrade points the job at a new output folder (a spec change a user would make), so each
    folder shows exactly what the upgraded job did."""
    source, files, name = tmp_path / "in", 4, "evolving"
    write_input(source, files)
    outputs = [Output(tmp_path / "out-0")]
    world.create(world.job(name, source, outputs[0].folder))
    eventually(lambda: _counted(outputs[0], files), timeout=300, what="the first files counted")

    took: dict[str, float] = {}
    for mode in ("last-state", "savepoint", "stateless"):
        attempt, before = world.status(name)["attempt"], max(outputs[-1].batches())
        outputs.append(Output(tmp_path / f"out-{len(outputs)}"))
        started = time.monotonic()
        world.patch(name, {"upgradeMode": mode, "arguments": [str(source), str(outputs[-1].folder)]})
        eventually(partial(_upgraded, world, name, attempt), timeout=240, what=f"the {mode} upgrade")
        write_input(source, 2, first_file=files)
        files += 2
        new = outputs[-1]
        if mode == "stateless":  # fresh checkpoints: everything is counted again, from batch 0
            eventually(partial(_counted, new, files), timeout=300, what="a recount from nothing")
            assert min(new.batches()) == 0
        else:  # the state and the source offsets carry over: only the new files, in the batches after
            eventually(
                partial(_all_counted, list(outputs), files),
                timeout=300,
                what=f"the new files counted after the {mode} upgrade",
            )
            # A stop with a final checkpoint re-runs nothing; a deleted driver may leave its last batch.
            first = before + 1 if mode == "savepoint" else before
            assert min(new.batches()) >= first, (mode, before, sorted(new.batches()))
        if mode == "savepoint":  # the stop took a savepoint of its final batch, kept in the history
            taken = [sp["id"] for sp in world.status(name).get("savepoints", [])]
            assert upgrade_savepoint_id(world.uid(name), attempt) in taken, taken
        took[f"{mode} upgrade -> new files counted"] = time.monotonic() - started
    events = world.events(name)
    assert events.count("Upgraded") == 3, events
    print("\nupgrades:", {k: round(v, 1) for k, v in took.items()})

    # A savepoint of the running job, and a second job started from it: it goes on from the savepoint's
    # batch, so it counts exactly the files that came after.
    world.patch(name, {"savepointTriggerNonce": 1})
    saved: dict[str, Any] = eventually(
        lambda: next(
            (sp for sp in world.status(name).get("savepoints", []) if sp.get("triggerNonce") == 1), None
        ),
        timeout=120,
        what="the savepoint in status",
    )
    assert "SavepointCompleted" in world.events(name)
    fork = Output(tmp_path / "fork")
    world.create(
        world.job("forked", source, fork.folder, initialSavepoint=saved["location"], upgradeMode="last-state")
    )
    write_input(source, 2, first_file=files)
    files += 2
    eventually(lambda: _counted(outputs[-1], files), timeout=300, what="the original counting the new files")
    # Update mode over the savepoint's state: every group the new files touched, with its whole count.
    before_fork = expected_counts(files - 2)
    expected_new = {g: c for g, c in expected_counts(files).items() if before_fork.get(g) != c}
    eventually(
        lambda: fork.folder.exists() and fork.counts() == expected_new,
        timeout=300,
        what=lambda: f"the fork: {fork.counts() if fork.folder.exists() else None} != {expected_new}\n"
        + world.explain("forked"),
    )
    assert min(fork.batches()) == saved["batchId"] + 1, "the fork goes on after the savepoint's batch"
    assert "Submitted" in world.events("forked")
    world.delete("forked")
    world.delete(name)


@pytest.mark.timeout(900)
def test_a_finished_job_is_never_run_again_by_a_new_leader(world: World, tmp_path: Path) -> None:
    report = world.job(
        "report",
        tmp_path,
        tmp_path,
        mainApplicationFile=f"local://{REPO_ROOT / 'examples' / 'batch_report.py'}",
        arguments=["--date", "2026-11-22"],
    )
    started = time.monotonic()
    world.create(report)
    eventually(lambda: world.status("report").get("phase") == "Succeeded", timeout=300, what="Succeeded")
    ran = time.monotonic() - started
    status = world.status("report")
    uid = world.uid("report")
    result = client.CoreV1Api(world.api).read_namespaced_config_map(
        f"ftspark-result-{uid}", OPERATOR_NAMESPACE
    )
    assert "Succeeded" in str(result.data), result.data
    eventually(lambda: not world.drivers("report"), timeout=60, what="the finished driver cleaned up")

    fleet, api = world.fleet, world.api
    leader = fleet.leader(api)
    assert leader is not None
    world.kill_operator(leader)  # its Deployment starts a new replica: a new identity
    successor = eventually(lambda: fleet.leader(api) not in {None, leader} and fleet.leader(api), timeout=60)
    assert isinstance(successor, str)
    # The new leader has reconciled the job once it counts it among the Succeeded ones.
    eventually(
        lambda: 'ftspark_jobs{phase="Succeeded"} 1.0' in fleet.probe(successor, "/metrics")[1],
        timeout=60,
        what="the new leader's first look at the finished job",
    )
    time.sleep(5)  # time enough to (wrongly) submit again
    assert world.drivers("report") == [], "a new leader started a finished job"
    after = world.status("report")
    assert (after["phase"], after["attempt"]) == ("Succeeded", status["attempt"])
    print(f"\nbatch job ran to Succeeded in {ran:.1f} s; leader {leader} -> {successor}, not run again")
    world.delete("report")


# Run on the executors: each task imports the package from the venv Spark unpacked into its working directory.
VENV_SCRIPT = """
import sys
from pathlib import Path
from pyspark.sql import SparkSession

import shipped_only  # the driver: from the venv the runtime unpacked

def where(n):
    import shipped_only
    return f"{n}{shipped_only.MARK}@{shipped_only.__file__}"

spark = SparkSession.builder.getOrCreate()
found = spark.sparkContext.parallelize(range(4), 2).map(where).collect()
Path(sys.argv[1], "found.txt").write_text("\\n".join([shipped_only.MARK, *found]))
spark.stop()
"""


@pytest.mark.timeout(600)
def test_a_job_imports_on_its_driver_and_executors_what_only_its_venv_archive_has(
    world: World, tmp_path: Path
) -> None:
    """spec.deps.archives, the script and the packed venv on S3: docs/dependencies.md, as a user ships one."""
    s3 = world.s3.client()
    s3.put_object(Bucket=world.bucket, Key="apps/venv_job.py", Body=VENV_SCRIPT.encode())
    s3.put_object(Bucket=world.bucket, Key="envs/job-venv.tar.gz", Body=venv_archive())
    tmp_path.chmod(0o777)  # the driver writes its finding here
    job = world.job(
        "venv",
        tmp_path,
        tmp_path,
        mainApplicationFile=f"s3://{world.bucket}/apps/venv_job.py",
        arguments=[str(tmp_path)],
        deps={"archives": [f"s3://{world.bucket}/envs/job-venv.tar.gz#environment"]},
    )
    started = time.monotonic()
    world.create(job)
    eventually(lambda: world.status("venv").get("phase") in {"Succeeded", "Failed"}, timeout=300)
    status = world.status("venv")
    assert status["phase"] == "Succeeded", status
    driver_mark, *found = (tmp_path / "found.txt").read_text().splitlines()
    assert driver_mark == MARK
    site = f"environment/lib/{PYTHON}/site-packages/{PACKAGE}/__init__.py"
    assert [line.split("@")[0] for line in found] == [f"{n}{MARK}" for n in range(4)]
    assert all(line.endswith(site) for line in found), found
    print(
        f"\na job importing only from its venv archive ran to Succeeded in {time.monotonic() - started:.1f} s"
    )
    world.delete("venv")


@pytest.mark.timeout(900)
def test_dynamic_allocation_scales_the_executors_up_and_down_and_counts_exactly_once(
    world: World, tmp_path: Path
) -> None:
    """Files every half second, each batch's 24 shuffle partitions backlogged on one core: Spark adds
    executors (its pods made from the job's executor template), then removes them once the input stops; the
    output is what the batch computation says. The executors share one node (the driver is on another), and
    on these nodes a pod's address is its node's: Spark would take them for one host and read each other's
    shuffle files from their own disks, where there are none, unless told not to (the operator does)."""
    scaling = {
        "enabled": True,
        "minExecutors": 1,
        "maxExecutors": 3,
        "executorIdleTimeoutSeconds": 3,
        "shuffleTrackingTimeoutSeconds": 5,
    }
    backlog = {
        "spark.sql.shuffle.partitions": "24",
        "spark.dynamicAllocation.schedulerBacklogTimeout": "1s",
    }

    def on(node: str) -> dict[str, Any]:
        return {"podTemplate": {"spec": {"nodeSelector": {"kubernetes.io/hostname": node}}}}

    spec = {
        "dynamicAllocation": scaling,
        "sparkConf": backlog,
        "driver": on("node-1"),
        "executor": on("node-0"),
    }
    tour = FaultTour(world, tmp_path, subject=WindowedCounts(name="scaling"), feed_interval=0.5, spec=spec)
    seen: list[int] = []
    sampling = threading.Event()

    def executors() -> int:
        pods = client.CoreV1Api(world.api).list_namespaced_pod(
            JOBS_NAMESPACE, label_selector=f"{SPARK_ROLE_LABEL}=executor"
        )
        return sum(p.status.phase == "Running" and p.metadata.name.startswith("scaling-") for p in pods.items)

    def sample() -> None:
        while not sampling.wait(0.5):
            seen.append(executors())

    sampler = threading.Thread(target=sample, daemon=True)
    tour.start()
    sampler.start()
    try:
        tour.wait_for(lambda: max(seen, default=0) >= 2, 240, "Spark adding executors under backlog")
        tour.stop_feeding()
        tour.wait_for(lambda: executors() == 1, 180, "the idle executors removed, down to minExecutors")
    finally:
        sampling.set()
        sampler.join()
    figures = tour.finish()
    print(f"\nexecutors: up to {max(seen)} under backlog, down to 1 when idle\n{tour.report(figures)}")
    assert (figures["lost"], figures["duplicated"], figures["wrong"]) == (0, 0, 0), figures
    status = world.status("scaling")
    assert status["attempt"] == 1, f"scaling is no restart: {tour.failure_evidence()}"
