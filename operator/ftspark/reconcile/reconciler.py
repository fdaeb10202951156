"""One reconcile of one job: observe (API server and stores, never a cache) → decide (pure) → act → record."""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import assert_never

from pydantic import ValidationError

from ftspark.domain.fencing import Epoch
from ftspark.domain.ha import CheckpointPointer, JobGraph, JobKey, JobResultEntry
from ftspark.domain.lifecycle import (
    CreateStandby,
    Decision,
    DeleteCheckpointDirectory,
    DeleteDriver,
    DeleteLeftoverExecutors,
    DiscardPreviousJob,
    DisposeSavepoint,
    DriverPhase,
    EmitEvent,
    Observation,
    PromoteStandby,
    RecordResult,
    ReleaseDriverLease,
    RequestSavepoint,
    RequestStop,
    SubmitAttempt,
    SubmittedGraph,
    decide,
    deferred,
    invalid_spec,
    job_data,
    rejected,
    spec_hash,
    standby_made_for,
)
from ftspark.domain.models import JobSpec, JobStatus
from ftspark.domain.policy import namespace_allowances, outside_storage, storage_prefixes, violations
from ftspark.domain.recovery import (
    RestorePoint,
    choose_restore_point,
    folder_of,
    is_checkpoint_directory,
    is_checkpoint_folder,
)
from ftspark.domain.rollback import effective_spec
from ftspark.domain.savepoints import SavepointData, manifest_job_uid, own_folder
from ftspark.manifests import AttemptPlan
from ftspark.metrics import JOBS, UNTRUSTED_POINTERS
from ftspark.ports.blobs import BlobStore
from ftspark.ports.checkpoints import CheckpointInspector
from ftspark.ports.cluster import (
    Drivers,
    Events,
    JobResource,
    Jobs,
    ObjectDeferredError,
    ObjectRejectedError,
)
from ftspark.ports.stores import (
    CheckpointStore,
    JobGraphStore,
    ResultStore,
    StoreUnavailableError,
    UntrustedRecordError,
)
from ftspark.protocol import (
    SAVEPOINT_MANIFEST,
    HaStoreConfig,
    RestoreFrom,
    driver_lease_holder,
    driver_pod_name,
    spark_app_id,
)
from ftspark.reconcile.pacing import Requeue

log = logging.getLogger(__name__)
CONFIGMAP_STORES = HaStoreConfig()
# The operator's caps on the result store (app/config.py makes them settings): no result is kept longer than
# this, whatever its job's ttlSeconds (0 included), and no namespace keeps more clean results than this.
MAX_RESULT_RETENTION_SECONDS = 30 * 24 * 3600
MAX_RESULTS_PER_NAMESPACE = 1000
# How long a watch event waits for a status write in flight to say which version it made (is_own_write):
# longer than the API client's request takes, beyond which the event simply wakes its job.
_STATUS_WRITE_SECONDS = 30.0


def _now() -> datetime:
    return datetime.now(UTC)


