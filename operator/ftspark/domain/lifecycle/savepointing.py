"""Savepoints of a running job (docs/driver-runtime.md, "Savepoints"): one request at a time (a new
savepointTriggerNonce first, else a periodic one when due), the answers recorded, and the history disposed
of in two phases (the choice in the status, then the deletes)."""

from __future__ import annotations

from datetime import datetime

from ftspark.domain.lifecycle.actions import DisposeSavepoint, EmitEvent, RequestSavepoint
from ftspark.domain.lifecycle.delays import DISPOSAL_RECHECK, SOON
from ftspark.domain.lifecycle.draft import Draft
from ftspark.domain.lifecycle.observation import DriverObservation, SavepointReport
from ftspark.domain.models import SavepointOrigin, SavepointRef, SavepointRequest
from ftspark.domain.savepoints import (
    SavepointData,
    job_savepoint_id,
    own_folder,
    periodic_due,
    periodic_savepoint_id,
    to_dispose,
)


def record_on_stop(
    draft: Draft, stopped: DriverObservation, savepoint_id: str, origin: SavepointOrigin
) -> bool:
    """Once: the savepoint a driver stopped with answered (or its error, an Event); whether the status
    gained a savepoint."""
    report = stopped.savepoint
    if report is None or report.id != savepoint_id:
        return False
    if report.id in {taken.id for taken in draft.status.savepoints}:
        return False
    _record(draft, report, origin)
    return not report.error


def tend(draft: Draft, driver: DriverObservation) -> None:
    """One savepoint at a time: a new savepointTriggerNonce first, else a periodic one when due; record
    the answer, give up after stopTimeout."""
    pending, report = draft.status.savepoint_in_progress, driver.savepoint
    if pending is not None:
        if report is not None and report.id == pending.id:
            _close_request(draft, pending)
            _record(draft, report, pending.origin, pending.trigger_nonce)
        elif (draft.now - pending.requested_at).total_seconds() >= draft.spec.stop_timeout_seconds:
            message = f"savepoint {pending.id}: no answer within {draft.spec.stop_timeout_seconds} s"
            draft.actions.append(EmitEvent("Warning", "SavepointFailed", message))
            _close_request(draft, pending)
        elif driver.request_refused:  # asked by a leader deposed since: ask again, with this term
            draft.actions.append(RequestSavepoint(driver.pod_name, driver.attempt, pending.id))
        return
    nonce = draft.spec.savepoint_trigger_nonce
    if nonce is not None and nonce != draft.status.handled_savepoint_nonce:
        requested = job_savepoint_id(str(nonce), draft.obs.job_uid, driver.attempt)
        # A nonce used before names a folder that may be being deleted: ask once that is done.
        if requested not in draft.status.savepoints_disposing:
            _request(draft, driver, requested, nonce)
        return
    due = periodic_due_at(draft)
    if due is not None and draft.now >= due:
        _request(draft, driver, periodic_savepoint_id(draft.now, draft.obs.job_uid, driver.attempt), None)
        draft.update(last_periodic_savepoint_at=draft.now)


def periodic_due_at(draft: Draft) -> datetime | None:
    """None while disposals are under way: periodic savepoints wait for them, so the history stays
    bounded even while storage refuses deletes."""
    if draft.status.savepoints_disposing:
        return None
    return periodic_due(
        draft.spec.savepoints, draft.status.last_periodic_savepoint_at, draft.status.attempt_started_at
    )


def _request(draft: Draft, driver: DriverObservation, savepoint_id: str, nonce: int | None) -> None:
    draft.actions.append(RequestSavepoint(driver.pod_name, driver.attempt, savepoint_id))
    request = SavepointRequest(id=savepoint_id, trigger_nonce=nonce, requested_at=draft.now)
    draft.update(savepoint_in_progress=request)


def _close_request(draft: Draft, pending: SavepointRequest) -> None:
    """Answered or given up: a nonce is handled either way (never asked again)."""
    nonce = pending.trigger_nonce
    handled = draft.status.handled_savepoint_nonce if nonce is None else nonce
    draft.update(savepoint_in_progress=None, handled_savepoint_nonce=handled)


