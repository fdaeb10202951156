"""Periodic savepoints and the savepoint history: which savepoint to ask for next, which to dispose of.

Disposing of a savepoint deletes its data under <storage>/savepoints/<id>/, then its reference. It takes two
status writes, so that no reference ever stays in status.savepoints while its data may be gone:

    1. chosen    its id joins status.savepointsDisposing; nothing is deleted (a write refused as stale loses
                 nothing: the next pass chooses again, on a fresh read)
    2. deleted   while its id is recorded there: each pass deletes what storage still holds of it (every
                 object, the manifest last); once a pass sees nothing left, the reference and the id go

A leader that crashes anywhere in between leaves the id recorded: the next one deletes again (deletes are
idempotent) and then drops the reference. Storage is read and deleted only at the exact folder where the
job's driver writes the savepoint (storage from the spec, id from the status), and only while the folder's
manifest names this job's uid: the locations come from the driver and the status is the user's object too.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timedelta
from enum import StrEnum

from ftspark.domain.models import SavepointHistorySpec, SavepointRef, SavepointsSpec
from ftspark.domain.recovery import as_s3


class SavepointData(StrEnum):
    """What storage holds at the folder of a savepoint being disposed of."""

    OWN = "own"  # objects, with a manifest of this job: to be deleted
    GONE = "gone"  # nothing: the reference can go
    FOREIGN = "foreign"  # objects without this job's manifest: never deleted


def job_savepoint_id(what: str, uid: str, attempt: int) -> str:
    """sp-<what>-<uid8>-a<attempt>: the job's uid in it, so that neither another job on the same storage nor
    a re-created job of the same name ever names the same folder (each would overwrite, dispose of or
    restore the other's savepoint), and the attempt's number."""
    return f"sp-{what}-{uid[:8]}-a{attempt}"


def periodic_savepoint_id(requested_at: datetime, uid: str, attempt: int) -> str:
    """Unique: one periodic savepoint at a time, and an interval of at least a second between two."""
    return job_savepoint_id(f"periodic-{int(requested_at.timestamp())}", uid, attempt)


def periodic_due(policy: SavepointsSpec, last: datetime | None, started: datetime | None) -> datetime | None:
    """When the next periodic savepoint is due: an interval after the last one, or after the running attempt
    started when there was none; None when periodic savepoints are off (or nothing runs)."""
    basis = last or started
    if not policy.periodic_interval_seconds or basis is None:
        return None
    return basis + timedelta(seconds=policy.periodic_interval_seconds)


def to_dispose(
    savepoints: Sequence[SavepointRef],
    history: SavepointHistorySpec,
    now: datetime,
    *,
    disposing: Sequence[str],
    started_from: str | None,
) -> list[str]:
    """Ids of savepoints the history no longer keeps: beyond maxCount (the oldest first) or older than
    maxAgeSeconds. Never the newest, never the one the job was started from (started_from,
    spec.initialSavepoint), never one already disposing, and never one recorded without an origin: those
    were taken before the operator had a history, and an operator upgrade must delete nothing by itself."""
    # One entry per id, its newest: an id asked for twice (a nonce used again) names one folder.
    latest = {ref.id: ref for ref in savepoints if ref.id not in disposing and ref.origin is not None}
    kept = sorted(latest.values(), key=lambda ref: ref.time)
    beyond_count = len(kept) - history.max_count
    max_age = timedelta(seconds=history.max_age_seconds)
    chosen: list[str] = []
    for ref in kept[:-1]:  # never the newest
        if started_from is not None and same_location(ref.location, started_from):
            continue
        too_old = history.max_age_seconds > 0 and now - ref.time > max_age
        if len(chosen) < beyond_count or too_old:
            chosen.append(ref.id)
    return chosen


def own_folder(ref: SavepointRef, storage: str) -> str | None:
    """The folder the operator may dispose of for ref, <storage>/savepoints/<id>/ (s3://): only when ref's
    location is exactly where the job's driver writes savepoint ref.id; None otherwise (nothing deleted)."""
    if ref.id in ("", ".", "..") or "/" in ref.id:
        return None
    folder = f"{as_s3(storage).rstrip('/')}/savepoints/{ref.id}/"
    return folder if same_location(ref.location, folder) else None


def same_location(a: str, b: str) -> bool:
    return as_s3(a).rstrip("/") == as_s3(b).rstrip("/")


def manifest_job_uid(manifest: bytes) -> str | None:
    """The uid of the job whose driver wrote a savepoint manifest; None if it does not read as one (or was
    written before manifests carried it: such a savepoint is never disposed of)."""
    try:
        uid = json.loads(manifest).get("jobUid")
    except (ValueError, AttributeError):
        return None
    return uid if isinstance(uid, str) and uid else None
