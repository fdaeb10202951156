"""The act step: a Decision's actions carried out in order, each through its port, every write fenced by the
leader's epoch (a deposed leader's raises before it writes)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import assert_never

from ftspark.domain.fencing import Epoch
from ftspark.domain.ha import JobGraph, JobKey, JobResultEntry
from ftspark.domain.lifecycle import (
    CreateStandby,
    Decision,
    DeleteCheckpointDirectory,
    DeleteDriver,
    DeleteFinishedJob,
    DeleteLeftoverExecutors,
    DiscardPreviousJob,
    DisposeSavepoint,
    EmitEvent,
    KeepDriverLog,
    PromoteStandby,
    RecordResult,
    ReleaseDriverLease,
    RequestSavepoint,
    RequestStop,
    SubmitAttempt,
    spec_hash,
    standby_made_for,
)
from ftspark.domain.models import JobSpec
from ftspark.manifests import AttemptPlan
from ftspark.ports.cluster import DriverLogNotKeptError, JobResource
from ftspark.ports.stores import StoreUnavailableError
from ftspark.protocol import (
    SAVEPOINT_MANIFEST,
    RestoreFrom,
    driver_lease_holder,
    driver_pod_name,
)
from ftspark.reconcile.observer import spark_apps
from ftspark.reconcile.settings import DriverSettings, Ports

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Launch:
    """What an attempt launches: the job, the spec it runs, and that spec's hash (computed once)."""

    job: JobResource
    spec: JobSpec
    spec_hash: str


