"""The local-state sweeper: its plan (pure), and its disk adapter against a real temporary directory that a
hostile executor has filled with links."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from ftspark.adapters.localstate import LocalStateDisk
from ftspark.app.sweeper import parse, sweep_once
from ftspark.domain.localstate import (
    JobDir,
    LocalFile,
    SweepLimits,
    parse_bytes,
    plan_sweep,
)

NOW = 1_000_000.0
GRACE = 600.0
LIVE = "11111111-1111-1111-1111-111111111111"
GONE = "22222222-2222-2222-2222-222222222222"
OTHER = "33333333-3333-3333-3333-333333333333"


def _limits(max_bytes: int | None = None) -> SweepLimits:
    return SweepLimits(grace_seconds=GRACE, max_bytes_per_job=max_bytes)


def _copy(name: str, size: int, age: float) -> LocalFile:
    return LocalFile(("state", "s3a", "bucket", "state", "0", "1", name), size, NOW - age)


# The plan


def test_a_gone_jobs_directory_goes_once_older_than_the_grace() -> None:
    old = JobDir("ns", GONE, 500, NOW - GRACE - 1)
    fresh = JobDir("ns", OTHER, 700, NOW - GRACE + 1)  # a job created after the listing: not gone
    live = JobDir("ns", LIVE, 900, NOW - 10 * GRACE)
    plan = plan_sweep([old, fresh, live], frozenset({LIVE}), _limits(), NOW)
    assert [(r.namespace, r.uid, r.size) for r in plan.removals] == [("ns", GONE, 500)]
    assert plan.trims == ()


def test_only_jobs_ns_uid_shapes_are_ever_planned() -> None:
    shapes = [
        JobDir("ns", "not-a-uid", 1, 0.0),
        JobDir("NS", GONE, 1, 0.0),  # not a namespace name
        JobDir("..", GONE, 1, 0.0),
        JobDir("ns", "AAAAAAAA-2222-2222-2222-222222222222", 1, 0.0),  # uids are lower case
    ]
    assert plan_sweep(shapes, frozenset(), _limits(), NOW).removals == ()


def test_a_namespace_the_sweeper_does_not_list_is_left_alone() -> None:
    """Its jobs are not in the listing: absent from it is not gone."""
    dirs = [JobDir("watched", GONE, 1, 0.0), JobDir("elsewhere", OTHER, 1, 0.0)]
    plan = plan_sweep(dirs, frozenset(), _limits(), NOW, namespaces=frozenset({"watched"}))
    assert [r.uid for r in plan.removals] == [GONE]
    assert plan.kept_unknown_namespace == 1
    assert {r.uid for r in plan_sweep(dirs, frozenset(), _limits(), NOW).removals} == {GONE, OTHER}


def test_a_live_job_over_its_bound_loses_its_oldest_copies_with_their_records_first() -> None:
    files = (
        _copy("1.zip", 400, 5000),
        _copy("1.zip.lrmeta", 10, 4999),
        _copy("2.zip", 400, 4000),
        _copy("2.zip.lrmeta", 10, 3999),
        _copy("3.zip", 400, 3000),
        _copy("3.zip.lrmeta", 10, 2999),
    )
    job = JobDir("ns", LIVE, 1230 + 300, NOW, files)  # 300 bytes of Spark's own files besides
    plan = plan_sweep([job], frozenset({LIVE}), _limits(max_bytes=1000), NOW)
    (trim,) = plan.trims
    names = [path[-1] for path in trim.files]
    assert names == ["1.zip", "1.zip.lrmeta", "2.zip", "2.zip.lrmeta"], "oldest first, until under the bound"
    assert (trim.freed, trim.still_over) == (820, 0)
    assert plan.removals == ()


def test_a_live_job_under_its_bound_or_without_one_is_untouched() -> None:
    job = JobDir("ns", LIVE, 1000, NOW, (_copy("1.zip", 1000, 5000),))
    assert plan_sweep([job], frozenset({LIVE}), _limits(max_bytes=1000), NOW).trims == ()
    assert plan_sweep([job], frozenset({LIVE}), _limits(max_bytes=None), NOW).trims == ()


def test_recent_copies_and_sparks_own_files_are_never_trimmed() -> None:
    """The newest copies (the latest checkpoint's, or being written) and everything outside state/ are in use:
    what they hold over the bound is reported, not removed."""
    files = (
        _copy("1.zip", 100, 5000),
        _copy("2.zip", 100, GRACE - 1),  # recent
        LocalFile(("blockmgr-1", "0c", "shuffle_0_0_0.data"), 10_000, NOW - 5000),  # Spark's, in use
        LocalFile(("state", "..", "..", "escape"), 10_000, NOW - 5000),  # never a path out of the job
    )
    job = JobDir("ns", LIVE, 20_200, NOW, files)
    (trim,) = plan_sweep([job], frozenset({LIVE}), _limits(max_bytes=1000), NOW).trims
    assert [path[-1] for path in trim.files] == ["1.zip"]
    assert (trim.freed, trim.still_over) == (100, 19_100)


def test_byte_counts_read_as_kubernetes_quantities() -> None:
    assert parse_bytes("1048576") == 1048576
    assert parse_bytes("50Gi") == 50 * 2**30
    assert parse_bytes("500M") == 500_000_000
    for bad in ("", "-1", "1.5Gi", "10GB", "lots"):
        with pytest.raises(ValueError, match="not a byte count"):
            parse_bytes(bad)


def test_flags_are_checked_in_one_place() -> None:
    cfg = parse(["--root", "/var/lib/x/", "--interval", "60", "--grace", "120", "--max-bytes-per-job", "1Gi"])
    assert (cfg.root, cfg.interval_seconds, cfg.grace_seconds, cfg.max_bytes_per_job) == (
        "/var/lib/x",
        60.0,
        120.0,
        2**30,
    )
    assert parse(["--max-bytes-per-job", "0"]).max_bytes_per_job is None
    for bad in (["--root", "relative"], ["--root", "/"], ["--grace", "5"], ["--max-bytes-per-job", "x"]):
        with pytest.raises(SystemExit):
            parse(bad)


# The disk, hostile


def _job_dir(root: Path, namespace: str, uid: str) -> Path:
    path = root / "jobs" / namespace / uid
    path.mkdir(parents=True)
    return path


def _age(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then), follow_symlinks=False)


def _age_tree(top: Path, seconds: float) -> None:
    for here, dirs, files in os.walk(top, topdown=False):
        for name in (*dirs, *files):
            _age(Path(here) / name, seconds)
    _age(top, seconds)


def test_links_planted_by_an_executor_are_removed_as_links_and_never_followed(tmp_path: Path) -> None:
    """An executor owns its job's directory and can plant links to / or to any directory outside. Whole-
    directory removal and trimming unlink the links themselves; what they point at stays, and no byte of it
    is counted as the job's."""
    outside = tmp_path / "outside"
    (outside / "sub").mkdir(parents=True)
    (outside / "precious").write_bytes(b"x" * 5000)
    (outside / "sub" / "precious").write_bytes(b"y" * 5000)
    root = tmp_path / "root"
    gone = _job_dir(root, "ns", GONE)
    (gone / "state").mkdir()
    (gone / "state" / "1.zip").write_bytes(b"z" * 100)
    (gone / "to-outside").symlink_to(outside)
    (gone / "state" / "to-root").symlink_to("/")
    (gone / "state" / "to-file").symlink_to(outside / "precious")
    _age_tree(gone, 2 * GRACE)
    live = _job_dir(root, "ns", LIVE)
    copies = live / "state" / "s3a" / "b"
    copies.mkdir(parents=True)
    (copies / "1.zip").write_bytes(b"a" * 1000)
    (copies / "link-dir").symlink_to(outside / "sub")  # looks like a directory of copies
    (copies / "link-file").symlink_to(outside / "precious")
    _age_tree(live, 2 * GRACE)
    (root / "jobs" / "linked-ns").symlink_to(outside)  # not a directory of the root: skipped
    (root / "jobs" / "ns" / OTHER).symlink_to(outside)  # not a job directory: a link to one

    disk = LocalStateDisk(root)
    scanned = {job.uid: job for job in disk.scan()}
    assert scanned.keys() == {GONE, LIVE}, "links are never job directories"
    assert scanned[LIVE].size == 1000, "nothing behind a link is counted"
    assert {f.path[-1] for f in scanned[LIVE].state_files} == {"1.zip"}

    report = sweep_once(disk, lambda: frozenset({LIVE}), _limits(max_bytes=10), now=time.time)
    assert report is not None
    assert (report.dirs_removed, report.files_removed, report.failures) == (1, 1, 0)
    assert not gone.exists()
    assert not (copies / "1.zip").exists()
    assert (copies / "link-dir").is_symlink(), "a live job's links are not copies: never touched"
    assert (outside / "precious").read_bytes() == b"x" * 5000
    assert (outside / "sub" / "precious").read_bytes() == b"y" * 5000
    assert (root / "jobs" / "ns" / OTHER).is_symlink()


def test_a_directory_swapped_for_a_link_after_the_scan_is_not_followed(tmp_path: Path) -> None:
    """Between the plan and the unlink the executor replaces a directory of copies by a link to a directory
    outside that holds a file of the same name: that file stays."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "1.zip").write_bytes(b"keep")
    root = tmp_path / "root"
    live = _job_dir(root, "ns", LIVE)
    (live / "state" / "d").mkdir(parents=True)
    (live / "state" / "d" / "1.zip").write_bytes(b"a" * 100)
    disk = LocalStateDisk(root)
    (live / "state" / "d" / "1.zip").unlink()
    (live / "state" / "d").rmdir()
    (live / "state" / "d").symlink_to(outside)
    removed = disk.remove_files("ns", LIVE, (("state", "d", "1.zip"),))
    assert (removed.files, removed.failures) == (0, 1)
    assert (outside / "1.zip").read_bytes() == b"keep"
    with pytest.raises(ValueError, match="not a path inside"):
        disk.remove_files("ns", LIVE, (("state", "..", "..", "..", "outside", "1.zip"),))
    # A job directory swapped for a link: refused as a directory to remove, its target untouched.
    swapped = root / "jobs" / "ns" / GONE
    swapped.symlink_to(outside)
    assert disk.remove_dir("ns", GONE) == 1
    assert (outside / "1.zip").read_bytes() == b"keep"


def test_a_pass_whose_listing_fails_deletes_nothing(tmp_path: Path) -> None:
    root = tmp_path / "root"
    gone = _job_dir(root, "ns", GONE)
    (gone / "f").write_bytes(b"x")
    _age_tree(gone, 2 * GRACE)

    def unreachable() -> frozenset[str]:
        raise ConnectionRefusedError("API server down")

    assert sweep_once(LocalStateDisk(root), unreachable, _limits()) is None
    assert (gone / "f").exists()


def test_a_tree_deeper_than_a_walk_goes_skips_its_job_and_no_other(tmp_path: Path) -> None:
    """A job's code can nest directories past Python's recursion limit: the pass goes on without that job."""
    root = tmp_path / "root"
    deep = _job_dir(root, "ns", GONE)
    fd = os.open(deep, os.O_RDONLY)
    try:
        for _ in range(1200):  # relative to the last one: no path grows past PATH_MAX
            os.mkdir("d", dir_fd=fd)
            inner = os.open("d", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = inner
    finally:
        os.close(fd)
    other = _job_dir(root, "ns", OTHER)
    (other / "f").write_bytes(b"x")
    _age_tree(other, 2 * GRACE)

    disk = LocalStateDisk(root)
    try:
        assert {job.uid for job in disk.scan()} == {OTHER}
        report = sweep_once(disk, lambda: frozenset({LIVE}), _limits(), now=time.time)
        assert report is not None and report.dirs_removed == 1
        assert not other.exists() and deep.exists()
        assert disk.remove_dir("ns", GONE) == 1, "refused, not raised"
    finally:
        # GNU rm walks without recursion; pytest's clean-up of tmp_path (shutil.rmtree) would fail on it.
        subprocess.run(["rm", "-rf", "--", str(deep)], check=True)


def test_what_another_sweeper_removes_first_is_no_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nodes that share a root (one filesystem) run one sweeper each, and they race for the same gone
    directory: every unlink and rmdir of this one finds its entry already removed by the other."""
    root = tmp_path / "root"
    gone = _job_dir(root, "ns", GONE)
    (gone / "state" / "s3a").mkdir(parents=True)
    (gone / "state" / "s3a" / "1.zip").write_bytes(b"z" * 100)
    (gone / "spark-local").write_bytes(b"x" * 10)
    _age_tree(gone, 2 * GRACE)
    disk = LocalStateDisk(root)
    real_unlink, real_rmdir = os.unlink, os.rmdir
    raced: list[str] = []

    def rival_first(real: Callable[..., None]) -> Callable[..., None]:
        def removal(path: str, *, dir_fd: int | None = None) -> None:
            real(path, dir_fd=dir_fd)  # the other sweeper, a moment earlier
            raced.append(path)
            real(path, dir_fd=dir_fd)  # this one: FileNotFoundError

        return removal

    monkeypatch.setattr(os, "unlink", rival_first(real_unlink))
    monkeypatch.setattr(os, "rmdir", rival_first(real_rmdir))
    report = sweep_once(disk, lambda: frozenset({LIVE}), _limits(), now=time.time)
    monkeypatch.undo()
    assert report is not None
    assert (report.dirs_removed, report.failures) == (1, 0)
    assert not gone.exists()
    assert {"1.zip", "spark-local", "s3a", "state", GONE} <= set(raced), "every removal was raced"
    assert disk.remove_dir("ns", GONE) == 0, "a directory already gone as a whole"
