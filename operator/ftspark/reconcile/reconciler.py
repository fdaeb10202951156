"""One reconcile of one job: observe (API server and stores, never a cache) → decide (pure) → act → record."""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from datetime import UTC, datetime

from pydantic import ValidationError

from ftspark.domain.fencing import Epoch
from ftspark.domain.ha import JobGraph, JobKey, JobResultEntry
from ftspark.domain.lifecycle import (
    Action,
    Decision,
    DeleteDriver,
    DriverPhase,
    EmitEvent,
    Observation,
    RecordResult,
    RequestSavepoint,
    RequestStop,
    SubmitAttempt,
    decide,
    invalid_spec,
    spec_hash,
)
from ftspark.domain.models import CheckpointRef, JobSpec, JobStatus
from ftspark.domain.recovery import NoUsableCheckpointError, choose_restore_point
from ftspark.manifests import AttemptPlan
from ftspark.metrics import JOBS
from ftspark.ports.checkpoints import CheckpointInspector
from ftspark.ports.cluster import Drivers, Events, JobResource, Jobs, ObjectRejectedError
from ftspark.ports.stores import CheckpointStore, JobGraphStore, ResultStore
from ftspark.protocol import driver_pod_name, spark_app_id

log = logging.getLogger(__name__)


def _now() -> datetime:
    return datetime.now(UTC)


def describe_validation_error(error: ValidationError) -> tuple[str, str]:
    """The first offending field as a dotted path (camelCase, as the user wrote it) and all messages."""
    problems = [(".".join(str(part) for part in e["loc"]), e["msg"]) for e in error.errors()]
    return problems[0][0], "; ".join(
        f"spec.{path}: {message}" if path else message for path, message in problems
    )


