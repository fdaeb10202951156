"""localRecovery's directories on this node's disk, as domain.localstate plans them: scanned and deleted.

Executors write what they like inside their job's directory, links included (one to `/`, say). Nothing here
follows one: every directory is opened from its parent's descriptor with O_NOFOLLOW, files are lstat'ed and
unlinked by name in their directory (unlink removes a link, never its target), and a job's directory goes
with shutil.rmtree on a descriptor (its symlink-safe walk). So nothing outside `<root>/jobs/<ns>/<uid>` is
deleted, even if a directory is swapped for a link between the scan and the deletion.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ftspark.domain.localstate import JOBS_DIR, STATE_DIR, JobDir, LocalFile, is_job_dir, plain_name

log = logging.getLogger(__name__)

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass(frozen=True)
class Removed:
    files: int
    bytes: int
    failures: int


@contextlib.contextmanager
def _opened(name: str, dir_fd: int | None) -> Iterator[int]:
    """A directory, opened by name in its parent without following a link (ELOOP or ENOTDIR if it is one)."""
    fd = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    try:
        yield fd
    finally:
        os.close(fd)


@contextlib.contextmanager
def _opened_path(parts: tuple[str, ...], dir_fd: int) -> Iterator[int]:
    """The directory at parts below dir_fd, each component opened without following a link."""
    with contextlib.ExitStack() as stack:
        fd = dir_fd
        for part in parts:
            fd = stack.enter_context(_opened(part, fd))
        yield fd


class LocalStateDisk:
    """The root of localRecovery's directories (spec.localRecovery.hostPath), as mounted here."""

    def __init__(self, root: Path) -> None:
        self.root = root

    @contextlib.contextmanager
    def _jobs(self) -> Iterator[int | None]:
        """<root>/jobs, or None where there is none yet. The root is the admin's path, opened as given."""
        root_fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            try:
                jobs = os.open(JOBS_DIR, _DIR_FLAGS, dir_fd=root_fd)
            except FileNotFoundError:
                yield None
                return
            try:
                yield jobs
            finally:
                os.close(jobs)
        finally:
            os.close(root_fd)

    def scan(self) -> list[JobDir]:
        """Every `jobs/<namespace>/<uid>` directory (anything else, links included, is skipped)."""
        found: list[JobDir] = []
        with self._jobs() as jobs:
            if jobs is None:
                return found
            for namespace in _subdirs(jobs):
                try:
                    with _opened(namespace, jobs) as ns_fd:
                        for uid in _subdirs(ns_fd):
                            if is_job_dir(namespace, uid):
                                job = self._scan_job(namespace, uid, ns_fd)
                                if job is not None:
                                    found.append(job)
                except OSError as error:  # swapped for a link, or gone, since it was listed
                    log.warning("local-state sweep: skipped %s/%s: %s", JOBS_DIR, namespace, error)
        return found

    def _scan_job(self, namespace: str, uid: str, ns_fd: int) -> JobDir | None:
        size, files = 0, []
        try:
            with _opened(uid, ns_fd) as job_fd:
                newest = os.fstat(job_fd).st_mtime
                # fwalk with follow_symlinks=False descends into no link and hands out each directory's fd.
                for top, dirs, names, dir_fd in os.fwalk(".", dir_fd=job_fd, follow_symlinks=False):
                    newest = max(newest, os.fstat(dir_fd).st_mtime)
                    parts = tuple(p for p in top.split("/") if p not in ("", "."))
                    for name in (*dirs, *names):
                        try:
                            info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
                        except FileNotFoundError:
                            continue
                        newest = max(newest, info.st_mtime)
                        if stat.S_ISREG(info.st_mode):
                            size += info.st_size
                            if parts[:1] == (STATE_DIR,):
                                files.append(LocalFile((*parts, name), info.st_size, info.st_mtime))
        except (OSError, RecursionError) as error:
            # RecursionError: a tree deeper than Python's walk goes, which only a job's own code makes.
            log.warning("local-state sweep: skipped %s/%s/%s: %s", JOBS_DIR, namespace, uid, error)
            return None
        return JobDir(namespace, uid, size, newest, tuple(files))

    def remove_dir(self, namespace: str, uid: str) -> int:
        """Removes `jobs/<namespace>/<uid>` and everything in it (links themselves, never their targets).
        Returns the failures (logged). Whatever is already gone when its turn comes (removed by another
        sweeper on a root that nodes share) is no failure."""
        failures = 0

        def failed(
            function: object, path: str, excinfo: tuple[type[BaseException], BaseException, object]
        ) -> None:
            nonlocal failures
            if isinstance(excinfo[1], FileNotFoundError):
                return
            failures += 1
            log.warning(
                "local-state sweep: %s/%s/%s: cannot remove %s (%s)", JOBS_DIR, namespace, uid, path, excinfo
            )

        if not is_job_dir(namespace, uid):
            raise ValueError(f"not a job directory: {namespace}/{uid}")
        try:
            with self._jobs() as jobs:
                if jobs is None:
                    return 0
                with _opened(namespace, jobs) as ns_fd:
                    if not stat.S_ISDIR(os.stat(uid, dir_fd=ns_fd, follow_symlinks=False).st_mode):
                        raise NotADirectoryError(uid)
                    shutil.rmtree(uid, dir_fd=ns_fd, onerror=failed)
        except FileNotFoundError:
            return failures
        except (OSError, RecursionError) as error:
            log.warning("local-state sweep: cannot remove %s/%s/%s: %s", JOBS_DIR, namespace, uid, error)
            return failures + 1
        return failures

    def remove_files(self, namespace: str, uid: str, files: tuple[tuple[str, ...], ...]) -> Removed:
        """Unlinks the files (paths relative to the job's directory), each in its own directory reached
        without following links; a file that is no longer a regular file or a link is left."""
        removed = freed = failures = 0
        if not is_job_dir(namespace, uid):
            raise ValueError(f"not a job directory: {namespace}/{uid}")
        with self._jobs() as jobs:
            if jobs is None:
                return Removed(0, 0, 0)
            for path in files:
                if not path or not all(map(plain_name, path)):
                    raise ValueError(f"not a path inside a job's directory: {path!r}")
                *parents, name = path
                try:
                    with _opened_path((namespace, uid, *parents), jobs) as dir_fd:
                        info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
                        if not (stat.S_ISREG(info.st_mode) or stat.S_ISLNK(info.st_mode)):
                            continue
                        os.unlink(name, dir_fd=dir_fd)
                    removed += 1
                    freed += info.st_size if stat.S_ISREG(info.st_mode) else 0
                except FileNotFoundError:
                    continue  # gone already (Spark's own pruning)
                except OSError as error:
                    failures += 1
                    log.warning(
                        "local-state sweep: %s/%s/%s: cannot remove %s: %s",
                        JOBS_DIR,
                        namespace,
                        uid,
                        "/".join(path),
                        error,
                    )
        return Removed(removed, freed, failures)


def _subdirs(dir_fd: int) -> list[str]:
    """The names of the real directories in a directory (links to directories are not)."""
    with os.scandir(dir_fd) as entries:
        return sorted(e.name for e in entries if e.is_dir(follow_symlinks=False))
