"""The checkpoint directories of a job's earlier runs (a stateless upgrade, a fresh start): kept while a
rollback may want them, then deleted, each only when it is one the operator chose for this job."""

from __future__ import annotations

from ftspark.domain.lifecycle.actions import DeleteCheckpointDirectory, EmitEvent
from ftspark.domain.lifecycle.delays import DISPOSAL_RECHECK, POLL
from ftspark.domain.lifecycle.draft import Draft
from ftspark.domain.lifecycle.upgrade_rollback import until_window_ends, within_window
from ftspark.domain.recovery import directory_of, folder_of, is_checkpoint_directory


def retiring(draft: Draft, new: str) -> list[str]:
    """The directories to delete once the fresh run at `new` is under way: those already waiting, and the
    run it replaces."""
    retired = list(draft.status.retired_checkpoint_directories)
    graph = draft.obs.own_graph
    if graph is None:
        return retired
    previous, storage = graph.checkpoint_location, draft.spec.checkpoint.storage
    own = is_checkpoint_directory(previous, storage, draft.obs.job_uid)
    if own and previous != new and previous not in retired:
        retired.append(previous)
    return retired


def delete_retired_directories(draft: Draft) -> float:
    """While Running (past the rollback window, when rollback is on: a rollback may want them): delete
    what earlier runs left; drop a directory from the status once storage shows it empty. Seconds until
    the next look."""
    retired = draft.status.retired_checkpoint_directories
    if not retired:
        return POLL
    started = draft.status.attempt_started_at
    if draft.spec.upgrade_rollback.enabled and within_window(draft, started):
        return until_window_ends(draft, started)
    storage, uid = draft.spec.checkpoint.storage, draft.obs.job_uid
    done: list[str] = []
    for directory in retired:
        if directory == draft.status.checkpoint_directory or not is_checkpoint_directory(
            directory, storage, uid
        ):
            done.append(directory)  # not one to delete (the status is the user's object too)
            continue
        match draft.obs.retired_present.get(directory):
            case True:
                draft.actions.append(DeleteCheckpointDirectory(folder_of(directory)))
            case False:
                message = f"checkpoint directory {directory} of an earlier run deleted"
                draft.actions.append(EmitEvent("Normal", "CheckpointDirectoryDeleted", message))
                done.append(directory)
            case None:
                pass  # not read: storage was unreachable
    if done:
        draft.update(retired_checkpoint_directories=[d for d in retired if d not in done])
    return DISPOSAL_RECHECK if len(done) < len(retired) else POLL


def directory_from_status(draft: Draft) -> str | None:
    """The directory the status names (the current attempt's, else the latest checkpoint's), if it is one
    the operator chose for this job: the status is the user's object too."""
    known = draft.status.checkpoint_directory
    latest = draft.status.latest_checkpoint
    storage, uid = draft.spec.checkpoint.storage, draft.obs.job_uid
    if known is not None and is_checkpoint_directory(known, storage, uid):
        return known
    return directory_of(latest.location, storage, uid) if latest is not None else None
