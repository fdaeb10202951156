"""Savepoints (docs/driver-runtime.md, "Savepoints"): a self-contained copy of each query's checkpoint at its
latest committed batch.

    <storage>/savepoints/<id>/<query>/...      the files batch n needs (CheckpointDir.files_for)
    <storage>/savepoints/<id>/_manifest.json   written last: {id, job, jobUid, createdAt, queries: {query:
                                               {batchId, source, files: {path: {size, sha256}}}}}

A folder that holds a manifest is never written again: a savepoint, once taken, is never overwritten (the
operator disposes of one only while its manifest names the job's uid).

Committed files are immutable until retention removes them (minBatchesToRetain, 100 by default), so a copy
of the latest committed batch needs no pause of the query. Restoring copies a query's files into its empty
checkpoint directory, verifying each checksum, `metadata` last (Spark's sign that a checkpoint exists), so
an interrupted restore is simply done again. The query names are the savepoint's keys: a job of another
name with the same script can start from it (a fork).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ftspark.protocol import SAVEPOINT_MANIFEST
from ftspark.runtime.checkpoint import CheckpointDir
from ftspark.runtime.objects import ObjectStore, StorageError, join

log = logging.getLogger(__name__)


class SavepointError(Exception):
    """The savepoint is missing, incomplete, or does not match its manifest."""


@dataclass(frozen=True)
class Savepoint:
    location: str
    batches: Mapping[str, int]  # query → batch id


def take(
    store: ObjectStore, savepoint_id: str, target: str, queries: Mapping[str, str], job: str, job_uid: str
) -> Savepoint:
    """Copy every query (name → checkpoint location) at its latest committed batch to target. One that fails
    midway deletes what it copied before it raises: the operator records a failed savepoint nowhere, so a half
    copy would stay on storage for good. A target that holds a savepoint already is refused, untouched."""
    if not queries:  # a savepoint of nothing would restore as an empty state
        raise SavepointError("no query of this attempt has started yet: nothing to save")
    if store.exists(join(target, SAVEPOINT_MANIFEST)):
        raise SavepointError(f"{target} holds a savepoint already: a savepoint is never overwritten")
    written: list[str] = []
    try:
        return _copy(store, savepoint_id, target, queries, {"job": job, "jobUid": job_uid}, written)
    except (SavepointError, StorageError):
        _remove(store, written)
        raise


def _copy(
    store: ObjectStore,
    savepoint_id: str,
    target: str,
    queries: Mapping[str, str],
    owner: Mapping[str, str],
    written: list[str],
) -> Savepoint:
    manifest: dict[str, Any] = {"id": savepoint_id, **owner, "queries": {}}
    for name, location in sorted(queries.items()):
        checkpoint = CheckpointDir(store, location)
        batch = checkpoint.latest_commit()
        if batch is None:
            raise SavepointError(f"query {name} has no committed batch yet")
        files = {}
        for path in checkpoint.files_for(batch):
            data = store.read(join(location, path))
            if data is None:
                raise SavepointError(f"{join(location, path)} vanished while copying")
            written.append(join(target, name, path))
            store.write(written[-1], data)
            files[path] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
        manifest["queries"][name] = {"batchId": batch, "source": location, "files": files}
    manifest["createdAt"] = datetime.now(UTC).isoformat()
    store.write(join(target, SAVEPOINT_MANIFEST), json.dumps(manifest, indent=1, sort_keys=True).encode())
    return Savepoint(target, {name: q["batchId"] for name, q in manifest["queries"].items()})


def _remove(store: ObjectStore, uris: list[str]) -> None:
    """Best effort: storage that just failed may fail again, and the savepoint's own error is what counts."""
    try:
        for uri in uris:
            store.delete(uri)
    except StorageError as error:
        log.warning("the failed savepoint's copy is left in part: %s", error)


def restore(store: ObjectStore, savepoint: str, name: str, location: str) -> int:
    """Fill the empty checkpoint directory location with query `name` of the savepoint; its batch id."""
    raw = store.read(join(savepoint, SAVEPOINT_MANIFEST))
    if raw is None:
        raise SavepointError(
            f"{savepoint} has no {SAVEPOINT_MANIFEST}: not a savepoint, or an incomplete one"
        )
    queries = json.loads(raw)["queries"]
    if name not in queries:
        raise SavepointError(f"{savepoint} has no query {name!r} (it has {sorted(queries)})")
    files: dict[str, dict[str, Any]] = queries[name]["files"]
    for path in sorted(files, key=lambda p: p == "metadata"):
        data = store.read(join(savepoint, name, path))
        if data is None or hashlib.sha256(data).hexdigest() != files[path]["sha256"]:
            raise SavepointError(f"{join(savepoint, name, path)} is missing or does not match the manifest")
        store.write(join(location, path), data)
    batch: int = queries[name]["batchId"]
    return batch