def _record(
    draft: Draft, report: SavepointReport, origin: SavepointOrigin, trigger_nonce: int | None = None
) -> None:
    if report.error:
        draft.actions.append(
            EmitEvent("Warning", "SavepointFailed", f"savepoint {report.id}: {report.error}")
        )
        return
    taken = SavepointRef(
        id=report.id,
        time=draft.now,
        location=report.location,
        batch_id=report.batch_id,
        trigger_nonce=trigger_nonce,
        origin=origin,
    )
    draft.update(savepoints=[*draft.status.savepoints, taken])
    draft.actions.append(
        EmitEvent("Normal", "SavepointCompleted", f"savepoint {report.id} at {report.location}")
    )


def choose_disposals(draft: Draft) -> None:
    """Phase 1 of a disposal (domain.savepoints): only the choice, in the status; nothing is deleted."""
    chosen = to_dispose(
        draft.status.savepoints,
        draft.spec.savepoints.history,
        draft.now,
        disposing=draft.status.savepoints_disposing,
        started_from=draft.spec.initial_savepoint,
    )
    if not chosen:
        return
    history = draft.spec.savepoints.history
    draft.update(savepoints_disposing=[*draft.status.savepoints_disposing, *chosen])
    message = (
        f"disposing of {', '.join(chosen)} (history: maxCount {history.max_count}, "
        f"maxAgeSeconds {history.max_age_seconds})"
    )
    draft.actions.append(EmitEvent("Normal", "SavepointDisposing", message))


def finish_disposals(draft: Draft) -> float | None:
    """Phase 2 of a disposal, in any phase of the job: delete what storage still holds of each savepoint
    an earlier pass chose; drop the reference once nothing is left. Seconds until the disposals need the
    next look (None: they need none). This pass's status write wakes nothing (it is our own), so a
    choice made in this pass asks for the pass that deletes, and the end of the last disposal for the
    periodic savepoint that waited for it (periodic_due_at)."""
    storage = draft.spec.checkpoint.storage
    refs = {ref.id: ref for ref in draft.status.savepoints}
    finished: set[str] = set()
    for savepoint_id in draft.disposing:
        ref = refs.get(savepoint_id)
        folder = own_folder(ref, storage) if ref is not None else None
        if ref is None:
            finished.add(savepoint_id)  # its reference was removed by hand: nothing to go by
        elif folder is None:
            _kept(draft, ref, f"is not where the job keeps savepoint {ref.id}")
            finished.add(savepoint_id)
        else:
            match draft.obs.disposing.get(savepoint_id):
                case SavepointData.OWN:
                    draft.actions.append(DisposeSavepoint(savepoint_id, folder))
                case SavepointData.GONE:
                    message = f"savepoint {savepoint_id} at {ref.location} disposed of"
                    draft.actions.append(EmitEvent("Normal", "SavepointDisposed", message))
                    finished.add(savepoint_id)
                case SavepointData.FOREIGN:
                    _kept(draft, ref, "holds no manifest of this job")
                    finished.add(savepoint_id)
                case None:
                    pass  # not read: storage was unreachable
    if finished:
        draft.update(
            savepoints=[ref for ref in draft.status.savepoints if ref.id not in finished],
            savepoints_disposing=[i for i in draft.status.savepoints_disposing if i not in finished],
        )
    if set(draft.status.savepoints_disposing) - set(draft.disposing):
        return SOON
    if len(finished) < len(draft.disposing):
        return DISPOSAL_RECHECK
    if finished and draft.status.phase == "Running" and (due := periodic_due_at(draft)) is not None:
        return max(SOON, (due - draft.now).total_seconds())
    return None


def _kept(draft: Draft, ref: SavepointRef, why: str) -> None:
    message = f"savepoint {ref.id}: {ref.location} {why}; its reference is dropped, its data left alone"
    draft.actions.append(EmitEvent("Warning", "SavepointNotDisposed", message))
