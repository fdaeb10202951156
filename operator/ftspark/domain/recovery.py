"""Which checkpoint a new attempt restores.

The newest retained pointer whose checkpoint is really there (commits/<batch> exists); an unusable latest one
falls back to the next older one. When pointers exist but none is usable, the answer is "manual restore
required", never a silent start from nothing (a Flink lesson).

Pointers are written by the driver, that is by the tenant's code, and inspecting one reads S3 with the
operator's credentials: only a pointer into the job's own checkpoint directory (one the operator chooses:
checkpoint_directory) is inspected; any other is unusable without a look, so no pointer can probe another
tenant's buckets.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ftspark.domain.ha import CheckpointPointer


@dataclass(frozen=True)
class RestorePoint:
    pointer: CheckpointPointer | None
    skipped: tuple[int, ...]  # ids of newer pointers found unusable
    outside: tuple[int, ...] = ()  # those of them outside the job's checkpoint directory (never inspected)

    @property
    def why_skipped(self) -> str:
        """The skipped checkpoints and why, for people; empty when none was skipped."""
        if not self.skipped:
            return ""
        incomplete = [i for i in self.skipped if i not in self.outside]
        reasons = [f"{incomplete} not complete in storage"] if incomplete else []
        if self.outside:
            reasons.append(f"{list(self.outside)} outside the job's checkpoint directory")
        return f"unusable checkpoints {list(self.skipped)}: {'; '.join(reasons)}"

    @property
    def unusable(self) -> str:
        """Why a manual restore is required (pointers exist, none is usable); empty when restorable."""
        if self.pointer is not None or not self.skipped:
            return ""
        return (
            f"none of the retained checkpoints is usable ({self.why_skipped}); manual restore required (set "
            "spec.initialSavepoint, or use upgradeMode: stateless to start without state)"
        )


def checkpoint_directory(storage: str, uid: str, run: int) -> str:
    """The directory of a job's run n, as the operator chooses it: under the job's storage, named by its uid,
    so that a re-created job of the same name never resumes its predecessor's state by accident."""
    return f"{_runs(storage, uid)}{run}"


def checkpoint_directories_prefix(storage: str, uid: str) -> str:
    """The prefix every checkpoint directory of the job starts with, and nothing of another job does (a
    uid's first 8 hex digits, then "-run-"): what a deleted job's data retention deletes."""
    return _runs(storage, uid)


def is_checkpoint_directory(location: str, storage: str, uid: str) -> bool:
    """Whether location is a directory the operator chooses for the job (checkpoint_directory)."""
    run = location.removeprefix(_runs(storage, uid))
    return run != location and run.isascii() and run.isdigit()


def is_checkpoint_folder(prefix: str, uid: str) -> bool:
    """Whether prefix is the folder (folder_of) of a checkpoint directory the operator chooses for the job
    uid, under whatever storage: the only shape a deleted job's data retention deletes."""
    storage, marker, run = prefix.rpartition(f"/checkpoints/{uid[:8]}-run-")
    number = run.removesuffix("/")
    return (
        bool(marker and storage)
        and number.isascii()
        and number.isdigit()
        and prefix == folder_of(checkpoint_directory(storage, uid, int(number)))
    )


def directory_of(location: str, storage: str, uid: str) -> str | None:
    """The job's checkpoint directory that holds the query checkpoint at location (<directory>/<query>), if
    location is inside one the operator chooses for the job; None otherwise."""
    directory = as_s3(location).rstrip("/").rpartition("/")[0]
    return directory if is_checkpoint_directory(directory, storage, uid) else None


def _runs(storage: str, uid: str) -> str:
    return f"{storage.rstrip('/')}/checkpoints/{uid[:8]}-run-"


def choose_restore_point(
    pointers: Sequence[CheckpointPointer],
    committed: Callable[[CheckpointPointer], bool],
    directory: str | None,
) -> RestorePoint:
    """pointers newest first; committed(pointer) checks the checkpoint directory; directory: the job's, None
    when it has none the operator chose (every pointer then lies outside)."""
    skipped: list[int] = []
    outside: list[int] = []
    for pointer in pointers:
        if directory is None or not _within(pointer.location, directory):
            outside.append(pointer.checkpoint_id)
        elif committed(pointer):
            return RestorePoint(pointer, tuple(skipped), tuple(outside))
        skipped.append(pointer.checkpoint_id)
    return RestorePoint(None, tuple(skipped), tuple(outside))


def _within(location: str, directory: str) -> bool:
    """location is directory or a path below it (s3a:// is s3://, as for Spark): the driver puts each query's
    checkpoints in <directory>/<query>. A '.', '..' or empty segment is refused: a server may resolve it
    elsewhere."""
    path, root = as_s3(location).rstrip("/"), as_s3(directory).rstrip("/")
    if path != root and not path.startswith(f"{root}/"):
        return False
    return all(segment not in ("", ".", "..") for segment in path.removeprefix(root).split("/")[1:])


def folder_of(directory: str) -> str:
    """A checkpoint directory as the folder prefix storage deletes (s3://, one trailing slash)."""
    return as_s3(directory).rstrip("/") + "/"


def as_s3(uri: str) -> str:
    """s3a:// (Spark's spelling) written as s3://: the same object either way."""
    return "s3://" + uri.removeprefix("s3a://") if uri.startswith("s3a://") else uri
