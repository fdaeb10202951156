"""What the per-node sweeper of localRecovery's directories removes: a plan, from what a scan found on the
node's disk and which jobs the API server lists. Values only; the adapter (adapters.localstate) scans and
deletes.

A job's executors mount `<root>/jobs/<namespace>/<uid>`: Spark's local dir, and under `state/` the job's
verified copies of its checkpoint's state files. The copies are an optimisation: S3 is the truth, and a copy
that is missing (or vanishes while being opened) is read from S3 and copied again. So:

- a directory whose uid no live job has, and in which nothing changed for the grace period, goes whole (the
  grace covers a job created after the listing, whose executors are already writing);
- a live job over its byte bound loses copies under `state/`, the oldest first, until it is under the bound;
  never a copy written within the grace period (the newest: the latest checkpoint's, or one being written),
  never anything outside `state/` (Spark's shuffle files and RocksDB's working files are in use);
- anything not shaped `jobs/<namespace>/<uid>` is left alone, and so is a namespace the sweeper does not
  watch (its jobs are not listed: absent from the list is not gone).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

JOBS_DIR = "jobs"  # <root>/jobs/<namespace>/<uid>, as manifests.local_recovery_node_dir lays it out
STATE_DIR = "state"  # the copies, inside a job's directory
RECORD_SUFFIX = ".lrmeta"  # a copy's record: it goes with its copy

# A namespace is a DNS label; a uid is what the API server assigns (a UUID, lower case).
_NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_UID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
_QUANTITY = re.compile(r"^([0-9]+)(Ki|Mi|Gi|Ti|Pi|k|K|M|G|T|P)?$")
_UNITS = {
    None: 1,
    "k": 10**3,
    "K": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
}


def is_job_dir(namespace: str, uid: str) -> bool:
    """Whether `jobs/<namespace>/<uid>` is shaped as the operator names a job's directory."""
    return bool(_NAMESPACE.match(namespace)) and bool(_UID.match(uid))


def parse_bytes(text: str) -> int:
    """A byte count as Kubernetes writes quantities: 1048576, 500M, 50Gi. Raises ValueError otherwise."""
    match = _QUANTITY.match(text.strip())
    if not match:
        raise ValueError(f"not a byte count: {text!r} (e.g. 1073741824, 500M, 50Gi)")
    return int(match.group(1)) * _UNITS[match.group(2)]


@dataclass(frozen=True)
class LocalFile:
    """A regular file under a job's `state/` (a copy, its record, a staging file, a stats file)."""

    path: tuple[str, ...]  # components relative to the job's directory: ("state", "s3a", ..., "1.zip")
    size: int
    mtime: float


@dataclass(frozen=True)
class JobDir:
    """One `<root>/jobs/<namespace>/<uid>` as the scan found it (links are counted as themselves, not
    followed)."""

    namespace: str
    uid: str
    size: int  # bytes of every regular file in it, state/ and Spark's local dir alike
    newest: float  # the newest mtime of anything in it, the directory itself included
    state_files: tuple[LocalFile, ...] = ()


@dataclass(frozen=True)
class SweepLimits:
    grace_seconds: float
    max_bytes_per_job: int | None  # None: no bound


@dataclass(frozen=True)
class DirRemoval:
    namespace: str
    uid: str
    size: int


@dataclass(frozen=True)
class Trim:
    """A live job over its bound: the copies to remove (oldest first), what that frees, and what is still over
    the bound after it (files in use, newer than the grace or outside state/)."""

    namespace: str
    uid: str
    files: tuple[tuple[str, ...], ...]
    freed: int
    still_over: int


@dataclass(frozen=True)
class SweepPlan:
    removals: tuple[DirRemoval, ...] = ()
    trims: tuple[Trim, ...] = ()
    kept_unknown_namespace: int = 0  # directories in namespaces the sweeper does not watch (left alone)


def plan_sweep(
    dirs: Iterable[JobDir],
    live_uids: frozenset[str],
    limits: SweepLimits,
    now: float,
    *,
    namespaces: frozenset[str] | None = None,
) -> SweepPlan:
    """What to remove. live_uids must be a complete listing of the watched namespaces (all of them when
    namespaces is None): whoever cannot list them must not plan at all."""
    removals: list[DirRemoval] = []
    trims: list[Trim] = []
    unknown = 0
    for job in sorted(dirs, key=lambda d: (d.namespace, d.uid)):
        if not is_job_dir(job.namespace, job.uid):
            continue
        if job.uid in live_uids:
            trim = _trim(job, limits, now)
            if trim is not None:
                trims.append(trim)
        elif namespaces is not None and job.namespace not in namespaces:
            unknown += 1
        elif job.newest < now - limits.grace_seconds:
            removals.append(DirRemoval(job.namespace, job.uid, job.size))
    return SweepPlan(tuple(removals), tuple(trims), unknown)


def plain_name(component: str) -> bool:
    """One name inside a directory: never a way out of it."""
    return component not in ("", ".", "..") and "/" not in component and "\0" not in component


def _trim(job: JobDir, limits: SweepLimits, now: float) -> Trim | None:
    bound = limits.max_bytes_per_job
    if bound is None or job.size <= bound:
        return None
    # A copy and its record go together, as old as the newer of the two.
    groups: dict[tuple[str, ...], list[LocalFile]] = {}
    for file in job.state_files:
        if len(file.path) < 2 or file.path[0] != STATE_DIR or not all(map(plain_name, file.path)):
            continue  # only the copies: the rest of the directory is Spark's, in use
        name = file.path[-1]
        key = (*file.path[:-1], name.removesuffix(RECORD_SUFFIX))
        groups.setdefault(key, []).append(file)
    ordered = sorted(groups.items(), key=lambda item: (max(f.mtime for f in item[1]), item[0]))
    over = job.size - bound
    chosen: list[tuple[str, ...]] = []
    freed = 0
    for _, files in ordered:
        if freed >= over:
            break
        if max(f.mtime for f in files) >= now - limits.grace_seconds:
            break  # this one and every one after it are recent: the latest checkpoint's, or being written
        for file in sorted(files, key=lambda f: f.path):
            chosen.append(file.path)
            freed += file.size
    return Trim(job.namespace, job.uid, tuple(chosen), freed, max(0, over - freed))