class Actuator:
    def __init__(
        self,
        ports: Ports,
        epoch: Callable[[], Epoch],
        clock: Callable[[], datetime],
        drivers_told: DriverSettings,
    ) -> None:
        self._jobs, self._drivers, self._events, self._logs, self._nodes = (
            ports.jobs,
            ports.drivers,
            ports.events,
            ports.logs,
            ports.nodes,
        )
        stores = ports.stores
        self._graphs, self._checkpoints, self._results = stores.job_graphs, stores.checkpoints, stores.results
        self._storage, self._epoch, self._clock = ports.storage, epoch, clock
        self._ha_store, self._term_floor = drivers_told.ha_store, drivers_told.term_floor

    def carry_out(self, job: JobResource, spec: JobSpec | None, decision: Decision) -> Decision:
        """Acts in order; spec is None only for the decisions that submit nothing (an invalid or refused
        spec)."""
        key = job.key
        for action in decision.actions:
            match action:
                case DiscardPreviousJob():
                    self.forget(key)
                case SubmitAttempt() | CreateStandby() | PromoteStandby():
                    assert spec is not None, "an invalid spec is never submitted"
                    self._start(job, spec, action)
                case ReleaseDriverLease() | KeepDriverLog() | DeleteDriver():
                    self._retire(job, action)
                case DeleteLeftoverExecutors(standby_attempts=kept):
                    self._drivers.delete_executors(
                        key, job.uid, besides=spark_apps(job, kept), unheard=self._nodes.silent
                    )
                case RequestStop() | RequestSavepoint():
                    self._request(key, action)
                case DisposeSavepoint():
                    self._dispose(job, action)
                case DeleteCheckpointDirectory(prefix=prefix):
                    self._delete_directory(job, prefix)
                case RecordResult():
                    self._record_result(job, action)
                case DeleteFinishedJob():
                    self._epoch()  # still leading (raises otherwise)
                    self._jobs.delete_unchanged(job)
                case EmitEvent(type=type_, reason=reason, message=message):
                    self._events.emit(job, type_, reason, message)
                case _:
                    assert_never(action)
        return decision

    def _retire(self, job: JobResource, action: ReleaseDriverLease | KeepDriverLog | DeleteDriver) -> None:
        """What goes with a driver that ended or is not wanted: its Lease, its log kept, its pod."""
        key = job.key
        match action:
            case ReleaseDriverLease(pod_name=pod, attempt=attempt):
                if self._drivers.release_lease(key, job.uid, driver_lease_holder(pod, attempt)):
                    log.info("%s: released the driver lease of %s, which ended", key, pod)
            case KeepDriverLog(pod_name=pod, attempt=attempt, kept=kept):
                try:
                    self._logs.keep(job, pod, attempt, kept)
                except DriverLogNotKeptError as error:  # never holds up the deletion; the user is told
                    self._events.emit(job, "Warning", "DriverLogNotKept", str(error))
            case DeleteDriver(pod_name=pod, force=force):
                self._drivers.delete(key, pod, force=force)

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
    ) -> None:
        launch = _Launch(job, spec, spec_hash(spec))
        match action:
            case SubmitAttempt():
                self._submit(launch, action)
            case CreateStandby():
                self._create_standby(launch, action)
            case PromoteStandby():
                self._promote(launch, action)
            case _:
                assert_never(action)

    def _submit(self, launch: _Launch, action: SubmitAttempt) -> None:
        self._launch(launch, action.attempt, action.checkpoint_location, new=action.new_records)
        self._drivers.create(
            self._plan(
                launch,
                action.attempt,
                action.checkpoint_location,
                restore_from=action.restore_from,
                restore_batch_id=action.restore_batch_id,
                local_state_nodes=action.local_state_nodes,
            )
        )

    def _create_standby(self, launch: _Launch, action: CreateStandby) -> None:
        """Neither a job graph nor a fence: a standby writes nothing before its promotion (_promote)."""
        self._epoch()  # still leading (raises otherwise)
        plan = self._plan(
            launch,
            action.attempt,
            action.checkpoint_location,
            restore_from="latest-checkpoint",
            local_state_nodes=action.local_state_nodes,
            warm_executors=action.warm_executors,
        )
        self._drivers.create(plan)

    def _promote(self, launch: _Launch, action: PromoteStandby) -> None:
        """What a submission does before its pod, then the promotion request instead of a pod: the standby
        takes over only once earlier drivers are fenced out."""
        self._launch(launch, action.attempt, action.checkpoint_location)
        term = self._epoch().term  # the driver refuses a request of a deposed leader's term
        self._drivers.promote(launch.job.key, action.pod_name, term, action.restore_batch_id)

    def _launch(self, launch: _Launch, attempt: int, checkpoint_location: str, *, new: bool = False) -> None:
        job, key, epoch = launch.job, launch.job.key, self._epoch()
        # The job graph is persisted before any pod runs the attempt (a new leader knows what it launched) ...
        self._graphs.put(
            JobGraph(
                job=key,
                uid=job.uid,
                generation=job.generation,
                spec_hash=launch.spec_hash,
                spec=launch.spec,
                checkpoint_location=checkpoint_location,
                submitted_at=self._clock(),
            ),
            epoch,
            new=new,
        )
        # ... and drivers of earlier attempts are fenced out of the checkpoint store before this one starts.
        pod = driver_pod_name(key.name, attempt)
        self._checkpoints.advance_fence(key, Epoch("driver", attempt, pod), epoch, new=new)

    def _plan(
        self,
        launch: _Launch,
        attempt: int,
        checkpoint_location: str,
        *,
        restore_from: RestoreFrom,
        restore_batch_id: int | None = None,
        local_state_nodes: tuple[str, ...] = (),
        warm_executors: int | None = None,
    ) -> AttemptPlan:
        """warm_executors: a standby's (None: not a standby)."""
        job, spec = launch.job, launch.spec
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
            standby=warm_executors is not None,
            standby_executors=warm_executors or 0,
            spec_hash=(
                launch.spec_hash
                if warm_executors is None
                else standby_made_for(launch.spec_hash, warm_executors)
            ),
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

    def forget(self, key: JobKey) -> None:
        """Checkpoint pointers first, the job graph last: whatever is left still names its job's uid."""
        epoch = self._epoch()
        self._checkpoints.delete(key, epoch)
        self._graphs.delete(key, epoch)