class Reconciler:
    def __init__(
        self,
        *,
        jobs: Jobs,
        drivers: Drivers,
        events: Events,
        graphs: JobGraphStore,
        checkpoints: CheckpointStore,
        results: ResultStore,
        inspector: CheckpointInspector,
        epoch: Callable[[], Epoch],
        clock: Callable[[], datetime] = _now,
        uniform: Callable[[], float] = random.random,
    ) -> None:
        self._jobs, self._drivers, self._events = jobs, drivers, events
        self._graphs, self._checkpoints, self._results = graphs, checkpoints, results
        self._inspector, self._epoch, self._clock, self._uniform = inspector, epoch, clock, uniform

    def reconcile(self, key: JobKey) -> float | None:
        """Returns when to look again (seconds), or None when only a change should wake this job."""
        job = self._jobs.get(key)
        if job is None:
            JOBS.record(key, None)
            self._forget(key)  # deleted: its pods go with it (ownerReferences), its HA data goes here
            return None
        now = self._clock()
        status = self._status(job)
        try:
            spec = JobSpec.model_validate(job.spec)
        except ValidationError as error:
            field, message = describe_validation_error(error)
            decision = invalid_spec(status, job.generation, field, message, now)
            for action in decision.actions:
                self._act(job, None, None, action)
            self._record(job, decision, None)
            return None
        graph = self._graphs.get(key)
        if graph is not None and graph.uid != job.uid:
            # Left by a deleted job of the same name (deleted while no leader watched): not this job's.
            self._forget(key)
            graph = None
        drivers = tuple(self._drivers.observe(key))
        running = [d for d in drivers if d.phase == DriverPhase.RUNNING and d.attempt == status.attempt]
        executor_nodes = (
            tuple(self._drivers.executor_nodes(key, spark_app_id(job.uid, status.attempt)))
            if spec.local_recovery.enabled and running
            else ()
        )
        observation = Observation(
            generation=job.generation,
            spec_hash=spec_hash(spec),
            submitted_spec_hash=graph.spec_hash if graph is not None and graph.uid == job.uid else None,
            drivers=drivers,
            result=self._results.get(job.uid),
            executor_nodes=executor_nodes,
        )
        decision = decide(spec, status, observation, now, self._uniform)
        try:
            for action in decision.actions:
                self._act(job, spec, graph, action)
        except ObjectRejectedError as error:
            # Like a spec that fails validation: Ready=False with the API server's words, no pods, no retry
            # until the spec changes.
            decision = invalid_spec(status, job.generation, "", str(error), now)
            for action in decision.actions:
                self._act(job, spec, graph, action)
        except NoUsableCheckpointError as error:
            decision = invalid_spec(status, job.generation, "", str(error), now)
            decision = Decision(
                decision.status.model_copy(update={"phase": "Failed"}),
                (EmitEvent("Warning", "ManualRestoreRequired", str(error)),),
            )
            for action in decision.actions:
                self._act(job, spec, graph, action)
        self._record(job, decision, key)
        return decision.requeue_after

    def finish_dirty_results(self) -> int:
        """A new leader completes cleanups a previous one left half done (FLIP-194); returns how many."""
        finished = 0
        for entry in self._results.entries():
            if not entry.clean:
                self._drivers.delete_all(entry.job, entry.uid)
                self._results.mark_clean(entry.uid, self._epoch())
                finished += 1
        return finished

    def forget_orphans(self) -> int:
        """Delete the HA data of jobs deleted while no leader watched; returns how many jobs."""
        orphans = [key for key in self._graphs.jobs() if self._jobs.get(key) is None]
        for key in orphans:
            self._forget(key)
        return len(orphans)

    def expire_results(self) -> int:
        """Delete clean results past their retention whose job resource is gone; returns how many."""
        now, expired = self._clock(), 0
        for entry in self._results.entries():
            if not entry.clean or not entry.retain_seconds:
                continue
            if (now - entry.finished_at).total_seconds() < entry.retain_seconds:
                continue
            job = self._jobs.get(entry.job)
            if job is None or job.uid != entry.uid:
                self._results.delete(entry.uid, self._epoch())
                expired += 1
        return expired

    # -- internals --

    def _status(self, job: JobResource) -> JobStatus:
        try:
            return JobStatus.model_validate(job.status)
        except ValidationError:
            log.warning("%s: unreadable status, starting from an empty one", job.key)
            return JobStatus()

    def _forget(self, key: JobKey) -> None:
        """Checkpoint pointers first, the job graph last: whatever is left still names its job's uid."""
        epoch = self._epoch()
        self._checkpoints.delete(key, epoch)
        self._graphs.delete(key, epoch)

    def _act(self, job: JobResource, spec: JobSpec | None, graph: JobGraph | None, action: Action) -> None:
        key = job.key
        match action:
            case SubmitAttempt():
                assert spec is not None, "an invalid spec is never submitted"
                self._submit(job, spec, graph, action)
            case DeleteDriver(pod_name=pod, force=force):
                self._drivers.delete(key, pod, force=force)
            case RequestStop(pod_name=pod, savepoint_id=savepoint_id):
                self._drivers.request_stop(key, pod, savepoint_id)
            case RequestSavepoint(pod_name=pod, savepoint_id=savepoint_id):
                self._drivers.request_savepoint(key, pod, savepoint_id)
            case RecordResult(state=state, message=message):
                entry = JobResultEntry(
                    job=key,
                    uid=job.uid,
                    state=state,
                    finished_at=self._clock(),
                    message=message,
                    retain_seconds=spec.result_store.ttl_seconds if spec else 0,
                )
                self._results.create_dirty(entry, self._epoch())
                self._drivers.delete_all(key, job.uid)
                self._results.mark_clean(job.uid, self._epoch())
            case EmitEvent(type=type_, reason=reason, message=message):
                self._events.emit(job, type_, reason, message)

    def _submit(self, job: JobResource, spec: JobSpec, graph: JobGraph | None, action: SubmitAttempt) -> None:
        key, epoch = job.key, self._epoch()
        reuse = graph is not None and graph.uid == job.uid and not action.fresh_checkpoints
        location = (
            graph.checkpoint_location
            if graph and reuse
            # A re-created job of the same name is a new job (new uid): it never resumes the old one's
            # state by accident; starting from old state is explicit (initialSavepoint).
            else f"{spec.checkpoint.storage.rstrip('/')}/checkpoints/{job.uid[:8]}-run-{action.attempt}"
        )
        restore_batch = None
        if action.restore_from == "latest-checkpoint" and reuse:
            point = choose_restore_point(self._checkpoints.pointers(key), self._inspector.committed)
            if point.skipped:
                self._events.emit(
                    job, "Warning", "CheckpointSkipped", f"unusable checkpoints {point.skipped}"
                )
            restore_batch = point.pointer.batch_id if point.pointer else None
        # The job graph is persisted before any pod exists (a new leader knows what was launched) ...
        self._graphs.put(
            JobGraph(
                job=key,
                uid=job.uid,
                generation=job.generation,
                spec_hash=spec_hash(spec),
                spec=spec,
                checkpoint_location=location,
                submitted_at=self._clock(),
            ),
            epoch,
        )
        # ... and drivers of earlier attempts are fenced out of the checkpoint store before this one starts.
        pod = driver_pod_name(key.name, action.attempt)
        self._checkpoints.advance_fence(key, Epoch("driver", action.attempt, pod), epoch)
        self._drivers.create(
            AttemptPlan(
                namespace=key.namespace,
                job_name=key.name,
                job_uid=job.uid,
                attempt=action.attempt,
                spec=spec,
                checkpoint_location=location,
                restore_from=action.restore_from
                if reuse or action.restore_from != "latest-checkpoint"
                else "nothing",
                restore_batch_id=restore_batch,
                local_state_nodes=action.local_state_nodes,
            )
        )

    def _record(self, job: JobResource, decision: Decision, key: JobKey | None) -> None:
        status = decision.status
        if key is not None:
            pointers = self._checkpoints.pointers(key)
            if pointers:
                newest = pointers[0]
                status = status.model_copy(
                    update={
                        "latest_checkpoint": CheckpointRef(
                            id=newest.checkpoint_id,
                            batch_id=newest.batch_id,
                            time=newest.completed_at,
                            location=newest.location,
                        )
                    }
                )
        JOBS.record(job.key, status)
        written = status.model_dump(mode="json", by_alias=True, exclude_none=True)
        if written != job.status:  # unchanged: no write, no watch event, no extra reconcile
            self._jobs.write_status(job, written)
