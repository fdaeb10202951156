"""One pass of the local-state sweeper with its real adapters: the jobs as the API server lists them, and a
temporary directory as the node's localRecovery root."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

from kubernetes import client

from ftspark import API_GROUP, API_VERSION, PLURAL
from ftspark.adapters.k8s.live_jobs import live_job_uids
from ftspark.adapters.localstate import LocalStateDisk
from ftspark.app.sweeper import sweep_once
from ftspark.domain.localstate import SweepLimits
from ftspark_dev.cluster.operators import job_manifest

GRACE = 600.0


def _age(top: Path, seconds: float) -> None:
    """Sets the mtime of top and everything in it (links themselves) seconds into the past."""
    then = time.time() - seconds
    for here, dirs, files in os.walk(top, topdown=False):
        for name in (*dirs, *files):
            os.utime(Path(here) / name, (then, then), follow_symlinks=False)
    os.utime(top, (then, then))


def _write(path: Path, size: int, age: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"s" * size)
    then = time.time() - age
    os.utime(path, (then, then))


def test_one_pass_keeps_live_jobs_removes_gone_ones_and_trims_the_oversized(
    crd: None, api_client: client.ApiClient, namespace: str, tmp_path: Path
) -> None:
    objects = client.CustomObjectsApi(api_client)
    live_uids = [
        objects.create_namespaced_custom_object(
            API_GROUP, API_VERSION, namespace, PLURAL, job_manifest(name, "bucket")
        )["metadata"]["uid"]
        for name in ("small", "big")
    ]
    small, big = live_uids
    gone_old, gone_fresh = str(uuid.uuid4()), str(uuid.uuid4())
    jobs = tmp_path / "root" / "jobs" / namespace
    outside = tmp_path / "outside"
    _write(outside / "precious", 100, 0)

    _write(jobs / small / "state" / "s3a" / "b" / "1.zip", 100, 3 * GRACE)
    _age(jobs / small, 3 * GRACE)  # old, but its job is live
    _write(jobs / gone_old / "state" / "s3a" / "b" / "1.zip", 100, 3 * GRACE)
    (jobs / gone_old / "state" / "outside").symlink_to(outside)
    _age(jobs / gone_old, 3 * GRACE)
    _write(jobs / gone_fresh / "state" / "s3a" / "b" / "1.zip", 100, 10)  # a job newer than the listing
    copies = jobs / big / "state" / "s3a" / "b" / "state" / "0" / "0"
    for version, age in ((1, 4 * GRACE), (2, 3 * GRACE), (3, 2 * GRACE), (4, 10)):
        _write(copies / f"{version}.zip", 1000, age)
        _write(copies / f"{version}.zip.lrmeta", 10, age)
    _write(jobs / big / "blockmgr-1" / "shuffle_0_0_0.data", 500, 4 * GRACE)  # Spark's own, in use

    disk = LocalStateDisk(tmp_path / "root")
    limits = SweepLimits(grace_seconds=GRACE, max_bytes_per_job=2600)

    # The API server out of reach: nothing is deleted.
    unreachable = client.Configuration(host="http://127.0.0.1:9")
    unreachable.retries = 0
    down = client.ApiClient(unreachable)
    before = sorted(p.name for p in jobs.iterdir())
    assert sweep_once(disk, lambda: live_job_uids(down, (namespace,), timeout=2), limits) is None
    assert sorted(p.name for p in jobs.iterdir()) == before

    assert {small, big} <= live_job_uids(api_client)  # cluster-wide, as with rbac.clusterWide
    report = sweep_once(
        disk,
        lambda: live_job_uids(api_client, (namespace,)),
        limits,
        namespaces=frozenset({namespace}),
    )
    assert report is not None
    assert (report.dirs_removed, report.files_removed, report.failures, report.still_over) == (1, 4, 0, 0)
    assert (jobs / small / "state" / "s3a" / "b" / "1.zip").exists(), "a live job's directory is kept"
    assert not (jobs / gone_old).exists(), "a gone job's old directory is removed"
    assert (jobs / gone_fresh / "state" / "s3a" / "b" / "1.zip").exists(), "within the grace: kept"
    assert (outside / "precious").read_bytes() == b"s" * 100, "a link went as a link, its target stays"
    # 4540 bytes, bound 2600: the oldest copy and its record (1010) are not enough, the next go too.
    assert sorted(p.name for p in copies.iterdir()) == ["3.zip", "3.zip.lrmeta", "4.zip", "4.zip.lrmeta"]
    assert (jobs / big / "blockmgr-1" / "shuffle_0_0_0.data").exists(), "Spark's own files are never trimmed"
    assert report.bytes_freed == 100 + 2020