class _OwnStatusWrites:
    """The resourceVersion each job's last status write gave it, and the writes still in flight (their
    echo can overtake their answer), across the reconcile workers and the watch."""

    def __init__(self) -> None:
        self._written: dict[JobKey, str] = {}
        self._writing: set[JobKey] = set()
        self._changed = threading.Condition()

    def write(self, key: JobKey, write: Callable[[], str]) -> None:
        """Make the write (which returns the version it made), known as in flight until it answered."""
        with self._changed:
            self._writing.add(key)
        version = ""
        try:
            version = write()
        finally:
            with self._changed:
                self._writing.discard(key)
                if version:
                    self._written[key] = version
                self._changed.notify_all()

    def is_echo(self, key: JobKey, resource_version: str) -> bool:
        """Whether the version is the last write's, once (a write in flight is waited for first)."""
        with self._changed:
            self._changed.wait_for(lambda: key not in self._writing, timeout=_STATUS_WRITE_SECONDS)
            if resource_version and self._written.get(key) == resource_version:
                del self._written[key]
                return True
            return False

    def forget(self, key: JobKey) -> None:
        with self._changed:
            self._written.pop(key, None)


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
        storage: BlobStore,
        epoch: Callable[[], Epoch],
        allowed: frozenset[str] = frozenset(),
        storage_prefixes: tuple[str, ...] = (),
        clock: Callable[[], datetime] = _now,
        uniform: Callable[[], float] = random.random,
        ha_store: HaStoreConfig = CONFIGMAP_STORES,  # the installation's, which its drivers use too
        term_floor: str,
        own_namespace: str = "",
        max_result_retention_seconds: int = MAX_RESULT_RETENTION_SECONDS,
        max_results_per_namespace: int = MAX_RESULTS_PER_NAMESPACE,
    ) -> None:
        """storage: the jobs' storage (spec.checkpoint.storage), where savepoints are disposed of.
        allowed: the job policy's allowances granted in every namespace (ftspark.domain.policy).
        storage_prefixes: where jobs may keep their storage in every namespace (none: anywhere).
        term_floor: <namespace>/<name> of the operator's term floor ConfigMap, which its drivers read.
        own_namespace: the operator's, where it never runs a job."""
        self._jobs, self._drivers, self._events, self._allowed = jobs, drivers, events, allowed
        self._storage_prefixes = storage_prefixes
        self._graphs, self._checkpoints, self._results = graphs, checkpoints, results
        self._inspector, self._storage = inspector, storage
        self._epoch, self._clock, self._uniform = epoch, clock, uniform
        self._ha_store, self._term_floor, self._own_namespace = ha_store, term_floor, own_namespace
        self._max_retention, self._max_results = max_result_retention_seconds, max_results_per_namespace
        self._deleted: dict[JobKey, JobResource] = {}  # note_deleted -> reconcile, across threads
        self._deleted_lock = threading.Lock()
        self._status_writes = _OwnStatusWrites()

    def note_deleted(self, job: JobResource) -> None:
        """The watch saw the job deleted, in its last state: the API server's word for which uid, and so
        which data, went. Its reconcile records what is to be deleted of it later (_record_deletion). Kept in
        memory only: after a restart in between, the data is kept, the safe side."""
        with self._deleted_lock:
            self._deleted[job.key] = job

    def is_own_write(self, key: JobKey, resource_version: str) -> bool:
        """Whether the job at this version is exactly what this replica's last status write made of it: the
        watch event of that write (its echo) holds nothing the write was not decided on, so it need not wake
        the job (the decision's own requeue and the other objects' events do). One echo per write."""
        return self._status_writes.is_echo(key, resource_version)

    def reconcile(self, key: JobKey) -> Requeue:
        """When to look again (seconds), or None when only a change should wake this job."""
        with self._deleted_lock:
            deleted = self._deleted.pop(key, None)
        job = self._jobs.get(key)
        if job is None:
            self._status_writes.forget(key)
            JOBS.record(key, None)
            if deleted is not None:
                self._record_deletion(deleted)
            self._forget(key)  # deleted: its pods go with it (ownerReferences), its HA data goes here
            return Requeue(None)
        decision = self._decide_and_act(job, self._status(job), self._clock())
        wrote = self._record(job, decision)
        return Requeue(decision.requeue_after, decision.waiting and not wrote and not decision.actions)

    def finish_dirty_results(self) -> int:
        """Complete cleanups left half done (FLIP-194), by a previous leader or a failed delete; returns how
        many."""
        finished = 0
        for entry in self._results.entries():
            if entry.clean:
                continue
            try:
                self._drivers.delete_all(entry.job, entry.uid)
                self._results.mark_clean(entry.uid, self._epoch())
                finished += 1
            except Exception:
                # One job's refused delete must not keep the others' cleanups waiting.
                log.exception("%s: its cleanup failed; trying again at the next sweep", entry.job)
        return finished

    def forget_orphans(self) -> int:
        """Delete the HA data of jobs deleted while no leader watched; returns how many jobs."""
        forgotten = 0
        for key in self._graphs.jobs():
            try:
                if self._jobs.get(key) is None:
                    self._forget(key)
                    forgotten += 1
            except Exception:
                # Records sit where tenants write: one that cannot be forgotten must not keep the others.
                log.exception("%s: its HA data could not be deleted; trying again at the next sweep", key)
        return forgotten

    def expire_results(self) -> int:
        """Delete clean results past their retention (the job's ttlSeconds, at most the operator's maximum)
        and, in a namespace holding more than the cap, the oldest beyond it; returns how many. Never one
        whose job resource still exists with its uid: that result is what keeps a new leader from running a
        finished job again. A namespace whose results cannot be swept does not keep the others."""
        by_namespace: dict[str, list[JobResultEntry]] = {}
        for entry in self._results.entries():
            if entry.clean:  # a dirty one is finish_dirty_results' to complete first
                by_namespace.setdefault(entry.job.namespace, []).append(entry)
        expired = 0
        for namespace, entries in sorted(by_namespace.items()):
            try:
                expired += self._expire_in(sorted(entries, key=lambda e: e.finished_at))
            except Exception:
                log.exception("%s: its results could not be swept; trying again at the next sweep", namespace)
        return expired

    def _expire_in(self, oldest_first: list[JobResultEntry]) -> int:
        """One namespace's clean results, oldest first."""
        now, expired = self._clock(), 0
        beyond_cap = len(oldest_first) - self._max_results
        for entry in oldest_first:
            retention = min(entry.retain_seconds or self._max_retention, self._max_retention)
            past = (now - entry.finished_at).total_seconds() >= retention
            if not (past or expired < beyond_cap):
                continue
            job = self._jobs.get(entry.job)
            if job is None or job.uid != entry.uid:
                for prefix in entry.data:  # before the entry: a crash in between deletes again next time
                    if not is_checkpoint_folder(prefix, entry.uid):
                        # Sealed, so the operator's own words; yet only its own naming is ever deleted.
                        UNTRUSTED_POINTERS.labels(pointer="result-data").inc()
                        log.warning(
                            "result %s names %s, no checkpoint folder of its job; kept", entry.uid, prefix
                        )
                        continue
                    self._epoch()  # still leading (raises otherwise): a deposed leader deletes nothing
                    self._storage.delete_prefix(prefix)
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

    def _record_deletion(self, job: JobResource) -> None:
        """A job deleted before it ended: a clean Cancelled result carrying its data, deleted with the result
        once resultStore.ttlSeconds has passed (expire_results). One that ended has its result already."""
        try:
            if self._results.get(job.uid) is not None:
                return
        except UntrustedRecordError:
            pass  # not the operator's: the result written below replaces it
        try:
            spec = JobSpec.model_validate(job.spec)
        except ValidationError:
            return  # never valid, so never ran: nothing of it in storage
        data = job_data(spec, job.uid, self._status(job))
        if not data:
            return
        entry = JobResultEntry(
            job=job.key,
            uid=job.uid,
            state="Cancelled",
            finished_at=self._clock(),
            message="deleted before it ended",
            retain_seconds=spec.result_store.ttl_seconds,
            data=data,
        )
        self._results.create_dirty(entry, self._epoch())
        self._results.mark_clean(job.uid, self._epoch())

    def _forget(self, key: JobKey) -> None:
        """Checkpoint pointers first, the job graph last: whatever is left still names its job's uid."""
        epoch = self._epoch()
        self._checkpoints.delete(key, epoch)
        self._graphs.delete(key, epoch)

    def _decide_and_act(self, job: JobResource, status: JobStatus, now: datetime) -> Decision:
        if job.key.namespace == self._own_namespace:
            # Cluster-wide, the watch sees it too; a driver's Role here would reach the operator's Lease,
            # results and record key.
            message = (
                f"the operator's own namespace {self._own_namespace} runs no jobs (its Lease, results and "
                "record key live here): create the job in another namespace"
            )
            return self._carried_out(job, None, invalid_spec(status, job.generation, "", message, now))
        try:
            spec = JobSpec.model_validate(job.spec)
        except ValidationError as error:
            field, message = describe_validation_error(error)
            return self._carried_out(job, None, invalid_spec(status, job.generation, field, message, now))
        try:
            spec = effective_spec(spec, status, job.generation)  # the last stable one, after a rollback
        except ValidationError as error:
            field, message = describe_validation_error(error)
            message = f"the last stable spec does not read as a spec ({field}: {message}); change the spec"
            return self._carried_out(
                job, None, invalid_spec(status, job.generation, "status.lastStableSpec", message, now)
            )
        if refused := self._refused_by_policy(job, spec):
            message = "; ".join(refused)
            return self._carried_out(job, None, invalid_spec(status, job.generation, "", message, now))
        observation = self._observe(job, spec, status)
        decision = decide(spec, status, observation, now, self._uniform)
        try:
            return self._carried_out(job, spec, decision, first=observation.graph is None)
        except ObjectRejectedError as error:
            return self._carried_out(job, None, rejected(status, job.generation, str(error), now))
        except ObjectDeferredError as error:
            return self._carried_out(job, None, deferred(status, job.generation, str(error), now))

    def _refused_by_policy(self, job: JobResource, spec: JobSpec) -> list[str]:
        """Why the job policy refuses the spec, here or in the job's namespace."""
        refused = violations(spec, self._allowed)
        outside = outside_storage(spec, self._storage_prefixes)
        if not (refused or outside):  # most jobs need no allowance nor storage of their namespace: no read
            return []
        namespace = self._jobs.namespace_metadata(job.key.namespace)
        granted = namespace_allowances(namespace.labels)
        messages = [violation.message for violation in refused if violation.rule.allowance not in granted]
        if outside:
            prefixes = (*self._storage_prefixes, *storage_prefixes(namespace.annotations))
            if still_outside := outside_storage(spec, prefixes):
                messages.append(still_outside)
        return messages

    def _observe(self, job: JobResource, spec: JobSpec, status: JobStatus) -> Observation:
        """Everything `decide` needs, read from the API server and the stores (never from a cache)."""
        key = job.key
        stored = self._stored_graph(job)
        graph = SubmittedGraph(stored.uid, stored.spec_hash, stored.checkpoint_location) if stored else None
        own = stored if stored is not None and stored.uid == job.uid else None
        # Pods exist only of an attempt that was launched, and a launch writes the job graph before any pod:
        # a new job (no graph of its own, no attempt in its status) is spared the listings of its driver pods
        # and executors, which in a burst of new jobs each scan the whole namespace's pods. A pod that exists
        # all the same (a previous job's of the same name, not yet collected) is met at the create, which
        # takes it as made, and listed at the next look as it would have been at this one.
        launched = own is not None or status.attempt > 0
        drivers = tuple(self._drivers.observe(key)) if launched else ()
        current = [d for d in drivers if d.attempt == status.attempt and not d.standby]
        running = [d for d in current if d.phase == DriverPhase.RUNNING]
        # Where the attempt's executors run, looked at while its driver runs and once more when it failed:
        # their pods stay until the driver's is deleted, so a driver killed before a first look still leaves
        # the next attempt its placement.
        placed = running or [d for d in current if d.phase == DriverPhase.FAILED]
        executor_nodes = (
            tuple(self._drivers.executor_nodes(key, spark_app_id(job.uid, status.attempt)))
            if spec.local_recovery.enabled and placed
            else ()
        )
        pointers = self._checkpoints.pointers(key) if own else []
        # A result is recorded once the current attempt's driver has ended or was given up on, and the job's
        # pods are deleted right after it: while that driver runs, there is no result to find. (One whose
        # deletions failed is found once the driver is gone; a new leader finishes such cleanups first.)
        # The read a running job is spared is one of every five its checkpoints wake it for. A result is
        # only ever the outcome of a launched attempt, so a new job is spared it too.
        result = None if running or not launched else self._result(job)
        # A submission is decided only when no driver pod exists (a standby is no driver yet) and the job has
        # no result: only then is S3 inspected.
        can_submit = all(d.standby for d in drivers) and result is None
        restore_point = self._restore_point(job, spec, own, pointers) if can_submit else None
        return Observation(
            job_uid=job.uid,
            generation=job.generation,
            spec_hash=spec_hash(spec),
            graph=graph,
            drivers=drivers,
            result=result,
            executor_nodes=executor_nodes,
            latest_checkpoint=pointers[0] if pointers else None,
            restore_point=restore_point,
            leftover_executors=(
                self._drivers.count_executors(
                    key, job.uid, besides=self._apps(job, tuple(d.attempt for d in drivers if d.standby))
                )
                if can_submit and launched
                else 0
            ),
            disposing=self._disposing(job, spec, status),
            retired_present=self._retired_present(job, spec, status),
        )

    @staticmethod
    def _apps(job: JobResource, attempts: tuple[int, ...]) -> frozenset[str]:
        """The Spark application ids of those attempts of the job."""
        return frozenset(spark_app_id(job.uid, attempt) for attempt in attempts)

    def _retired_present(self, job: JobResource, spec: JobSpec, status: JobStatus) -> dict[str, bool]:
        """For each retired directory that is the job's: whether storage still holds anything in it."""
        found: dict[str, bool] = {}
        for directory in status.retired_checkpoint_directories:
            if not is_checkpoint_directory(directory, spec.checkpoint.storage, job.uid):
                continue
            try:
                found[directory] = self._storage.any_with_prefix(folder_of(directory))
            except StoreUnavailableError as error:
                log.warning(
                    "%s: checkpoint directory %s could not be looked at: %s", job.key, directory, error
                )
        return found

    def _disposing(self, job: JobResource, spec: JobSpec, status: JobStatus) -> dict[str, SavepointData]:
        """What storage holds of each savepoint being disposed of, read only at the job's own folder for it;
        one that cannot be read now is left out (the decision then waits for the next pass)."""
        found: dict[str, SavepointData] = {}
        for ref in status.savepoints:
            folder = own_folder(ref, spec.checkpoint.storage)
            if ref.id not in status.savepoints_disposing or folder is None:
                continue
            try:
                found[ref.id] = self._savepoint_data(job.uid, folder)
            except StoreUnavailableError as error:
                log.warning("%s: savepoint %s could not be looked at: %s", job.key, ref.id, error)
        return found

    def _savepoint_data(self, uid: str, folder: str) -> SavepointData:
        manifest = self._storage.get(folder + SAVEPOINT_MANIFEST)
        if manifest is not None:
            return SavepointData.OWN if manifest_job_uid(manifest) == uid else SavepointData.FOREIGN
        # No manifest: the savepoint's own deletion removes it last, so whatever is left is not of it.
        return SavepointData.FOREIGN if self._storage.any_with_prefix(folder) else SavepointData.GONE

    def _restore_point(
        self, job: JobResource, spec: JobSpec, graph: JobGraph | None, pointers: list[CheckpointPointer]
    ) -> RestorePoint:
        """Looks only inside a directory the operator chooses for this job: the job graph's, if it is one (the
        record is the tenant's to edit)."""
        directory = graph.checkpoint_location if graph else None
        if directory is not None and not is_checkpoint_directory(directory, spec.checkpoint.storage, job.uid):
            log.warning(
                "%s: the job graph's checkpoint directory %s was not chosen for it", job.key, directory
            )
            directory = None
        point = choose_restore_point(pointers, self._inspector.committed, directory)
        if point.outside:
            UNTRUSTED_POINTERS.labels(pointer="checkpoint").inc(len(point.outside))
            log.warning("%s: %s", job.key, point.why_skipped)
        return point

    def _result(self, job: JobResource) -> JobResultEntry | None:
        """The job's result; one the operator did not write counts as none (it would end the job for good)."""
        try:
            return self._results.get(job.uid)
        except UntrustedRecordError as error:
            log.warning("%s: %s", job.key, error)
            self._events.emit(job, "Warning", "UntrustedJobResult", f"{error}; ignored")
            return None

    def _stored_graph(self, job: JobResource) -> JobGraph | None:
        """The job graph; one whose record points at what the operator did not write counts as none (the
        job then starts without state, StateNotFound), and the next submission replaces it."""
        try:
            return self._graphs.get(job.key)
        except UntrustedRecordError as error:
            log.warning("%s: %s", job.key, error)
            self._events.emit(
                job, "Warning", "UntrustedJobGraph", f"{error}; ignored, nothing it names is deleted"
            )
            return None

    def _carried_out(
        self, job: JobResource, spec: JobSpec | None, decision: Decision, *, first: bool = False
    ) -> Decision:
        """Acts in order; spec is None only for the decisions that submit nothing (an invalid or refused
        spec). first: no HA record of the job was found (a new job), so a launch creates them unread."""
        key = job.key
        for action in decision.actions:
            match action:
                case DiscardPreviousJob():
                    self._forget(key)
                case SubmitAttempt() | CreateStandby() | PromoteStandby():
                    assert spec is not None, "an invalid spec is never submitted"
                    self._start(job, spec, action, first)
                case ReleaseDriverLease():
                    self._release_lease(key, action)
                case DeleteDriver(pod_name=pod, force=force):
                    self._drivers.delete(key, pod, force=force)
                case DeleteLeftoverExecutors(standby_attempts=kept):
                    self._drivers.delete_executors(key, job.uid, besides=self._apps(job, kept))
                case RequestStop() | RequestSavepoint():
                    self._request(key, action)
                case DisposeSavepoint():
                    self._dispose(job, action)
                case DeleteCheckpointDirectory(prefix=prefix):
                    self._delete_directory(job, prefix)
                case RecordResult():
                    self._record_result(job, action)
                case EmitEvent(type=type_, reason=reason, message=message):
                    self._events.emit(job, type_, reason, message)
                case _:
                    assert_never(action)
        return decision

    def _release_lease(self, key: JobKey, action: ReleaseDriverLease) -> None:
        if self._drivers.release_lease(key, driver_lease_holder(action.pod_name, action.attempt)):
            log.info("%s: released the driver lease of %s, which ended", key, action.pod_name)

    def _request(self, key: JobKey, action: RequestStop | RequestSavepoint) -> None:
        # The leader's term goes with the request (and is re-checked right before it is written): the driver
        # refuses one from a deposed leader.
        term = self._epoch().term
        match action:
            case RequestStop(pod_name=pod, savepoint_id=savepoint_id):
                self._drivers.request_stop(key, pod, term, savepoint_id)
            case RequestSavepoint(pod_name=pod, savepoint_id=savepoint_id):
                self._drivers.request_savepoint(key, pod, term, savepoint_id)

    def _start(
        self,
        job: JobResource,
        spec: JobSpec,
        action: SubmitAttempt | CreateStandby | PromoteStandby,
        first: bool,
    ) -> None:
        match action:
            case SubmitAttempt():
                self._submit(job, spec, action, first)
            case CreateStandby():
                self._create_standby(job, spec, action)
            case PromoteStandby():
                self._promote(job, spec, action)
            case _:
                assert_never(action)

    def _submit(self, job: JobResource, spec: JobSpec, action: SubmitAttempt, first: bool) -> None:
        self._launch(job, spec, action.attempt, action.checkpoint_location, first=first)
        self._drivers.create(
            self._plan(
                job,
                spec,
                action.attempt,
                action.checkpoint_location,
                restore_from=action.restore_from,
                restore_batch_id=action.restore_batch_id,
                local_state_nodes=action.local_state_nodes,
            )
        )

    def _create_standby(self, job: JobResource, spec: JobSpec, action: CreateStandby) -> None:
        """Neither a job graph nor a fence: a standby writes nothing before its promotion (_promote)."""
        self._epoch()  # still leading (raises otherwise)
        plan = self._plan(
            job,
            spec,
            action.attempt,
            action.checkpoint_location,
            restore_from="latest-checkpoint",
            local_state_nodes=action.local_state_nodes,
            standby=True,
        )
        self._drivers.create(plan)

    def _promote(self, job: JobResource, spec: JobSpec, action: PromoteStandby) -> None:
        """What a submission does before its pod, then the promotion request instead of a pod: the standby
        takes over only once earlier drivers are fenced out."""
        self._launch(job, spec, action.attempt, action.checkpoint_location)
        term = self._epoch().term  # the driver refuses a request of a deposed leader's term
        self._drivers.promote(job.key, action.pod_name, term, action.restore_batch_id)

    def _launch(
        self, job: JobResource, spec: JobSpec, attempt: int, checkpoint_location: str, *, first: bool = False
    ) -> None:
        key, epoch = job.key, self._epoch()
        # The job graph is persisted before any pod runs the attempt (a new leader knows what it launched) ...
        self._graphs.put(
            JobGraph(
                job=key,
                uid=job.uid,
                generation=job.generation,
                spec_hash=spec_hash(spec),
                spec=spec,
                checkpoint_location=checkpoint_location,
                submitted_at=self._clock(),
            ),
            epoch,
            new=first,
        )
        # ... and drivers of earlier attempts are fenced out of the checkpoint store before this one starts.
        pod = driver_pod_name(key.name, attempt)
        self._checkpoints.advance_fence(key, Epoch("driver", attempt, pod), epoch, new=first)

    def _plan(
        self,
        job: JobResource,
        spec: JobSpec,
        attempt: int,
        checkpoint_location: str,
        *,
        restore_from: RestoreFrom,
        restore_batch_id: int | None = None,
        local_state_nodes: tuple[str, ...] = (),
        standby: bool = False,
    ) -> AttemptPlan:
        return AttemptPlan(
            namespace=job.key.namespace,
            job_name=job.key.name,
            job_uid=job.uid,
            attempt=attempt,
            spec=spec,
            checkpoint_location=checkpoint_location,
            restore_from=restore_from,
            restore_batch_id=restore_batch_id,
            local_state_nodes=local_state_nodes,
            ha_store=self._ha_store,
            term_floor=self._term_floor,
            standby=standby,
            spec_hash=standby_made_for(spec, spec_hash(spec)) if standby else spec_hash(spec),
        )

    def _dispose(self, job: JobResource, action: DisposeSavepoint) -> None:
        """A delete storage refuses must not hold up the rest of the job's decision: the reference stays
        until a later pass sees the data gone, so the next pass simply tries again."""
        self._epoch()  # still leading (raises otherwise): a deposed leader deletes nothing
        try:
            self._storage.delete_prefix(action.prefix, last=action.prefix + SAVEPOINT_MANIFEST)
        except StoreUnavailableError as error:
            log.warning("%s: savepoint %s not disposed of yet: %s", job.key, action.savepoint_id, error)
            message = f"savepoint {action.savepoint_id} not disposed of yet (tried again): {error}"
            self._events.emit(job, "Warning", "SavepointDisposalFailed", message)

    def _delete_directory(self, job: JobResource, prefix: str) -> None:
        """Like a disposal: a delete storage refuses is tried again at the next look, the rest goes on."""
        self._epoch()  # still leading (raises otherwise): a deposed leader deletes nothing
        try:
            self._storage.delete_prefix(prefix)
        except StoreUnavailableError as error:
            log.warning("%s: checkpoint directory %s not deleted yet: %s", job.key, prefix, error)

    def _record_result(self, job: JobResource, action: RecordResult) -> None:
        entry = JobResultEntry(
            job=job.key,
            uid=job.uid,
            state=action.state,
            finished_at=action.finished_at,
            message=action.message,
            retain_seconds=action.retain_seconds,
            data=action.data,
        )
        self._results.create_dirty(entry, self._epoch())
        self._drivers.delete_all(job.key, job.uid)
        self._results.mark_clean(job.uid, self._epoch())

    def _record(self, job: JobResource, decision: Decision) -> bool:
        """Whether the status changed (and was written)."""
        JOBS.record(job.key, decision.status)
        written = decision.status.model_dump(mode="json", by_alias=True, exclude_none=True)
        if written == job.status:  # unchanged: no write, no watch event, no extra reconcile
            return False
        self._epoch()  # still leading (raises otherwise): the status is the operator's word
        self._status_writes.write(job.key, lambda: self._jobs.write_status(job, written))
        return True
