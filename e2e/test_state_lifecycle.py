"""The job's state over its life, with real Spark: periodic savepoints kept to the history (the others'
data deleted from S3), a stop with a savepoint and a resume that processes nothing twice, and a spec change
that fails at once, rolled back to the last stable spec."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from tests.waiting import eventually

from ftspark.domain.lifecycle import stop_savepoint_id
from ftspark_dev.subjects.windowed_counts import Output, expected_counts, write_input
from ftspark_dev.worlds.process_nodes import World

NAME = "lifelong"
PERIOD = 5  # seconds between periodic savepoints
WINDOW = 15  # upgradeRollback.windowSeconds


def _savepoints(world: World) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = world.status(NAME).get("savepoints", [])
    return found


def _known_savepoints(world: World) -> set[str]:
    """The savepoints the status records, disposes of, or has asked for."""
    status = world.status(NAME)
    asked = status.get("savepointInProgress")
    return (
        {sp["id"] for sp in status.get("savepoints", [])}
        | set(status.get("savepointsDisposing", []))
        | ({asked["id"]} if asked else set())
    )


def _generation(world: World) -> int:
    return int(world.resource(NAME)["metadata"]["generation"])


def _bytes_under(world: World, prefix: str) -> int:
    pages = world.s3.client().get_paginator("list_objects_v2").paginate(Bucket=world.bucket, Prefix=prefix)
    return sum(item["Size"] for page in pages for item in page.get("Contents", []))


@pytest.mark.timeout(1500)
def test_periodic_savepoints_a_stop_with_savepoint_and_a_rolled_back_upgrade(
    world: World, tmp_path: Path
) -> None:
    source, output, files = tmp_path / "in", Output(tmp_path / "out"), 4
    write_input(source, files)
    savepoints: dict[str, Any] = {
        "periodicIntervalSeconds": PERIOD,
        "history": {"maxCount": 2, "maxAgeSeconds": 0},
    }
    rollback = {"enabled": True, "windowSeconds": WINDOW}
    world.create(world.job(NAME, source, output.folder, savepoints=savepoints, upgradeRollback=rollback))

    def counted(step: str) -> None:
        eventually(lambda: output.counts() == expected_counts(files), timeout=300, what=f"counted {step}")

    counted("at first")

    # Periodic savepoints: after the third, the history holds two and the first's data is gone from S3.
    savepoints_prefix = f"jobs/{NAME}/savepoints/"
    eventually(
        lambda: "SavepointDisposed" in world.events(NAME),
        timeout=PERIOD * 6 + 120,
        what=lambda: f"a periodic savepoint disposed of; savepoints {_savepoints(world)}",
    )
    # One read: a pass that records a savepoint also chooses which the history no longer keeps, and those
    # stay in status.savepoints (savepointsDisposing names them) until their data is gone.
    status = world.status(NAME)
    disposing = set(status.get("savepointsDisposing", []))
    kept = [sp["id"] for sp in status.get("savepoints", []) if sp["id"] not in disposing]
    assert len(kept) <= 2, f"the history keeps two: {kept}, disposing of {disposing}"
    assert all(sp["origin"] == "periodic" for sp in status.get("savepoints", [])), status.get("savepoints")
    # Every savepoint folder on S3 is one the status knows of (read before and after the listing: one may be
    # taken or disposed of meanwhile).
    known = _known_savepoints(world)
    listed = world.s3.client().list_objects_v2(Bucket=world.bucket, Prefix=savepoints_prefix, Delimiter="/")
    folders = [p["Prefix"].removeprefix(savepoints_prefix).rstrip("/") for p in listed["CommonPrefixes"]]
    known |= _known_savepoints(world)
    assert set(folders) <= known, f"savepoint folders the status does not know: {set(folders) - known}"
    print(f"\nperiodic savepoints: kept {kept}, {_bytes_under(world, savepoints_prefix)} bytes on S3")

    # Stop with a savepoint, then resume: the savepoint holds the final batch; nothing runs twice.
    attempt = world.status(NAME)["attempt"]
    world.patch(NAME, {"desiredState": "stopped", "savepoints": {**savepoints, "onStop": True}})
    eventually(lambda: world.status(NAME).get("phase") == "Stopped", timeout=240, what="Stopped")
    stop_savepoint = stop_savepoint_id(world.uid(NAME), attempt)
    taken = next(sp for sp in _savepoints(world) if sp["id"] == stop_savepoint)
    assert taken["origin"] == "stop"
    assert taken["batchId"] == max(output.batches()), "the savepoint holds the stop's final batch"
    world.patch(NAME, {"desiredState": "running"})
    write_input(source, 2, first_file=files)
    files += 2
    counted("after the resume")
    rerun = {batch: runs for batch, runs in output.runs().items() if runs > 1}
    assert rerun == {}, f"batches run twice after a stop with savepoint: {rerun}"

    # A spec change that fails at once (its main file does not exist): rolled back once the stable spec ran
    # for the window; the job runs the stable spec again and counts the new files.
    eventually(
        lambda: world.status(NAME).get("lastStableSpec", {}).get("generation") == _generation(world),
        timeout=WINDOW + 120,
        what="the resumed spec stable",
    )
    started = time.monotonic()
    world.patch(NAME, {"mainApplicationFile": "local:///nowhere/job.py"})
    broken = _generation(world)
    eventually(
        lambda: world.status(NAME).get("upgradeRollback", {}).get("generation") == broken,
        timeout=240,
        what=lambda: f"the rollback; {world.status(NAME)}",
    )
    write_input(source, 2, first_file=files)
    files += 2
    counted("after the rollback")
    print(f"broken upgrade -> rolled back and counting: {time.monotonic() - started:.1f} s")
    assert "UpgradeRolledBack" in world.events(NAME)
    spec = world.resource(NAME)["spec"]
    assert spec["mainApplicationFile"] == "local:///nowhere/job.py", "the spec stays as written"
    world.delete(NAME)
