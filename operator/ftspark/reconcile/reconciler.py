"""One reconcile of one job: observe (API server and stores, never a cache) → decide (pure) → act → record.

The Reconciler owns the record step and the checks before a decision (a spec that reads, the job policy);
observing, acting and the result store's housekeeping are its parts: `observer`, `actuator`, `sweeper`."""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable
from datetime import UTC, datetime

from pydantic import ValidationError

from ftspark.domain.fencing import Epoch
from ftspark.domain.ha import JobKey, JobResultEntry
from ftspark.domain.lifecycle import (
    Decision,
    decide,
    deferred,
    invalid_spec,
    job_data,
    reconcile_failed,
    reconciled,
    rejected,
)
from ftspark.domain.models import JobSpec, JobStatus
from ftspark.domain.policy import namespace_allowances, outside_storage, storage_prefixes, violations
from ftspark.domain.rollback import effective_spec
from ftspark.metrics import JOBS, observe_recovery
from ftspark.ports.cluster import JobResource, ObjectDeferredError, ObjectRejectedError
from ftspark.ports.stores import UntrustedRecordError
from ftspark.reconcile.actuator import Actuator
from ftspark.reconcile.observer import Observer
from ftspark.reconcile.pacing import Requeue
from ftspark.reconcile.settings import DriverSettings, JobDefaults, JobPolicy, Ports, ResultLimits
from ftspark.reconcile.sweeper import ResultSweeper

log = logging.getLogger(__name__)
NO_POLICY, DEFAULT_LIMITS, NO_DEFAULTS = JobPolicy(), ResultLimits(), JobDefaults()
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
        ports: Ports,
        epoch: Callable[[], Epoch],
        drivers_told: DriverSettings,
        *,
        policy: JobPolicy = NO_POLICY,
        limits: ResultLimits = DEFAULT_LIMITS,
        defaults: JobDefaults = NO_DEFAULTS,
        clock: Callable[[], datetime] = _now,
        uniform: Callable[[], float] = random.random,
    ) -> None:
        """epoch: the leader's (raises once it no longer leads); every write is fenced with it."""
        self._jobs, self._policy, self._defaults = ports.jobs, policy, defaults
        self._results, self._epoch, self._clock, self._uniform = ports.stores.results, epoch, clock, uniform
        self.observer = Observer(ports)
        self.actuator = Actuator(ports, epoch, clock, drivers_told)
        self.sweeper = ResultSweeper(ports, epoch, clock, self.actuator.forget, limits)
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
            self.actuator.forget(key)  # deleted: its pods go with it (ownerReferences), its HA data goes here
            return Requeue(None)
        decision = reconciled(self._decide_and_act(job, self._status(job), self._clock()))
        if decision.deletes_the_job:
            return Requeue(None)  # nothing to record on: its watch event (gone, or changed) wakes it again
        wrote = self._record(job, decision)
        return Requeue(decision.requeue_after, decision.waiting and not wrote and not decision.actions)

    def report_failure(self, key: JobKey, message: str) -> None:
        """Reconciles of the job keep failing (message: why, in words for its user): its status and an
        Event say so, until one goes through."""
        job = self._jobs.get(key)
        if job is None:
            return
        decision = reconcile_failed(self._status(job), job.generation, message, self._clock())
        self._record(job, self.actuator.carry_out(job, None, decision))

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

    def _decide_and_act(self, job: JobResource, status: JobStatus, now: datetime) -> Decision:
        if job.key.namespace == self._policy.own_namespace:
            # Cluster-wide, the watch sees it too; a driver's Role here would reach the operator's Lease,
            # results and record key.
            message = (
                f"the operator's own namespace {job.key.namespace} runs no jobs (its Lease, results and "
                "record key live here): create the job in another namespace"
            )
            return self.actuator.carry_out(job, None, invalid_spec(status, job.generation, "", message, now))
        try:
            spec = JobSpec.model_validate(job.spec)
        except ValidationError as error:
            field, message = describe_validation_error(error)
            return self.actuator.carry_out(
                job, None, invalid_spec(status, job.generation, field, message, now)
            )
        try:
            spec = effective_spec(spec, status, job.generation)  # the last stable one, after a rollback
        except ValidationError as error:
            field, message = describe_validation_error(error)
            message = f"the last stable spec does not read as a spec ({field}: {message}); change the spec"
            return self.actuator.carry_out(
                job, None, invalid_spec(status, job.generation, "status.lastStableSpec", message, now)
            )
        spec = self._defaults.applied_to(spec)
        if refused := self._refused_by_policy(job, spec):
            message = "; ".join(refused)
            return self.actuator.carry_out(job, None, invalid_spec(status, job.generation, "", message, now))
        observation = self.observer.observe(job, spec, status)
        decision = decide(spec, status, observation, now, self._uniform)
        try:
            return self.actuator.carry_out(job, spec, decision)
        except ObjectRejectedError as error:
            return self.actuator.carry_out(job, None, rejected(status, job.generation, str(error), now))
        except ObjectDeferredError as error:
            return self.actuator.carry_out(job, None, deferred(status, job.generation, str(error), now))

    def _refused_by_policy(self, job: JobResource, spec: JobSpec) -> list[str]:
        """Why the job policy refuses the spec, here or in the job's namespace."""
        refused = violations(spec, self._policy.allowed)
        outside = outside_storage(spec, self._policy.storage_prefixes)
        if not (refused or outside):  # most jobs need no allowance nor storage of their namespace: no read
            return []
        namespace = self._jobs.namespace_metadata(job.key.namespace)
        granted = namespace_allowances(namespace.labels)
        messages = [violation.message for violation in refused if violation.rule.allowance not in granted]
        if outside:
            prefixes = (*self._policy.storage_prefixes, *storage_prefixes(namespace.annotations))
            if still_outside := outside_storage(spec, prefixes):
                messages.append(still_outside)
        return messages

    def _record(self, job: JobResource, decision: Decision) -> bool:
        """Whether the status changed (and was written)."""
        JOBS.record(job.key, decision.status)
        written = decision.status.model_dump(mode="json", by_alias=True, exclude_none=True)
        if written == job.status:  # unchanged: no write, no watch event, no extra reconcile
            return False
        self._epoch()  # still leading (raises otherwise): the status is the operator's word
        self._status_writes.write(job.key, lambda: self._jobs.write_status(job, written))
        observe_recovery(self._status(job).last_failure, decision.status.last_failure)
        return True
